package rollup

import (
	"archive/zip"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"svc/schema"
	"svc/schema/chtest"
	"svc/schema/rollups"
	"svc/schema/sink"
)

// dayCase is one local day: where it starts in UTC and how long it lasts.
type dayCase struct {
	zone  string
	date  string
	start string // RFC 3339, UTC
	hours float64
}

// dayCases cover whole-hour, half-hour and quarter-hour offsets, both daylight-saving
// changes of a year in each hemisphere, and a zone whose midnight is skipped.
var dayCases = []dayCase{
	{"UTC", "2026-03-08", "2026-03-08T00:00:00Z", 24},
	{"Asia/Kolkata", "2026-03-08", "2026-03-07T18:30:00Z", 24},
	{"Asia/Kathmandu", "2026-03-08", "2026-03-07T18:15:00Z", 24},
	{"America/New_York", "2026-03-07", "2026-03-07T05:00:00Z", 24},
	{"America/New_York", "2026-03-08", "2026-03-08T05:00:00Z", 23}, // 02:00 EST → 03:00 EDT
	{"America/New_York", "2026-03-09", "2026-03-09T04:00:00Z", 24},
	{"America/New_York", "2026-11-01", "2026-11-01T04:00:00Z", 25}, // 02:00 EDT → 01:00 EST
	{"America/New_York", "2026-11-02", "2026-11-02T05:00:00Z", 24},
	{"Europe/Berlin", "2026-03-29", "2026-03-28T23:00:00Z", 23},    // 02:00 CET → 03:00 CEST
	{"Europe/Berlin", "2026-10-25", "2026-10-24T22:00:00Z", 25},    // 03:00 CEST → 02:00 CET
	{"Australia/Sydney", "2026-04-05", "2026-04-04T13:00:00Z", 25}, // 03:00 AEDT → 02:00 AEST
	{"Australia/Sydney", "2026-10-04", "2026-10-03T14:00:00Z", 23}, // 02:00 AEST → 03:00 AEDT
	{"America/Santiago", "2026-09-06", "2026-09-06T04:00:00Z", 23}, // 00:00 skipped: the day starts at 01:00
}

func mustZone(t testing.TB, name string) *time.Location {
	t.Helper()
	loc, err := schema.LoadZone(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

func date(s string) time.Time {
	d, err := time.Parse(time.DateOnly, s)
	if err != nil {
		panic(err)
	}
	return d
}

func TestDayBoundaries(t *testing.T) {
	for _, c := range dayCases {
		loc := mustZone(t, c.zone)
		d := date(c.date)
		start, end := rollups.DayStart(d, loc), rollups.DayEnd(d, loc)
		if got := start.Format(time.RFC3339); got != c.start {
			t.Errorf("%s %s starts at %s, want %s", c.zone, c.date, got, c.start)
		}
		if got := end.Sub(start).Hours(); got != c.hours {
			t.Errorf("%s %s lasts %vh, want %vh", c.zone, c.date, got, c.hours)
		}
		for _, at := range []time.Time{start, start.Add(time.Second), end.Add(-time.Second)} {
			if !rollups.LocalDate(at, loc).Equal(d) {
				t.Errorf("%s: %s is on %s locally, want %s", c.zone, at.Format(time.RFC3339), rollups.LocalDate(at, loc).Format(time.DateOnly), c.date)
			}
		}
		if rollups.LocalDate(start.Add(-time.Second), loc).Equal(d) || rollups.LocalDate(end, loc).Equal(d) {
			t.Errorf("%s %s: an instant outside [start, end) is on the day", c.zone, c.date)
		}
		// Final from the local day's end plus rollups.Grace, to the second.
		if rollups.StatusIn(d, loc, end.Add(rollups.Grace-time.Second)) != rollups.StatusOpen || rollups.StatusIn(d, loc, end.Add(rollups.Grace)) != rollups.StatusFinal {
			t.Errorf("%s %s: status does not turn final at the local end %s + rollups.Grace", c.zone, c.date, end.Format(time.RFC3339))
		}
	}
}

// TestQuarterHourBucketsFitEveryZone is the premise of pixel_rollups_15m: in every zone
// of the IANA database, from 2012 to 2037, every instant of a UTC quarter hour is on
// the same local date. Every offset is a whole number of quarter hours, so local
// midnights fall on bucket boundaries; a change of offset inside a quarter hour
// (Antarctica/Casey in 2020) leaves the local date as it was. (Until 2011
// Newfoundland and Moncton set clocks back at 00:01 to 23:01 of the day before: in
// those zones, the first minute after such a change went to the wrong day.)
func TestQuarterHourBucketsFitEveryZone(t *testing.T) {
	z, err := zip.OpenReader(filepath.Join(runtime.GOROOT(), "lib", "time", "zoneinfo.zip"))
	if err != nil {
		if os.Getenv("CI") == "true" { // Go's distribution always ships it
			t.Fatalf("no zone list under CI: %v", err)
		}
		t.Skipf("no zone list: %v", err)
	}
	defer z.Close()
	from, to := time.Date(2012, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2038, 1, 1, 0, 0, 0, 0, time.UTC)
	zones, changes := 0, 0
	for _, f := range z.File {
		loc, err := schema.LoadZone(f.Name)
		if err != nil {
			continue // names LoadZone refuses (Factory, …) are never used
		}
		zones++
		for at := from; at.Before(to); {
			if _, off := at.In(loc).Zone(); off%(15*60) != 0 {
				t.Errorf("%s: offset %ds at %s", f.Name, off, at.Format(time.RFC3339))
				break
			}
			_, end := at.In(loc).ZoneBounds()
			if end.IsZero() || !end.Before(to) {
				break
			}
			changes++
			if end.Unix()%(15*60) != 0 && !rollups.LocalDate(end.Add(-time.Second), loc).Equal(rollups.LocalDate(end, loc)) {
				t.Errorf("%s: the change at %s moves the local date inside a quarter hour", f.Name, end.Format(time.RFC3339))
			}
			at = end
		}
	}
	if zones < 400 || changes < 5000 {
		t.Fatalf("checked %d zones, %d changes", zones, changes)
	}
}

// insertAt writes one event per instant for pixel px through the sink: name, EUR value
// 1.0000, consented, with the person of emails[i] (an empty email: none).
func insertAt(t *testing.T, s *sink.Sink, ws, px schema.UUID, name string, at []time.Time, emails []byte, off *int64) {
	t.Helper()
	b := schema.Batch{Workspace: ws, Pixel: px, ReceivedAt: time.Now().UnixMilli()}
	for i, ts := range at {
		e := schema.Event{Name: name, OccurredAt: ts.UnixMilli(), HasValue: true, Value: 10000,
			Currency: [3]byte{'E', 'U', 'R'}, Consent: true, HasEmail: emails[i] != 0}
		e.EmailSHA[0] = emails[i]
		b.Events = append(b.Events, e)
	}
	*off++
	s.Add(&b, 0, *off)
	if err := s.Flush(context.Background(), time.Now()); err != nil {
		t.Fatal(err)
	}
	s.Reset()
}

// TestQueryDailyLocalDays seeds events just inside and just outside each local day of
// dayCases (old enough to cross both daylight-saving changes of 2026: written into the
// events table, as the bench does, since the edge refuses events older than seven
// days) and reads them back per local day: each event counts on its own local date,
// a person seen in two quarter hours of a day counts once, and the status follows the
// local day's end.
func TestQueryDailyLocalDays(t *testing.T) {
	_, conn := chtest.NewDB(t)
	ctx := context.Background()
	s := sink.New(conn, "events", schema.TopicEvents)
	ws := schema.UUID{1}
	var off int64
	for i, c := range dayCases {
		loc := mustZone(t, c.zone)
		d := date(c.date)
		start, end := rollups.DayStart(d, loc), rollups.DayEnd(d, loc)
		px := schema.UUID{2, byte(i)}
		// Inside: the first second, 00:14:59 into the day (same bucket, same person),
		// the middle (another bucket, the same person) and the last second. Outside:
		// the second before and the first second of the next day.
		insertAt(t, s, ws, px, "purchase",
			[]time.Time{start.Add(-time.Second), start, start.Add(15*time.Minute - time.Second), start.Add(end.Sub(start) / 2), end.Add(-time.Second), end},
			[]byte{9, 1, 1, 1, 2, 9}, &off)
		now := end.Add(rollups.Grace) // the day has just turned final; the next one has not
		rows, err := rollups.QueryDaily(ctx, conn, rollups.DailyQuery{Workspace: ws, Pixel: px, TimeZone: c.zone, Limit: 10, Now: now})
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]rollups.DailyRow{}
		for _, r := range rows {
			got[r.Date.Format(time.DateOnly)] = r
			if r.TimeZone != c.zone {
				t.Errorf("%s: row zone %q", c.zone, r.TimeZone)
			}
		}
		prev, next := rollups.LocalDate(start.Add(-time.Second), loc).Format(time.DateOnly), rollups.LocalDate(end, loc).Format(time.DateOnly)
		day := got[c.date]
		if len(rows) != 3 || day.Events != 4 || day.UniquePeople != 2 || day.Value != "4.0000" || day.Status != rollups.StatusFinal ||
			got[prev].Events != 1 || got[next].Events != 1 || got[next].Status != rollups.StatusOpen {
			t.Errorf("%s %s: rows %+v, want 4 events and 2 people on the day, final; 1 event on %s and on %s (open)", c.zone, c.date, rows, prev, next)
		}
		// A one-day range and the cursor both select by local date.
		one, err := rollups.QueryDaily(ctx, conn, rollups.DailyQuery{Workspace: ws, Pixel: px, TimeZone: c.zone, From: d, To: d, Limit: 10})
		if err != nil || len(one) != 1 || one[0].Events != 4 {
			t.Errorf("%s %s: from=to=%s gives %+v %v", c.zone, c.date, c.date, one, err)
		}
		after, err := rollups.QueryDaily(ctx, conn, rollups.DailyQuery{Workspace: ws, Pixel: px, TimeZone: c.zone, Limit: 10,
			After: &rollups.DailyCursor{Date: d, EventName: "purchase", Currency: "EUR"}})
		if err != nil || len(after) != 1 || after[0].Date.Format(time.DateOnly) != next {
			t.Errorf("%s %s: after the day gives %+v %v", c.zone, c.date, after, err)
		}
	}
}

// TestQueryDailyBucketsMatchDaily: UTC days from the 15-minute table equal those of
// the daily table, row for row, unique people included.
func TestQueryDailyBucketsMatchDaily(t *testing.T) {
	_, conn := chtest.NewDB(t)
	ctx := context.Background()
	s := sink.New(conn, "events", schema.TopicEvents)
	ws, px := schema.UUID{1}, schema.UUID{3}
	var off int64
	base := time.Date(2026, 10, 30, 0, 0, 0, 0, time.UTC)
	var at []time.Time
	var emails []byte
	for i := 0; i < 300; i++ {
		at = append(at, base.Add(time.Duration(i)*37*time.Minute))
		emails = append(emails, byte(i%23))
	}
	insertAt(t, s, ws, px, "purchase", at, emails, &off)
	insertAt(t, s, ws, px, "lead", at[:50], emails[:50], &off)
	q := rollups.DailyQuery{Workspace: ws, Pixel: px, Limit: 100, Now: base}
	daily, err := rollups.QueryDaily(ctx, conn, q)
	if err != nil {
		t.Fatal(err)
	}
	q.Buckets = true
	buckets, err := rollups.QueryDaily(ctx, conn, q)
	if err != nil {
		t.Fatal(err)
	}
	if len(daily) < 8 || fmt.Sprint(daily) != fmt.Sprint(buckets) {
		t.Fatalf("daily table:\n%+v\n15-minute table:\n%+v", daily, buckets)
	}
	// Local days of a zone partition the same events: totals agree.
	ny, err := rollups.QueryDaily(ctx, conn, rollups.DailyQuery{Workspace: ws, Pixel: px, TimeZone: "America/New_York", Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	if sum(daily) != sum(ny) || sum(ny) != 350 {
		t.Fatalf("events: %d in UTC days, %d in New York days, want 350", sum(daily), sum(ny))
	}
}

func sum(rows []rollups.DailyRow) uint64 {
	var n uint64
	for _, r := range rows {
		n += r.Events
	}
	return n
}

func TestQueryDailyRefusesUnknownZones(t *testing.T) {
	for _, z := range []string{"Mars/Olympus", "Local", "america/new_york", "UTC'; DROP TABLE events --", "../etc/passwd", "posix/UTC"} {
		_, err := rollups.QueryDaily(context.Background(), nil, rollups.DailyQuery{TimeZone: z, Limit: 1})
		if err == nil || !strings.Contains(err.Error(), "unknown time zone") {
			t.Errorf("zone %q: %v", z, err)
		}
	}
}

// TestQueryDailyLocalPagesBounded: pages of any size, each bounded to the local days it
// reaches (lastPageDate), add up to the whole listing, with and without a range.
func TestQueryDailyLocalPagesBounded(t *testing.T) {
	_, conn := chtest.NewDB(t)
	ctx := context.Background()
	s := sink.New(conn, "events", schema.TopicEvents)
	ws, px := schema.UUID{1}, schema.UUID{4}
	var off int64
	base := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	var at []time.Time
	var who []byte
	for d := 0; d < 30; d++ {
		if d%4 != 3 { // gaps: days without events
			at, who = append(at, base.AddDate(0, 0, d).Add(10*time.Hour)), append(who, 1)
		}
	}
	for _, name := range []string{"a", "b", "c"} {
		insertAt(t, s, ws, px, name, at, who, &off)
	}
	for _, rng := range [][2]time.Time{{}, {base.AddDate(0, 0, 2), base.AddDate(0, 0, 27)}} {
		all, err := rollups.QueryDaily(ctx, conn, rollups.DailyQuery{Workspace: ws, Pixel: px, TimeZone: "Australia/Sydney", From: rng[0], To: rng[1], Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		for _, limit := range []int{1, 4, 7, 25, 100} {
			var got []rollups.DailyRow
			q := rollups.DailyQuery{Workspace: ws, Pixel: px, TimeZone: "Australia/Sydney", From: rng[0], To: rng[1], Limit: limit}
			for {
				page, err := rollups.QueryDaily(ctx, conn, q)
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, page...)
				if len(page) < limit {
					break
				}
				c := page[len(page)-1].Cursor()
				q.After = &c
			}
			if fmt.Sprint(got) != fmt.Sprint(all) {
				t.Fatalf("range %v, limit %d: pages give %d rows, the listing %d", rng, limit, len(got), len(all))
			}
		}
	}
}
