package trace

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/google/uuid"

	"svc/lib/chpool"
	"svc/schema"
	"svc/schema/rejection"
)

// The live feed of a pixel: what the pipeline stored of its requests, accepted events
// (table events) and rejections (table rejections), as they arrive. It reads only what
// the consumers already store, so it costs the ingest path nothing.
//
// Its cursor is, per Kafka partition, the highest offset read of each table: a pixel's
// records go to one partition (Partition) and a partition's records are stored in
// offset order, each flush all or nothing, so the rows past the cursor are exactly the
// ones not read yet (a count row of rejections carries the highest offset it adds up).
// A row is visible once its flush is: "after the cursor" never skips one that appears
// later with a lower offset.

// LiveCursor is where a feed resumes: per partition, the highest offset read of events
// (E) and of rejections (R), and the time before which no unread row can have been
// stored (Floor: it bounds the scan).
type LiveCursor struct {
	E, R  map[int32]int64
	Floor time.Time
}

// String is the cursor as a URL-safe token: "<floor unix s>~e<p>.<offset>,…~r<p>.<offset>,…".
func (c LiveCursor) String() string {
	part := func(tag string, m map[int32]int64) string {
		var b strings.Builder
		b.WriteString(tag)
		for i, p := range slices.Sorted(maps.Keys(m)) {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, "%d.%d", p, m[p])
		}
		return b.String()
	}
	return strconv.FormatInt(c.Floor.Unix(), 10) + "~" + part("e", c.E) + "~" + part("r", c.R)
}

// maxLiveFloor bounds a cursor's floor (Unix seconds): String writes one no later than
// now, and a forged one past 2100 would make a date ClickHouse cannot parse.
const maxLiveFloor = 4102444800 // 2100-01-01

// ErrCursor is a cursor token that is not one String made.
var ErrCursor = errors.New("trace: malformed live cursor")

// ParseLiveCursor reads a token String made.
func ParseLiveCursor(s string) (LiveCursor, error) {
	f := strings.Split(s, "~")
	if len(s) > 4096 || len(f) != 3 || !strings.HasPrefix(f[1], "e") || !strings.HasPrefix(f[2], "r") {
		return LiveCursor{}, ErrCursor
	}
	floor, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil || floor < 0 || floor > maxLiveFloor {
		return LiveCursor{}, ErrCursor
	}
	c := LiveCursor{Floor: time.Unix(floor, 0).UTC()}
	if c.E, err = parseOffsets(f[1][1:]); err != nil {
		return LiveCursor{}, err
	}
	if c.R, err = parseOffsets(f[2][1:]); err != nil {
		return LiveCursor{}, err
	}
	return c, nil
}

func parseOffsets(s string) (map[int32]int64, error) {
	m := map[int32]int64{}
	if s == "" {
		return m, nil
	}
	for _, pair := range strings.Split(s, ",") {
		ps, os, ok := strings.Cut(pair, ".")
		p, err1 := strconv.ParseInt(ps, 10, 32)
		o, err2 := strconv.ParseInt(os, 10, 64)
		if !ok || err1 != nil || err2 != nil || p < 0 || o < -1 {
			return nil, ErrCursor
		}
		m[int32(p)] = o
	}
	return m, nil
}

// LiveRow is one accepted event or one stored rejection. Identity is never read: an
// accepted event says only whether it carried an email digest.
type LiveRow struct {
	Accepted   bool
	ReceivedAt time.Time // at the edge (the 202's second)
	StoredAt   time.Time // the consumer's flush (inserted_at)
	RequestID  string
	Key        uuid.UUID
	Index      int // the event's index in its batch; rejection.Batch: the batch as a whole
	// Accepted events.
	EventName   string
	EventID     uuid.UUID
	OccurredAt  time.Time
	Value       string // "" without a value
	Currency    string
	Consent     bool
	EmailDigest bool // the event carried an email digest (never the digest)
	// Rejections.
	Status uint16
	Field  string
	Rule   string
	Input  string // the value received, as JSON text, redacted (identity values withheld)

	offset int64
}

// LiveQuery is one read of the feed: the pixel, and at most Limit rows of each table.
type LiveQuery struct {
	Workspace uuid.UUID
	Sandbox   bool
	Pixel     uuid.UUID
	Limit     int
}

// LivePage is one read: the rows newest first, the cursor after them, and what was not
// shown.
type LivePage struct {
	Rows   []LiveRow
	Cursor LiveCursor
	// Accepted and Rejected count what arrived past the cursor (Rejected: every
	// rejection, stored or only counted). SkippedAccepted and SkippedRejected are those
	// past Limit, not in Rows (the page samples: it shows the newest); NotStored the
	// rejections past the consumer's cap of samples per pixel and minute, counted but
	// never stored, so never shown.
	Accepted, Rejected               uint64
	SkippedAccepted, SkippedRejected uint64
	NotStored                        uint64
}

// LiveWindow bounds how far back a feed reads: a first read shows what was stored in
// it; a cursor's floor older than it is raised to it.
const LiveWindow = 15 * time.Minute

// floorMargin is kept below each read's time in the next cursor's floor: a flush
// stamped before the read (inserted_at) may become visible just after it.
const floorMargin = 2 * time.Minute

// Live reads q's pixel's rows stored past after (the zero cursor: the last
// LiveWindow), at most q.Limit of each table, newest first, and the cursor after them.
func Live(ctx context.Context, conn driver.Conn, q LiveQuery, after LiveCursor, now time.Time) (LivePage, error) {
	floor := after.Floor
	if floor.Before(now.Add(-LiveWindow)) {
		floor = now.Add(-LiveWindow)
	}
	page := LivePage{Cursor: LiveCursor{E: maps.Clone(after.E), R: maps.Clone(after.R), Floor: now.Add(-floorMargin).UTC().Truncate(time.Second)}}
	if page.Cursor.E == nil {
		page.Cursor.E = map[int32]int64{}
	}
	if page.Cursor.R == nil {
		page.Cursor.R = map[int32]int64{}
	}
	pixel := "workspace_id = toUUID(?) AND sandbox = ? AND pixel_id = toUUID(?) AND inserted_at >= toDateTime(?)"
	args := []any{q.Workspace.String(), chpool.UInt8(q.Sandbox), q.Pixel.String(), floor.Unix()}
	// Accepted events: event_date bounds the sort key (an event is at most MaxEventAge old when received).
	ev := pixel + " AND event_date >= toDate(?)"
	evArgs := append(slices.Clone(args), floor.Add(-schema.MaxEventAge-24*time.Hour).UTC().Format("2006-01-02"))
	ends, err := ranges(ctx, conn, "events", ev, evArgs, after.E, "count(), toUInt64(0)")
	if err != nil {
		return LivePage{}, fmt.Errorf("trace: live events: %w", err)
	}
	if len(ends.to) > 0 {
		rows, err := liveEvents(ctx, conn, ev+" AND "+between(after.E, ends.to), evArgs, q.Limit)
		if err != nil {
			return LivePage{}, err
		}
		page.Rows = rows
		page.Accepted, page.SkippedAccepted = ends.shown, past(ends.shown, len(rows))
		maps.Copy(page.Cursor.E, ends.to)
	}
	// Rejections: minute (received) bounds the sort key; their lag is at most an hour here.
	rj := pixel + " AND minute >= toDateTime(?)"
	rjArgs := append(slices.Clone(args), floor.Add(-time.Hour).Unix())
	ends, err = ranges(ctx, conn, rejection.Table, rj, rjArgs, after.R, "countIf(sample = 1), sumIf(toUInt64(rejections), sample = 0)")
	if err != nil {
		return LivePage{}, fmt.Errorf("trace: live rejections: %w", err)
	}
	if len(ends.to) > 0 {
		rows, err := liveRejections(ctx, conn, rj+" AND sample = 1 AND "+between(after.R, ends.to), rjArgs, q.Limit)
		if err != nil {
			return LivePage{}, err
		}
		page.Rows = append(page.Rows, rows...)
		page.Rejected, page.SkippedRejected, page.NotStored = ends.shown+ends.counted, past(ends.shown, len(rows)), ends.counted
		maps.Copy(page.Cursor.R, ends.to)
	}
	slices.SortStableFunc(page.Rows, func(x, y LiveRow) int {
		if c := y.ReceivedAt.Compare(x.ReceivedAt); c != 0 {
			return c
		}
		return int(y.offset - x.offset)
	})
	return page, nil
}

// spans is what lies past a cursor: per partition the highest offset (to), the rows
// that can be listed (shown) and the rejections only counted (counted).
type spans struct {
	to             map[int32]int64
	shown, counted uint64
}

// ranges reads, per partition, the highest offset past cur of table's rows matching
// where, and the aggregates agg (two UInt64: listable rows, counted-only rejections).
func ranges(ctx context.Context, conn driver.Conn, table, where string, args []any, cur map[int32]int64, agg string) (spans, error) {
	s := spans{to: map[int32]int64{}}
	err := chpool.EachRow(ctx, conn, "SELECT kafka_partition, max(kafka_offset), "+agg+" FROM "+table+" WHERE "+where+
		" AND kafka_offset > "+offsetOf(cur)+" GROUP BY kafka_partition", args, func(r chpool.Row) error {
		var p int32
		var o int64
		var shown, counted uint64
		if err := r.Scan(&p, &o, &shown, &counted); err != nil {
			return err
		}
		s.to[p], s.shown, s.counted = o, s.shown+shown, s.counted+counted
		return nil
	})
	return s, err
}

// offsetOf is an SQL expression of a row's partition's offset in cur (-1: none read).
// Partitions and offsets are integers: nothing to quote.
func offsetOf(cur map[int32]int64) string {
	if len(cur) == 0 {
		return "toInt64(-1)"
	}
	var b strings.Builder
	b.WriteString("multiIf(")
	for _, p := range slices.Sorted(maps.Keys(cur)) {
		fmt.Fprintf(&b, "kafka_partition = %d, toInt64(%d), ", p, cur[p])
	}
	b.WriteString("toInt64(-1))")
	return b.String()
}

// between selects the rows past from up to to, per partition.
func between(from, to map[int32]int64) string {
	return "kafka_offset > " + offsetOf(from) + " AND kafka_offset <= " + offsetOf(to)
}

func liveEvents(ctx context.Context, conn driver.Conn, where string, args []any, limit int) ([]LiveRow, error) {
	var out []LiveRow
	err := chpool.EachRow(ctx, conn, "SELECT received_at, inserted_at, request_id, key_id, batch_index, event_name, event_id, occurred_at, "+
		"if(has_value = 1, toString(value), ''), currency, consent, has_email, kafka_offset FROM events WHERE "+where+
		" ORDER BY kafka_offset DESC, batch_index DESC LIMIT "+strconv.Itoa(limit), args, func(r chpool.Row) error {
		var x LiveRow
		var index, consent, email uint8
		if err := r.Scan(&x.ReceivedAt, &x.StoredAt, &x.RequestID, &x.Key, &index, &x.EventName, &x.EventID, &x.OccurredAt,
			&x.Value, &x.Currency, &consent, &email, &x.offset); err != nil {
			return err
		}
		x.Accepted, x.Index, x.Consent, x.EmailDigest = true, int(index), consent == 1, email == 1
		out = append(out, x.utc())
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("trace: live events: %w", err)
	}
	return out, nil
}

func liveRejections(ctx context.Context, conn driver.Conn, where string, args []any, limit int) ([]LiveRow, error) {
	var out []LiveRow
	err := chpool.EachRow(ctx, conn, "SELECT received_at, inserted_at, request_id, key_id, event_index, status, field, rule, value, kafka_offset FROM "+
		rejection.Table+" WHERE "+where+" ORDER BY kafka_offset DESC, event_index DESC, field DESC LIMIT "+strconv.Itoa(limit), args,
		func(r chpool.Row) error {
			var x LiveRow
			var index int16
			if err := r.Scan(&x.ReceivedAt, &x.StoredAt, &x.RequestID, &x.Key, &index, &x.Status, &x.Field, &x.Rule, &x.Input, &x.offset); err != nil {
				return err
			}
			x.Index = int(index)
			out = append(out, x.utc())
			return nil
		})
	if err != nil {
		return nil, fmt.Errorf("trace: live rejections: %w", err)
	}
	return out, nil
}

// past is how many of n rows a read of got left out (0 when a lagging replica showed more).
func past(n uint64, got int) uint64 { return n - min(n, uint64(got)) }

func (x LiveRow) utc() LiveRow {
	x.ReceivedAt, x.StoredAt, x.OccurredAt = x.ReceivedAt.UTC(), x.StoredAt.UTC(), x.OccurredAt.UTC()
	return x
}
