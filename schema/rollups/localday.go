package rollups

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/google/uuid"

	"svc/lib/chpool"
)

// A local day is a calendar day of a time zone: from the first instant whose local date
// is D to the first instant whose local date is D+1. It lasts 24 hours, or 23 or 25 on
// the days a daylight-saving change falls on (and other lengths when a zone changed its
// offset). Dates are carried as time.Time at 00:00 UTC of that calendar date.

// DayStart returns the first instant of date's calendar day in loc. When a zone skips
// local midnight (a change at 00:00, as America/Santiago has), the day starts when the
// clocks jump, at the first instant that is on date locally.
func DayStart(date time.Time, loc *time.Location) time.Time {
	y, m, d := date.Date()
	t := time.Date(y, m, d, 0, 0, 0, 0, loc)
	if ty, tm, td := t.Date(); ty != y || tm != m || td != d {
		// Midnight does not exist: Go normalised it to the previous day's last hour.
		// The day starts where that zone period ends.
		_, end := t.ZoneBounds()
		return end.UTC()
	}
	// Midnight may exist twice (clocks set back at 01:00 to 00:00): take the first.
	for _, back := range []time.Duration{time.Hour, 30 * time.Minute} {
		if e := t.Add(-back); sameDate(e.In(loc), y, m, d) {
			t = e
		}
	}
	return t.UTC()
}

func sameDate(t time.Time, y int, m time.Month, d int) bool {
	ty, tm, td := t.Date()
	return ty == y && tm == m && td == d
}

// DayEnd returns the end of date's calendar day in loc: the start of the next one.
func DayEnd(date time.Time, loc *time.Location) time.Time {
	y, m, d := date.Date()
	return DayStart(time.Date(y, m, d+1, 0, 0, 0, 0, time.UTC), loc)
}

// LocalDate returns the calendar date of t in loc, as 00:00 UTC of that date.
func LocalDate(t time.Time, loc *time.Location) time.Time {
	y, m, d := t.In(loc).Date()
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
}

// StatusIn is the status of date's rollup in loc: "final" from the local day's end plus
// Grace on, "open" before. In UTC it is Status.
func StatusIn(date time.Time, loc *time.Location, now time.Time) string {
	if !now.Before(DayEnd(date, loc).Add(Grace)) {
		return StatusFinal
	}
	return StatusOpen
}

// localSQL is the query of q over pixel_rollups_15m: buckets grouped by their date in
// loc (ClickHouse's toDate(bucket, zone), with the zone as a bound string literal that
// schema.LoadZone has vetted), states merged per local day.
func localSQL(q DailyQuery, loc *time.Location) (string, []any) {
	var b strings.Builder
	tz := loc.String()
	b.WriteString(`SELECT toDate(bucket, ?) AS local_date, event_name, currency,
       countMerge(events_state), sumMerge(consented_state), sumMerge(value_state), uniqIfMerge(people_state)
FROM pixel_rollups_15m`)
	where, args := localWhere(q, tz)
	b.WriteString(where)
	b.WriteString("\nGROUP BY local_date, event_name, currency\nORDER BY local_date, event_name, currency\nLIMIT ")
	if q.After == nil && q.Offset > 0 {
		b.WriteString(strconv.Itoa(q.Offset) + ", ")
	}
	b.WriteString(strconv.Itoa(q.Limit))
	return b.String(), append([]any{tz}, args...)
}

// localWhere is the WHERE clause of q over pixel_rollups_15m. The bucket range is
// bounded a day wider than any zone's offset needs, so the primary key narrows the
// read; the local date itself decides what is in range.
func localWhere(q DailyQuery, tz string) (string, []any) {
	var b strings.Builder
	b.WriteString("\nWHERE workspace_id = toUUID(?) AND sandbox = ? AND pixel_id = toUUID(?)")
	args := []any{uuid.UUID(q.Workspace).String(), chpool.UInt8(q.Sandbox), uuid.UUID(q.Pixel).String()}
	if !q.From.IsZero() {
		b.WriteString(" AND bucket >= toDateTime(?, 'UTC') AND toDate(bucket, ?) >= toDate(?)")
		args = append(args, utcTime(q.From.AddDate(0, 0, -1)), tz, day(q.From))
	}
	if !q.To.IsZero() {
		b.WriteString(" AND bucket < toDateTime(?, 'UTC') AND toDate(bucket, ?) <= toDate(?)")
		args = append(args, utcTime(q.To.AddDate(0, 0, 2)), tz, day(q.To))
	}
	if q.EventName != "" {
		b.WriteString(" AND event_name = ?")
		args = append(args, q.EventName)
	}
	if q.After != nil {
		b.WriteString(" AND bucket >= toDateTime(?, 'UTC') AND (toDate(bucket, ?), event_name, currency) > (toDate(?), ?, ?)")
		args = append(args, utcTime(q.After.Date.AddDate(0, 0, -1)), tz, day(q.After.Date), q.After.EventName, q.After.Currency)
	}
	return b.String(), args
}

// lastPageDate returns the last local date q's page can reach, or the zero time when
// the page runs to the end of q's range. A page is Offset + Limit rows in (date, event
// name, currency) order; a date holds one row per distinct event name and currency, and
// counting those reads only the key columns of pixel_rollups_15m. Bounding the page's
// query by this date spares it merging the states of every later day (a 90-day read
// with the API's default page of 100 rows merges a few days instead of 90). The count
// looks at the first planWindow days from the page's start, then, if they do not fill
// the page, at the rest. Rows inserted meanwhile can only add rows up to the date
// found, so the page is never short.
func lastPageDate(ctx context.Context, conn driver.Conn, q DailyQuery, loc *time.Location) (time.Time, error) {
	need, seen := uint64(q.Limit), uint64(0)
	if q.After == nil {
		need += uint64(q.Offset)
	}
	start := q.From
	if q.After != nil {
		start = q.After.Date
	}
	w := q
	if !start.IsZero() && (q.To.IsZero() || q.To.Sub(start) > planWindow*24*time.Hour) {
		w.To = start.AddDate(0, 0, planWindow)
		last, err := countLocalRows(ctx, conn, w, loc, need, &seen)
		if err != nil || !last.IsZero() {
			return last, err
		}
		w.From, w.To, w.After = w.To.AddDate(0, 0, 1), q.To, nil // the rest, without the cursor's date
	}
	return countLocalRows(ctx, conn, w, loc, need, &seen)
}

// planWindow is how many days from a page's start lastPageDate counts first.
const planWindow = 7

// countLocalRows adds the rows of w's local dates to *seen, in date order, and returns
// the date on which *seen reaches need (zero if it does not).
func countLocalRows(ctx context.Context, conn driver.Conn, w DailyQuery, loc *time.Location, need uint64, seen *uint64) (time.Time, error) {
	tz := loc.String()
	where, args := localWhere(w, tz)
	rows, err := conn.Query(ctx, "SELECT toDate(bucket, ?) AS local_date, uniqExact(event_name, currency)\nFROM pixel_rollups_15m"+
		where+"\nGROUP BY local_date\nORDER BY local_date", append([]any{tz}, args...)...)
	if err != nil {
		return time.Time{}, fmt.Errorf("rollup: plan local days: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var d time.Time
		var n uint64
		if err := rows.Scan(&d, &n); err != nil {
			return time.Time{}, fmt.Errorf("rollup: plan local days: %w", err)
		}
		if *seen += n; *seen >= need {
			return time.Date(d.Year(), d.Month(), d.Day(), 0, 0, 0, 0, time.UTC), nil
		}
	}
	return time.Time{}, rows.Err()
}

// utcTime formats the 00:00 UTC of t's date for toDateTime(?, 'UTC').
func utcTime(t time.Time) string { return day(t) + " 00:00:00" }
