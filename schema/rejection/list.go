package rejection

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/google/uuid"
)

// Query selects one pixel's rejections: those received from the minute of Since on
// (zero: all kept), of Rule ("" any).
type Query struct {
	Workspace uuid.UUID
	Sandbox   bool
	Pixel     uuid.UUID
	Since     time.Time // rounded down to its minute
	Rule      string
}

// Cursor is the position after which a page resumes: the order key of the last row
// read (received_at, request_id, event_index, field: unique per stored rejection).
type Cursor struct {
	ReceivedAt int64 // unix seconds
	RequestID  string
	Index      int
	Field      string
	// Tail tells apart rows equal in the above (the edge's and the consumer's records of
	// one event, a repeated member); nil in a cursor issued before it was added, which
	// then compares on the four above.
	Tail *CursorTail
}

// CursorTail is the rest of a rejection's position: its rule and the Kafka record it
// came in.
type CursorTail struct {
	Rule      string
	Partition int32
	Offset    int64
}

// Stored is one stored rejection.
type Stored struct {
	ReceivedAt  time.Time
	Key         uuid.UUID
	RequestID   string
	Status      uint16
	BatchEvents uint16
	Index       int16 // Batch: the batch as a whole
	Field       string
	Rule        string
	Value       string // JSON text
	Partition   int32  // the Kafka record it came in
	Offset      int64
}

// Cursor is s's position.
func (s Stored) Cursor() Cursor {
	return Cursor{ReceivedAt: s.ReceivedAt.Unix(), RequestID: s.RequestID, Index: int(s.Index), Field: s.Field,
		Tail: &CursorTail{Rule: s.Rule, Partition: s.Partition, Offset: s.Offset}}
}

func (q Query) where() (string, []any) {
	w := []string{"workspace_id = toUUID(?)", "sandbox = ?", "pixel_id = toUUID(?)"}
	args := []any{q.Workspace.String(), boolByte(q.Sandbox), q.Pixel.String()}
	if !q.Since.IsZero() {
		w = append(w, "minute >= toDateTime(?)")
		args = append(args, Minute(q.Since).Unix())
	}
	if q.Rule != "" {
		w = append(w, "rule = ?")
		args = append(args, q.Rule)
	}
	return strings.Join(w, " AND "), args
}

func boolByte(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}

// List returns up to limit stored rejections of q, newest first (received_at,
// request_id, event_index, field, rule, kafka_partition, kafka_offset, all descending),
// after after (nil: from the newest) or past offset rows (deprecated offset paging).
func List(ctx context.Context, conn driver.Conn, q Query, after *Cursor, offset, limit int) ([]Stored, error) {
	where, args := q.where()
	var b strings.Builder
	b.WriteString("SELECT received_at, key_id, request_id, status, batch_events, event_index, field, rule, value, kafka_partition, kafka_offset FROM " +
		Table + " WHERE sample = 1 AND " + where)
	switch {
	case after != nil && after.Tail != nil:
		b.WriteString(" AND (received_at, request_id, event_index, field, rule, kafka_partition, kafka_offset) < " +
			"(toDateTime(?), ?, toInt16(?), ?, ?, toInt32(?), toInt64(?))")
		args = append(args, after.ReceivedAt, after.RequestID, after.Index, after.Field, after.Tail.Rule, after.Tail.Partition, after.Tail.Offset)
	case after != nil:
		b.WriteString(" AND (received_at, request_id, event_index, field) < (toDateTime(?), ?, toInt16(?), ?)")
		args = append(args, after.ReceivedAt, after.RequestID, after.Index, after.Field)
	}
	b.WriteString(" ORDER BY received_at DESC, request_id DESC, event_index DESC, field DESC, rule DESC, kafka_partition DESC, kafka_offset DESC LIMIT ")
	if after == nil && offset > 0 {
		fmt.Fprintf(&b, "%d, ", offset)
	}
	fmt.Fprintf(&b, "%d", limit)
	rows, err := conn.Query(ctx, b.String(), args...)
	if err != nil {
		return nil, fmt.Errorf("rejections: list: %w", err)
	}
	defer rows.Close()
	var out []Stored
	for rows.Next() {
		var s Stored
		if err := rows.Scan(&s.ReceivedAt, &s.Key, &s.RequestID, &s.Status, &s.BatchEvents, &s.Index, &s.Field, &s.Rule, &s.Value,
			&s.Partition, &s.Offset); err != nil {
			return nil, fmt.Errorf("rejections: scan: %w", err)
		}
		s.ReceivedAt = s.ReceivedAt.UTC()
		out = append(out, s)
	}
	return out, rows.Err()
}

// Counts are the exact numbers of q's rejections: all of them, and those not stored
// (past the per-pixel-per-minute cap of samples).
type Counts struct {
	Rejections uint64
	NotStored  uint64
}

// Count returns q's counts.
func Count(ctx context.Context, conn driver.Conn, q Query) (Counts, error) {
	where, args := q.where()
	var c Counts
	err := conn.QueryRow(ctx, "SELECT sum(toUInt64(rejections)), sumIf(toUInt64(rejections), sample = 0) FROM "+Table+" WHERE "+where, args...).
		Scan(&c.Rejections, &c.NotStored)
	if err != nil {
		return Counts{}, fmt.Errorf("rejections: count: %w", err)
	}
	return c, nil
}
