package trace

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kgo"

	"svc/lib/chpool"
	"svc/schema"
	"svc/schema/rejection"
	"svc/schema/rollups"
)

// MaxDays bounds the days of a pixel's health; DefaultDays is its default.
const (
	MaxDays     = 31
	DefaultDays = 7
)

// PixelDays asks for the health of one pixel: its zone, and its last Days local days
// (today included).
type PixelDays struct {
	ID   uuid.UUID
	Loc  *time.Location
	Days int
}

// Day is one local day of a pixel's health.
type Day struct {
	Date       time.Time // the calendar date, as 00:00 UTC of that date
	Accepted   uint64    // events of the day (by occurred_at), as the rollups count them
	Rejected   map[string]uint64
	Duplicates uint64 // rule duplicate_event_id (by the day received)
}

// Health is a pixel's recent days.
type Health struct {
	Days         []Day     // oldest first
	LastAccepted time.Time // the latest received_at of a stored event within the days (zero: none)
}

// window is p's first local day and its start.
func (p PixelDays) window(now time.Time) (first, start time.Time) {
	today := rollups.LocalDate(now, p.Loc)
	first = today.AddDate(0, 0, -(p.Days - 1))
	return first, rollups.DayStart(first, p.Loc)
}

// Healths reads the health of pixels of workspace ws in environment sandbox at now:
// three queries for them all, each bounded by the sort key's prefix (workspace,
// environment, pixels) and by the earliest start of their windows.
func Healths(ctx context.Context, conn driver.Conn, ws uuid.UUID, sandbox bool, pixels []PixelDays, now time.Time) (map[uuid.UUID]*Health, error) {
	out := map[uuid.UUID]*Health{}
	if len(pixels) == 0 {
		return out, nil
	}
	byID := map[uuid.UUID]PixelDays{}
	from := now
	tuples := make([]string, len(pixels))
	for i, p := range pixels {
		first, start := p.window(now)
		if start.Before(from) {
			from = start
		}
		h := &Health{}
		for d := first; !d.After(rollups.LocalDate(now, p.Loc)); d = d.AddDate(0, 0, 1) {
			h.Days = append(h.Days, Day{Date: d, Rejected: map[string]uint64{}})
		}
		out[p.ID], byID[p.ID] = h, p
		tuples[i] = "toUUID('" + p.ID.String() + "')" // our own UUIDs' text: no quoting issue
	}
	in := "workspace_id = toUUID(?) AND sandbox = ? AND pixel_id IN (" + strings.Join(tuples, ", ") + ")"
	args := []any{ws.String(), chpool.UInt8(sandbox), from.UTC().Truncate(15 * time.Minute).Unix()}
	at := func(pixel uuid.UUID, t time.Time) *Day {
		h, p := out[pixel], byID[pixel]
		if h == nil {
			return nil
		}
		d := rollups.LocalDate(t, p.Loc)
		i := int(d.Sub(h.Days[0].Date).Hours()+12) / 24 // calendar dates: whole days apart
		if d.Before(h.Days[0].Date) || i >= len(h.Days) {
			return nil
		}
		return &h.Days[i]
	}
	// Accepted: the 15-minute rollups (each quarter hour lies in one local day of every zone).
	err := chpool.EachRow(ctx, conn, "SELECT pixel_id, bucket, countMerge(events_state) FROM pixel_rollups_15m WHERE "+in+
		" AND bucket >= toDateTime(?) GROUP BY pixel_id, bucket", args, func(s chpool.Row) error {
		var px uuid.UUID
		var b time.Time
		var n uint64
		if err := s.Scan(&px, &b, &n); err != nil {
			return err
		}
		if d := at(px, b); d != nil {
			d.Accepted += n
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("trace: accepted: %w", err)
	}
	// Rejected and duplicates: the rejections table's exact counts (samples and counts past the cap).
	err = chpool.EachRow(ctx, conn, "SELECT pixel_id, toStartOfFifteenMinutes(minute) AS q, rule, sum(toUInt64(rejections)) FROM "+rejection.Table+
		" WHERE "+in+" AND minute >= toDateTime(?) GROUP BY pixel_id, q, rule", args, func(s chpool.Row) error {
		var px uuid.UUID
		var q time.Time
		var rule string
		var n uint64
		if err := s.Scan(&px, &q, &rule, &n); err != nil {
			return err
		}
		if d := at(px, q); d != nil {
			if rule == schema.RuleDuplicateEventID || rule == schema.RuleDuplicateBatch {
				d.Duplicates += n
			} else {
				d.Rejected[rule] += n
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("trace: rejected: %w", err)
	}
	// The last accepted event: raw events received within the window (their event_date is
	// at most MaxEventAge before they were received).
	err = chpool.EachRow(ctx, conn, "SELECT pixel_id, max(received_at) FROM events WHERE "+in+
		" AND received_at >= toDateTime(?) AND event_date >= toDate(?) GROUP BY pixel_id",
		append(args, from.Add(-schema.MaxEventAge-24*time.Hour).UTC().Format("2006-01-02")), func(s chpool.Row) error {
			var px uuid.UUID
			var t time.Time
			if err := s.Scan(&px, &t); err != nil {
				return err
			}
			if h := out[px]; h != nil && !t.Before(byID[px].start(now)) {
				h.LastAccepted = t.UTC()
			}
			return nil
		})
	if err != nil {
		return nil, fmt.Errorf("trace: last accepted: %w", err)
	}
	return out, nil
}

func (p PixelDays) start(now time.Time) time.Time {
	_, s := p.window(now)
	return s
}

// Partition is the partition of schema.TopicEvents, of n, that pixel's batches are
// written to: the edge keys each record by the pixel's UUID and its producer uses the
// Kafka client's default partitioner, which places a keyed record by Kafka's murmur2
// hash of the key (as the Java client does).
func Partition(pixel uuid.UUID, n int) int32 {
	return int32(kgo.StickyKeyPartitioner(nil).ForTopic(schema.TopicEvents).Partition(&kgo.Record{Key: pixel[:]}, n))
}

// Received is what the edge received of the day: accepted, rejected and duplicates.
func (d Day) Received() uint64 { return d.Accepted + d.RejectedTotal() + d.Duplicates }

// RejectedTotal is the day's rejected events, every rule.
func (d Day) RejectedTotal() uint64 {
	var n uint64
	for _, c := range d.Rejected {
		n += c
	}
	return n
}

// Lag is the pipeline's lag for one pixel: the partition of schema.TopicEvents its
// batches go to, the completeness watermark of its batches (every event of the pixel a
// 202 accepted before Through is stored: the least of the watermarks of the partitions
// its batches went to under every partition count published, since its earlier batches
// stay on the partition of an earlier count) and now minus it. Through is zero until the
// consumer published it.
type Lag struct {
	Partition int32
	Through   time.Time
	Seconds   float64
}

// Lags reads the consumer's published watermarks (rollups.Watermarks, of ClickHouse
// database db) for pixels; empty when none were published yet (or db is "").
func Lags(ctx context.Context, rdb redis.UniversalClient, db string, pixels []uuid.UUID, now time.Time) (map[uuid.UUID]Lag, error) {
	out := map[uuid.UUID]Lag{}
	if db == "" || rdb == nil {
		return out, nil
	}
	pub, err := rollups.Watermarks(ctx, rdb, db)
	if err != nil || pub.N == 0 {
		return out, err
	}
	for _, px := range pixels {
		l := Lag{Partition: Partition(px, pub.N)}
		if w, ok := pub.Through(func(n int) int32 { return Partition(px, n) }); ok {
			l.Through, l.Seconds = w, max(0, now.Sub(w).Seconds())
		}
		out[px] = l
	}
	return out, nil
}
