package rollup

import (
	"cmp"
	"context"
	"fmt"
	"testing"
	"time"

	"svc/schema"
	"svc/schema/chtest"
	"svc/schema/rollups"
	"svc/schema/sink"
)

func TestStatus(t *testing.T) {
	day := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	end := day.Add(24 * time.Hour)
	for _, c := range []struct {
		now  time.Time
		want string
	}{
		{day.Add(time.Hour), rollups.StatusOpen},
		{end, rollups.StatusOpen},
		{end.Add(schema.MaxEventAge), rollups.StatusOpen}, // the edge still accepted events for the day a moment ago
		{end.Add(rollups.Grace - time.Second), rollups.StatusOpen},
		{end.Add(rollups.Grace), rollups.StatusFinal},
		{end.AddDate(0, 1, 0), rollups.StatusFinal},
		{day.Add(-time.Hour), rollups.StatusOpen}, // a day in the future
	} {
		if got := rollups.Status(day, c.now); got != c.want {
			t.Errorf("Status(%s) at %s = %s, want %s", day.Format("2006-01-02"), c.now.Format(time.RFC3339), got, c.want)
		}
	}
	// With the edge's 7-day bound: day D is final from D+8 01:00 UTC.
	if got := rollups.Status(day, time.Date(2026, 3, 9, 1, 0, 0, 0, time.UTC)); got != rollups.StatusFinal {
		t.Errorf("D+8 01:00: %s", got)
	}
}

// insertDays writes, for pixel px, one event per (day, name, currency) of the given
// days, names and currencies, through the sink, with value 1.2345 and one person.
func insertDays(t *testing.T, s *sink.Sink, ws, px schema.UUID, sandbox bool, days []time.Time, names []string, off *int64) {
	t.Helper()
	for _, d := range days {
		for _, n := range names {
			b := schema.Batch{Workspace: ws, Pixel: px, Sandbox: sandbox, ReceivedAt: time.Now().UnixMilli()}
			for _, cur := range [][3]byte{{}, {'E', 'U', 'R'}} {
				e := schema.Event{Name: n, OccurredAt: d.Add(time.Hour).UnixMilli(), HasValue: cur != [3]byte{}, Value: 12345, Currency: cur, Consent: true, HasEmail: true}
				e.EmailSHA[0] = 7
				b.Events = append(b.Events, e)
			}
			*off++
			s.Add(&b, 0, *off)
		}
	}
	if err := s.Flush(context.Background(), time.Now()); err != nil {
		t.Fatal(err)
	}
	s.Reset()
}

// TestQueryDailyPagingWhileInserting pages through UTC days (the daily table) and
// through Asia/Kolkata days (the 15-minute table, each page bounded to the days it
// reaches): the events at 01:00 UTC fall on the same dates in both.
func TestQueryDailyPagingWhileInserting(t *testing.T) {
	for _, zone := range []string{"", "Asia/Kolkata"} {
		t.Run("zone="+zone, func(t *testing.T) { testPagingWhileInserting(t, zone) })
	}
}

func testPagingWhileInserting(t *testing.T, zone string) {
	_, conn := chtest.NewDB(t)
	ctx := context.Background()
	s := sink.New(conn, "events", schema.TopicEvents)
	ws, px := schema.UUID{1}, schema.UUID{2}
	var off int64
	base := time.Date(2026, 1, 10, 0, 0, 0, 0, time.UTC)
	days := []time.Time{base, base.AddDate(0, 0, 1), base.AddDate(0, 0, 2), base.AddDate(0, 0, 3)}
	insertDays(t, s, ws, px, false, days, []string{"lead", "purchase"}, &off)
	// The same pixel in sandbox, and another pixel: must never show.
	insertDays(t, s, ws, px, true, days, []string{"sandbox_only"}, &off)
	insertDays(t, s, ws, schema.UUID{3}, false, days, []string{"other_pixel"}, &off)

	q := rollups.DailyQuery{Workspace: ws, Pixel: px, TimeZone: zone, Limit: 3, Now: base.AddDate(0, 0, 10).Add(time.Hour)}
	seen := map[string]int{}
	var pages int
	for {
		rows, err := rollups.QueryDaily(ctx, conn, q)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, r := range rows {
			k := fmt.Sprintf("%s|%s|%s", r.Date.Format("2006-01-02"), r.EventName, r.Currency)
			seen[k]++
			if r.EventName == "sandbox_only" || r.EventName == "other_pixel" {
				t.Fatalf("row of another environment or pixel: %+v", r)
			}
			if r.Events != 1 || r.ConsentedEvents != 1 || r.UniquePeople != 1 || r.PixelID != px {
				t.Fatalf("row %+v", r)
			}
			if want := map[bool]string{true: "1.2345", false: "0.0000"}[r.Currency == "EUR"]; r.Value != want {
				t.Fatalf("value %s, want %s", r.Value, want)
			}
			wantStatus := rollups.StatusIn(r.Date, mustZone(t, cmp.Or(zone, "UTC")), q.Now)
			if r.Status != wantStatus {
				t.Fatalf("status %s, want %s", r.Status, wantStatus)
			}
		}
		if pages == 2 {
			// New events arrive between pages: on an earlier day (before the cursor) and
			// a later one. Neither may cause a skip or a repeat.
			insertDays(t, s, ws, px, false, []time.Time{base, base.AddDate(0, 0, 5)}, []string{"aaa_new", "purchase"}, &off)
		}
		if len(rows) < q.Limit {
			break
		}
		q.After = &rollups.DailyCursor{Date: rows[len(rows)-1].Date, EventName: rows[len(rows)-1].EventName, Currency: rows[len(rows)-1].Currency}
	}
	for k, n := range seen {
		if n != 1 {
			t.Errorf("row %s seen %d times", k, n)
		}
	}
	for _, d := range days {
		for _, n := range []string{"lead", "purchase"} {
			for _, c := range []string{"", "EUR"} {
				if k := fmt.Sprintf("%s|%s|%s", d.Format("2006-01-02"), n, c); seen[k] != 1 {
					t.Errorf("pre-existing row %s skipped", k)
				}
			}
		}
	}
	if seen[base.AddDate(0, 0, 5).Format("2006-01-02")+"|purchase|EUR"] != 1 {
		t.Error("a row added after the cursor did not appear")
	}

	// Offset paging and filters.
	rows, err := rollups.QueryDaily(ctx, conn, rollups.DailyQuery{Workspace: ws, Pixel: px, TimeZone: zone, Limit: 2, Offset: 2,
		From: days[1], To: days[2], EventName: "lead"})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || !rows[0].Date.Equal(days[2]) || rows[0].EventName != "lead" || rows[0].Currency != "" {
		t.Fatalf("offset page: %+v", rows)
	}
	if _, err := rollups.QueryDaily(ctx, conn, rollups.DailyQuery{Limit: 0}); err == nil {
		t.Error("limit 0 accepted")
	}
}
