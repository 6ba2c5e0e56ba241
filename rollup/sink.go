package rollup

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/ClickHouse/ch-go/proto"
	"github.com/ClickHouse/clickhouse-go/v2/lib/column"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/google/uuid"

	"svc/schema"
)

// Sink buffers decoded events column by column, in ClickHouse's native column layout,
// and writes them to the events table in one INSERT per Flush. One INSERT of one block
// into a table partitioned by toYYYYMM(inserted_at), with one inserted_at per flush, is
// one part: all or nothing.
//
// The buffers are ch-go's native columns (proto.Col*): UUIDs as [16]byte, DateTime as
// uint32 seconds, Date as uint16 days, Decimal(18,4) as int64 × 10^4, strings as one
// byte buffer with offsets. Add converts nothing per row beyond integer division, and
// allocates only when a buffer grows; the buffers are kept across flushes.
//
// A Sink is not safe for concurrent use.
type Sink struct {
	conn  driver.Conn
	query string
	topic string
	c     sinkColumns
	// table lists the columns in INSERT order, pointing into c.
	table []namedColumn
	// wire is every column's native encoding, one after the other (reused).
	wire proto.Buffer
	// receivedMs and occurredMs keep the millisecond times per row for EachAge.
	receivedMs, occurredMs []int64
}

type sinkColumns struct {
	workspace, pixel, key, event                     proto.ColUUID
	sandbox, hasValue, consent, hasEmail, batchIndex proto.ColUInt8
	name, currency, requestID, topic                 proto.ColStr
	occurred, received, inserted                     proto.ColDateTime
	date                                             proto.ColDate
	value                                            proto.ColDecimal64 // × 10^4
	email                                            proto.ColFixedStr  // 32 bytes per row
	partition                                        proto.ColInt32
	offset                                           proto.ColInt64
}

// namedColumn is one column of the INSERT: its name, the ClickHouse type its native
// encoding is (schema/migrations/0001_events.sql), and its buffer.
type namedColumn struct {
	name, chType string
	col          proto.Column
}

// columns lists c's columns in the order of the INSERT's column list.
func (c *sinkColumns) columns() []namedColumn {
	const dt = "DateTime('UTC')"
	return []namedColumn{
		{"workspace_id", "UUID", &c.workspace}, {"pixel_id", "UUID", &c.pixel}, {"sandbox", "UInt8", &c.sandbox},
		{"key_id", "UUID", &c.key}, {"event_id", "UUID", &c.event}, {"event_name", "String", &c.name},
		{"occurred_at", dt, &c.occurred}, {"event_date", "Date", &c.date}, {"value", "Decimal(18, 4)", &c.value},
		{"has_value", "UInt8", &c.hasValue}, {"currency", "String", &c.currency}, {"consent", "UInt8", &c.consent},
		{"has_email", "UInt8", &c.hasEmail}, {"email_sha256", "FixedString(32)", &c.email}, {"request_id", "String", &c.requestID},
		{"received_at", dt, &c.received}, {"inserted_at", dt, &c.inserted}, {"kafka_topic", "String", &c.topic},
		{"kafka_partition", "Int32", &c.partition}, {"kafka_offset", "Int64", &c.offset}, {"batch_index", "UInt8", &c.batchIndex},
	}
}

// NewSink returns a sink writing to table (normally "events") in conn's database, for
// records of topic.
func NewSink(conn driver.Conn, table, topic string) *Sink {
	s := &Sink{conn: conn, topic: topic}
	s.c.email.SetSize(32)
	s.table = s.c.columns()
	names := make([]string, len(s.table))
	for i, nc := range s.table {
		names[i] = nc.name
	}
	s.query = "INSERT INTO " + table + " (" + strings.Join(names, ", ") + ")"
	return s
}

// Len is the number of buffered rows.
func (s *Sink) Len() int { return len(s.c.offset) }

const (
	msPerSecond = 1000
	msPerDay    = 86400 * msPerSecond
)

// Add buffers the events of one decoded record; it keeps no reference to b. Times must
// lie in [1970, 2106) (the consumer refuses others): they are stored as unsigned
// seconds and days.
func (s *Sink) Add(b *schema.Batch, partition int32, offset int64) {
	c := &s.c
	received := proto.DateTime(b.ReceivedAt / msPerSecond)
	for i := range b.Events {
		e := &b.Events[i]
		c.workspace = append(c.workspace, uuid.UUID(b.Workspace))
		c.pixel = append(c.pixel, uuid.UUID(b.Pixel))
		c.key = append(c.key, uuid.UUID(b.Key))
		c.event = append(c.event, uuid.UUID(e.ID))
		c.sandbox = append(c.sandbox, b2u(b.Sandbox))
		c.name.Append(e.Name)
		c.occurred.Data = append(c.occurred.Data, proto.DateTime(e.OccurredAt/msPerSecond))
		c.date = append(c.date, proto.Date(e.OccurredAt/msPerDay))
		v := e.Value
		if !e.HasValue {
			v = 0
		}
		c.value = append(c.value, proto.Decimal64(v))
		c.hasValue = append(c.hasValue, b2u(e.HasValue))
		c.currency.AppendBytes(trimCurrency(&e.Currency))
		c.consent = append(c.consent, b2u(e.Consent))
		c.hasEmail = append(c.hasEmail, b2u(e.HasEmail))
		if e.HasEmail {
			c.email.Buf = append(c.email.Buf, e.EmailSHA[:]...)
		} else {
			c.email.Buf = append(c.email.Buf, zero32[:]...)
		}
		c.requestID.Append(b.RequestID)
		c.received.Data = append(c.received.Data, received)
		c.partition = append(c.partition, partition)
		c.offset = append(c.offset, offset)
		c.batchIndex = append(c.batchIndex, uint8(i))
		s.receivedMs = append(s.receivedMs, b.ReceivedAt)
		s.occurredMs = append(s.occurredMs, e.OccurredAt)
	}
}

var zero32 [32]byte

func b2u(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}

// trimCurrency returns the code without its trailing zero bytes (none for "no currency").
func trimCurrency(c *[3]byte) []byte {
	n := len(c)
	for n > 0 && c[n-1] == 0 {
		n--
	}
	return c[:n]
}

// Flush writes every buffered row in one INSERT, stamped inserted_at = now. The rows
// stay buffered either way: call Reset after a success. On error the outcome is
// unknown: the INSERT may or may not have landed (read MaxOffsets, then Drop).
//
// The query id and settings come from ctx (clickhouse.Context), as for any query.
func (s *Sink) Flush(ctx context.Context, now time.Time) error {
	if s.Len() == 0 {
		return nil
	}
	s.stamp(now)
	b, err := s.conn.PrepareBatch(ctx, s.query)
	if err != nil {
		return fmt.Errorf("prepare insert: %w", err)
	}
	if err := s.load(b.Columns()); err != nil {
		_ = b.Abort()
		return err
	}
	if err := b.Send(); err != nil {
		return fmt.Errorf("insert %d rows: %w", s.Len(), err)
	}
	return nil
}

// stamp fills the per-flush columns (kafka_topic, inserted_at) for every buffered row.
func (s *Sink) stamp(now time.Time) {
	c := &s.c
	c.topic.Reset()
	c.inserted.Reset()
	at := proto.DateTime(now.Unix())
	for range s.Len() {
		c.topic.Append(s.topic)
		c.inserted.Data = append(c.inserted.Data, at)
	}
}

// load hands the buffered columns to the driver's columns of one prepared INSERT: all
// columns are encoded once, one after the other, in the native wire format, and each
// driver column of the same name decodes its part. Fixed-width columns are bulk copies;
// no row is converted.
//
// (clickhouse-go's typed Append would convert every row: a big.Int per Decimal, a
// time.Time per DateTime, and allocate. ch-go's own client cannot talk to ClickHouse
// 18.16: it omits the client info that 18.16's protocol revision 54412 expects with
// a query.)
func (s *Sink) load(cols []column.Interface) error {
	if len(cols) != len(s.table) {
		return fmt.Errorf("insert has %d columns, the sink %d", len(cols), len(s.table))
	}
	s.wire.Reset()
	for i, nc := range s.table {
		if cols[i].Name() != nc.name || string(cols[i].Type()) != nc.chType {
			return fmt.Errorf("insert column %d is %s %s, the sink writes %s %s", i, cols[i].Name(), cols[i].Type(), nc.name, nc.chType)
		}
		nc.col.EncodeColumn(&s.wire)
	}
	r := proto.NewReader(bytes.NewReader(s.wire.Buf))
	n := s.Len()
	for i, nc := range s.table {
		if err := cols[i].Decode(r, n); err != nil {
			return fmt.Errorf("column %s: %w", nc.name, err)
		}
	}
	return nil
}

// EachAge calls f with the age of every buffered event at now, since the edge accepted
// it and since it happened.
func (s *Sink) EachAge(now time.Time, f func(sinceReceived, sinceOccurred time.Duration)) {
	ms := now.UnixMilli()
	for i := range s.receivedMs {
		f(time.Duration(ms-s.receivedMs[i])*time.Millisecond, time.Duration(ms-s.occurredMs[i])*time.Millisecond)
	}
}

// Reset drops every buffered row, keeping capacity.
func (s *Sink) Reset() {
	for _, nc := range s.table {
		nc.col.Reset()
	}
	s.receivedMs, s.occurredMs = s.receivedMs[:0], s.occurredMs[:0]
}

// Partitions returns, for each partition with buffered rows, the highest buffered offset.
func (s *Sink) Partitions() map[int32]int64 {
	out := map[int32]int64{}
	for i, p := range s.c.partition {
		if o, ok := out[p]; !ok || s.c.offset[i] > o {
			out[p] = s.c.offset[i]
		}
	}
	return out
}

// Drop removes every buffered row for which drop(partition, offset) is true.
func (s *Sink) Drop(drop func(partition int32, offset int64) bool) {
	c := &s.c
	keep := make([]bool, s.Len())
	any := false
	for i := range keep {
		keep[i] = !drop(c.partition[i], c.offset[i])
		any = any || !keep[i]
	}
	if !any {
		return
	}
	c.workspace, c.pixel = compact(c.workspace, keep), compact(c.pixel, keep)
	c.key, c.event = compact(c.key, keep), compact(c.event, keep)
	c.sandbox, c.hasValue = compact(c.sandbox, keep), compact(c.hasValue, keep)
	c.consent, c.hasEmail = compact(c.consent, keep), compact(c.hasEmail, keep)
	c.batchIndex = compact(c.batchIndex, keep)
	c.occurred.Data, c.received.Data = compact(c.occurred.Data, keep), compact(c.received.Data, keep)
	c.date, c.value = compact(c.date, keep), compact(c.value, keep)
	c.partition, c.offset = compact(c.partition, keep), compact(c.offset, keep)
	s.receivedMs, s.occurredMs = compact(s.receivedMs, keep), compact(s.occurredMs, keep)
	c.name, c.currency = compactStr(c.name, keep), compactStr(c.currency, keep)
	c.requestID = compactStr(c.requestID, keep)
	c.topic.Reset() // refilled by the next Flush
	c.inserted.Reset()
	email := c.email.Buf[:0]
	for i, k := range keep {
		if k {
			email = append(email, c.email.Buf[i*32:i*32+32]...)
		}
	}
	c.email.Buf = email
}

func compact[T any](s []T, keep []bool) []T {
	out := s[:0]
	for i, k := range keep {
		if k {
			out = append(out, s[i])
		}
	}
	return out
}

// compactStr returns the kept rows of c in a new column (rows are variable-length).
func compactStr(c proto.ColStr, keep []bool) proto.ColStr {
	var out proto.ColStr
	for i, k := range keep {
		if k {
			out.AppendBytes(c.RowBytes(i))
		}
	}
	return out
}

// MaxOffsets returns, for each of partitions that has rows of topic in table, the
// highest kafka_offset stored. Partitions without rows are absent from the result.
func MaxOffsets(ctx context.Context, conn driver.Conn, table, topic string, partitions []int32) (map[int32]int64, error) {
	out := map[int32]int64{}
	if len(partitions) == 0 {
		return out, nil
	}
	in := make([]string, len(partitions))
	for i, p := range partitions {
		in[i] = strconv.Itoa(int(p))
	}
	rows, err := conn.Query(ctx, "SELECT kafka_partition, max(kafka_offset) FROM "+table+
		" WHERE kafka_topic = ? AND kafka_partition IN ("+strings.Join(in, ", ")+") GROUP BY kafka_partition", topic)
	if err != nil {
		return nil, fmt.Errorf("read stored offsets: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var p int32
		var o int64
		if err := rows.Scan(&p, &o); err != nil {
			return nil, err
		}
		out[p] = o
	}
	return out, rows.Err()
}
