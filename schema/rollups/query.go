package rollups

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/google/uuid"
	"github.com/shopspring/decimal"

	"svc/lib/chpool"
	"svc/schema"
)

// Row statuses of GET /pixel-rollups.
const (
	StatusOpen  = "open"
	StatusFinal = "final"
)

// Grace is how long after its day ends a day's rollup may still change: the edge
// accepts events up to schema.MaxEventAge late (a late event lands on its own day), plus
// one hour for the pipeline (Kafka, batching, a short ClickHouse outage).
const Grace = schema.MaxEventAge + time.Hour

// Status is the rule for a UTC day's status (StatusIn for any zone): a day is "final"
// once it ended more than Grace ago, that is from D + 1 day + MaxEventAge + 1h (00:00
// UTC of D+1 is the day's end); before that it is "open". With MaxEventAge = 7 days,
// day D is final from D+8 01:00 UTC.
func Status(date, now time.Time) string { return StatusIn(date, time.UTC, now) }

// DailyQuery selects daily rollup rows of one pixel. Rows are ordered by (date,
// event_name, currency), which is unique per row and never reordered by new events,
// so keyset paging with After neither skips nor repeats rows while inserts go on.
//
// Days are calendar days of TimeZone. UTC days are read from pixel_rollups_daily;
// other zones' days from pixel_rollups_15m, whose 15-minute UTC buckets are grouped by
// their local date and their states merged (localday.go).
type DailyQuery struct {
	Workspace schema.UUID // required: the key's workspace
	Sandbox   bool        // the key's environment; sandbox and live never mix
	Pixel     schema.UUID // required
	// TimeZone is the IANA zone whose days the rows are ("" is UTC); it must pass
	// schema.LoadZone. A zone the ClickHouse server has no zone file for fails with
	// an error that schema.ZoneUnknownToServer recognises.
	TimeZone  string
	From, To  time.Time // inclusive days of TimeZone; zero means unbounded
	EventName string    // optional exact filter
	After     *DailyCursor
	Offset    int       // offset paging (deprecated in the API); only without After
	Limit     int       // at least 1; the caller bounds it (the API: lib/paging.MaxLimit)
	Now       time.Time // for Status; zero means time.Now()
	// Buckets reads UTC days from the 15-minute table too (tests and benchmarks compare
	// the two paths).
	Buckets bool
}

// DailyCursor is the position of a row: paging resumes strictly after it.
type DailyCursor struct {
	Date      time.Time // the day, in the query's time zone
	EventName string
	Currency  string
}

// DailyRow is one day of one event name and currency for a pixel.
type DailyRow struct {
	PixelID         schema.UUID
	Date            time.Time // the calendar date in TimeZone, as 00:00 UTC of that date
	TimeZone        string    // the zone of Date: the query's, "UTC" for ""
	EventName       string
	Currency        string // ISO 4217 code, "" when the events carried none
	Events          uint64 // every accepted event
	ConsentedEvents uint64 // events with consent.measurement true
	Value           string // sum of values, decimal with 4 places, e.g. "12.5000"
	UniquePeople    uint64 // distinct email hashes among consented events
	Status          string // StatusOpen or StatusFinal, see StatusIn
}

// Cursor returns the position of r for DailyQuery.After.
func (r DailyRow) Cursor() DailyCursor {
	return DailyCursor{Date: r.Date, EventName: r.EventName, Currency: r.Currency}
}

// QueryDaily reads the daily rollup rows selected by q from conn's database, merging
// the aggregate states. It returns at most q.Limit rows; fewer means the last page.
func QueryDaily(ctx context.Context, conn driver.Conn, q DailyQuery) ([]DailyRow, error) {
	if q.Limit < 1 {
		return nil, fmt.Errorf("rollup: limit %d: want at least 1", q.Limit)
	}
	if q.Offset < 0 {
		return nil, errors.New("rollup: negative offset")
	}
	if q.TimeZone == "" {
		q.TimeZone = schema.UTC
	}
	loc, err := schema.LoadZone(q.TimeZone)
	if err != nil {
		return nil, fmt.Errorf("rollup: %w", err)
	}
	sql, args := dailySQL(q)
	if q.TimeZone != schema.UTC || q.Buckets {
		// A range of a week or less is merged whole; a longer one up to the page's end.
		if q.From.IsZero() || q.To.IsZero() || q.To.Sub(q.From) >= planWindow*24*time.Hour {
			last, err := lastPageDate(ctx, conn, q, loc)
			if err != nil {
				return nil, err
			}
			if !last.IsZero() && (q.To.IsZero() || last.Before(q.To)) {
				q.To = last
			}
		}
		sql, args = localSQL(q, loc)
	}
	rows, err := conn.Query(ctx, sql, args...)
	if err != nil {
		return nil, fmt.Errorf("rollup: query daily: %w", err)
	}
	defer rows.Close()
	now := q.Now
	if now.IsZero() {
		now = time.Now()
	}
	out := make([]DailyRow, 0, q.Limit)
	for rows.Next() {
		r := DailyRow{PixelID: q.Pixel, TimeZone: q.TimeZone}
		var v decimal.Decimal
		if err := rows.Scan(&r.Date, &r.EventName, &r.Currency, &r.Events, &r.ConsentedEvents, &v, &r.UniquePeople); err != nil {
			return nil, fmt.Errorf("rollup: scan daily: %w", err)
		}
		r.Date = time.Date(r.Date.Year(), r.Date.Month(), r.Date.Day(), 0, 0, 0, 0, time.UTC)
		r.Value = v.StringFixed(4)
		r.Status = StatusIn(r.Date, loc, now)
		out = append(out, r)
	}
	return out, rows.Err()
}

func dailySQL(q DailyQuery) (string, []any) {
	var b strings.Builder
	b.WriteString(`SELECT event_date, event_name, currency,
       countMerge(events_state), sumMerge(consented_state), sumMerge(value_state), uniqIfMerge(people_state)
FROM pixel_rollups_daily
WHERE workspace_id = toUUID(?) AND sandbox = ? AND pixel_id = toUUID(?)`)
	args := []any{uuid.UUID(q.Workspace).String(), chpool.UInt8(q.Sandbox), uuid.UUID(q.Pixel).String()}
	if !q.From.IsZero() {
		b.WriteString(" AND event_date >= toDate(?)")
		args = append(args, day(q.From))
	}
	if !q.To.IsZero() {
		b.WriteString(" AND event_date <= toDate(?)")
		args = append(args, day(q.To))
	}
	if q.EventName != "" {
		b.WriteString(" AND event_name = ?")
		args = append(args, q.EventName)
	}
	if q.After != nil {
		b.WriteString(" AND (event_date, event_name, currency) > (toDate(?), ?, ?)")
		args = append(args, day(q.After.Date), q.After.EventName, q.After.Currency)
	}
	b.WriteString("\nGROUP BY event_date, event_name, currency\nORDER BY event_date, event_name, currency\nLIMIT ")
	if q.After == nil && q.Offset > 0 {
		b.WriteString(strconv.Itoa(q.Offset) + ", ")
	}
	b.WriteString(strconv.Itoa(q.Limit))
	return b.String(), args
}

func day(t time.Time) string { return t.UTC().Format("2006-01-02") }

// FormatValue renders an amount in 1/10^4 units with 4 decimals, e.g. 125000 → "12.5000".
func FormatValue(v int64) string {
	return decimal.New(v, -4).StringFixed(4)
}
