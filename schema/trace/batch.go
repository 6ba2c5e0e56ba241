// Package trace reads what the stores hold of one request to POST /events (GET
// /batches/{request_id}) and of a pixel's recent days (GET /pixels): the raw `events`
// table, the `rejections` table and the 15-minute rollups, and which Kafka partition a
// pixel's batches go to. It only reads; every query is bounded by the tables' sort-key
// prefix (workspace, environment, and the pixel where there is one) and by time.
package trace

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/google/uuid"

	"svc/lib/chpool"
	"svc/schema"
	"svc/schema/rejection"
	"svc/schema/rollups"
)

// LookBack bounds the search for a request: a request id carries no time, so a batch is
// looked for among the rows stored (and rejections received) in the LookBack before
// now. 8 days is the shortest raw-event retention a workspace can set; the query reads
// the request_id column of the workspace's rows of those days only.
const LookBack = 8 * 24 * time.Hour

// Position is where one Kafka record of the batch was written, and what ClickHouse
// holds of it: a batch is one record, so a batch stored exactly once has one Position.
type Position struct {
	Topic     string // the topic's label with its incarnation (events.v1@<id>)
	Partition int32
	Offset    int64
	Events    uint64    // rows stored from it
	StoredAt  time.Time // the INSERT that stored them (inserted_at, seconds)
}

// Batch is what the stores hold of one request.
type Batch struct {
	RequestID  string
	Pixel, Key uuid.UUID
	ReceivedAt time.Time // at the edge, seconds
	// Status is the answer's status: 202, or 422, 409 or 429 for a batch refused whole.
	Status uint16
	// BatchEvents is the number of events in the request as the edge counted them, when
	// a rejection recorded it (0: unknown, or a 409 or 429 refused before reading it).
	// The edge's rows carry the batch's size, the consumer's (copies it dropped) the
	// number the 202 accepted, so the largest is the batch's.
	BatchEvents uint64
	Stored      []Position        // by partition and offset
	Rejected    map[string]uint64 // stored rejections by rule, duplicates excluded
	Duplicates  uint64            // events dropped as copies: of an event_id (rule duplicate_event_id), or all of a request that was a copy of a stored batch (rule duplicate_batch)
	occurred    map[time.Time]uint64
}

// Accepted is the number of the batch's events ClickHouse holds.
func (b *Batch) Accepted() uint64 {
	var n uint64
	for _, p := range b.Stored {
		n += p.Events
	}
	return n
}

// DayCount is a number of events on one local day.
type DayCount struct {
	Date   time.Time // the calendar date, as 00:00 UTC of that date
	Events uint64
}

// Days are the local days of loc the batch's stored events counted in (by occurred_at,
// as the rollups count them), in order.
func (b *Batch) Days(loc *time.Location) []DayCount {
	m := map[time.Time]uint64{}
	for at, n := range b.occurred {
		m[rollups.LocalDate(at, loc)] += n
	}
	out := make([]DayCount, 0, len(m))
	for d, n := range m {
		out = append(out, DayCount{d, n})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Date.Before(out[j].Date) })
	return out
}

// FindBatch reads request requestID of workspace ws in environment sandbox: its stored
// events (per Kafka record and per occurred_at) and its stored rejections. found is
// false when neither table holds anything of it within LookBack of now (an unknown
// request, another workspace's, one not yet stored, or one older than LookBack).
func FindBatch(ctx context.Context, conn driver.Conn, ws uuid.UUID, sandbox bool, requestID string, now time.Time) (b Batch, found bool, err error) {
	since := now.Add(-LookBack).UTC().Truncate(time.Second)
	b = Batch{RequestID: requestID, Rejected: map[string]uint64{}, occurred: map[time.Time]uint64{}}
	// event_date is the UTC date of occurred_at, which the edge takes up to MaxEventAge
	// before it received the event: the bound on it narrows the sort key's range.
	where := ` WHERE workspace_id = toUUID(?) AND sandbox = ? AND event_date >= toDate(?) AND inserted_at >= toDateTime(?)
  AND received_at >= toDateTime(?) AND request_id = ?`
	args := []any{ws.String(), chpool.UInt8(sandbox), since.Add(-schema.MaxEventAge - 24*time.Hour).Format("2006-01-02"),
		since.Unix(), since.Unix() - 3600, requestID}
	rows, err := conn.Query(ctx, `SELECT pixel_id, any(key_id), min(received_at), kafka_topic, kafka_partition, kafka_offset, count(), max(inserted_at)
FROM events`+where+` GROUP BY pixel_id, kafka_topic, kafka_partition, kafka_offset ORDER BY kafka_partition, kafka_offset`, args...)
	if err != nil {
		return b, false, fmt.Errorf("trace: batch events: %w", err)
	}
	for rows.Next() {
		var p Position
		var recv time.Time
		if err := rows.Scan(&b.Pixel, &b.Key, &recv, &p.Topic, &p.Partition, &p.Offset, &p.Events, &p.StoredAt); err != nil {
			rows.Close()
			return b, false, fmt.Errorf("trace: scan batch events: %w", err)
		}
		p.StoredAt = p.StoredAt.UTC()
		if b.ReceivedAt.IsZero() || recv.Before(b.ReceivedAt) {
			b.ReceivedAt = recv.UTC()
		}
		b.Stored = append(b.Stored, p)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return b, false, err
	}
	if len(b.Stored) > 0 {
		if err := b.readOccurred(ctx, conn, where, args); err != nil {
			return b, false, err
		}
	}
	if err := b.readRejections(ctx, conn, ws, sandbox, since); err != nil {
		return b, false, err
	}
	if b.Status == 0 {
		b.Status = 202
	}
	return b, len(b.Stored) > 0 || b.BatchEvents > 0 || len(b.Rejected) > 0 || b.Duplicates > 0, nil
}

func (b *Batch) readOccurred(ctx context.Context, conn driver.Conn, where string, args []any) error {
	rows, err := conn.Query(ctx, "SELECT occurred_at, count() FROM events"+where+" GROUP BY occurred_at", args...)
	if err != nil {
		return fmt.Errorf("trace: batch days: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var at time.Time
		var n uint64
		if err := rows.Scan(&at, &n); err != nil {
			return err
		}
		b.occurred[at.UTC()] += n
	}
	return rows.Err()
}

// readRejections reads the request's rejections by rule: its stored samples and, past
// the consumer's cap of samples per pixel and minute, the count rows of a 202 (which
// carry its request id; a batch refused whole is only counted per pixel and minute past
// the cap, so it is not found). A sample is counted once however many rows hold it: the
// consumer's record of the copies it dropped is produced at least once, so one copy may
// be in two records (its index among the accepted events, the event_id it maps to and
// the batch's size then agree); the rejections' consumer skips a second copy of such a
// record by its batch id, which keeps a count row single.
func (b *Batch) readRejections(ctx context.Context, conn driver.Conn, ws uuid.UUID, sandbox bool, since time.Time) error {
	rows, err := conn.Query(ctx, `SELECT rule,
       uniqExactIf(event_index, field, value, batch_events, sample = 1) + sumIf(toUInt64(rejections), sample = 0),
       min(received_at), any(pixel_id), any(key_id), max(status), max(batch_events)
FROM `+rejection.Table+` WHERE workspace_id = toUUID(?) AND sandbox = ? AND minute >= toDateTime(?) AND request_id = ?
GROUP BY rule`, ws.String(), chpool.UInt8(sandbox), rejection.Minute(since).Unix(), b.RequestID)
	if err != nil {
		return fmt.Errorf("trace: batch rejections: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var rule string
		var n uint64
		var recv time.Time
		var pixel, key uuid.UUID
		var status, events uint16
		if err := rows.Scan(&rule, &n, &recv, &pixel, &key, &status, &events); err != nil {
			return fmt.Errorf("trace: scan batch rejections: %w", err)
		}
		if rule == schema.RuleDuplicateEventID || rule == schema.RuleDuplicateBatch {
			b.Duplicates += n
		} else {
			b.Rejected[rule] += n
		}
		if b.ReceivedAt.IsZero() || recv.Before(b.ReceivedAt) {
			b.ReceivedAt = recv.UTC()
		}
		if b.Pixel == uuid.Nil {
			b.Pixel, b.Key = pixel, key
		}
		b.Status = max(b.Status, status)
		b.BatchEvents = max(b.BatchEvents, uint64(events))
	}
	return rows.Err()
}
