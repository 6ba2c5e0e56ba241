package rollup

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/ClickHouse/ch-go/proto"
	"github.com/ClickHouse/clickhouse-go/v2/lib/column"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"svc/schema"
)

// Sink buffers decoded events column by column, in ClickHouse's Native wire format,
// and writes them to the events table in one INSERT per Flush. One INSERT of one block
// into a table partitioned by toYYYYMM(inserted_at), with one inserted_at per flush, is
// one part: all or nothing.
//
// Each buffer holds its rows as the Native format sends them: UUIDs as 16 bytes (two
// little-endian halves), DateTime as uint32 seconds, Date as uint16 days, Decimal(18,4)
// as int64 × 10^4, FixedString(32) as 32 bytes, String as a length and the bytes. Add
// converts nothing per row beyond integer division; a flush hands the buffers to the
// driver without encoding them; buffers are kept across flushes, so Add allocates only
// while they grow.
//
// A Sink is not safe for concurrent use.
type Sink struct {
	conn  driver.Conn
	query string
	topic string
	c     sinkColumns
	// table lists the columns in INSERT order, pointing into c.
	table []namedColumn
	// wire reads the columns' Native bytes one after the other (reused).
	wire partsReader
	// receivedMs and occurredMs keep the millisecond times per row for EachAge.
	receivedMs, occurredMs []int64
}

type sinkColumns struct {
	workspace, pixel, key, event                     uuidColumn
	sandbox, hasValue, consent, hasEmail, batchIndex fixedColumn[uint8]
	name, currency, requestID, topic                 stringColumn
	occurred, received, inserted                     fixedColumn[uint32] // DateTime: Unix seconds
	date                                             fixedColumn[uint16] // Date: days since 1970-01-01
	value                                            fixedColumn[int64]  // Decimal(18,4): × 10^4
	email                                            fixedBytesColumn    // FixedString(32)
	partition                                        fixedColumn[int32]
	offset                                           fixedColumn[int64]
}

// namedColumn is one column of the INSERT: its name, the ClickHouse type its buffer
// holds the Native encoding of (schema/migrations/0001_events.sql), and the buffer.
type namedColumn struct {
	name, chType string
	col          nativeColumn
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
	s.c.email.size = 32
	s.c.workspace, s.c.pixel, s.c.key, s.c.event = newUUIDColumn(), newUUIDColumn(), newUUIDColumn(), newUUIDColumn()
	s.table = s.c.columns()
	names := make([]string, len(s.table))
	for i, nc := range s.table {
		names[i] = nc.name
	}
	s.query = "INSERT INTO " + table + " (" + strings.Join(names, ", ") + ")"
	return s
}

// SetTopic sets the kafka_topic of the rows flushed from now on (the topic's label,
// incarnation.go).
func (s *Sink) SetTopic(label string) { s.topic = label }

// Len is the number of buffered rows.
func (s *Sink) Len() int { return len(s.c.offset.v) }

const (
	msPerSecond = 1000
	msPerDay    = 86400 * msPerSecond
)

// Add buffers the events of one decoded record; it keeps no reference to b. Times must
// lie in [1970, 2106) (the consumer refuses others): they are stored as unsigned
// seconds and days.
func (s *Sink) Add(b *schema.Batch, partition int32, offset int64) {
	c := &s.c
	ws, px, key := nativeUUID(&b.Workspace), nativeUUID(&b.Pixel), nativeUUID(&b.Key)
	received := uint32(b.ReceivedAt / msPerSecond)
	for i := range b.Events {
		e := &b.Events[i]
		c.workspace.append(&ws)
		c.pixel.append(&px)
		c.key.append(&key)
		id := nativeUUID(&e.ID)
		c.event.append(&id)
		c.sandbox.v = append(c.sandbox.v, b2u(b.Sandbox))
		c.name.append(e.Name)
		c.occurred.v = append(c.occurred.v, uint32(e.OccurredAt/msPerSecond))
		c.date.v = append(c.date.v, uint16(e.OccurredAt/msPerDay))
		v := e.Value
		if !e.HasValue {
			v = 0
		}
		c.value.v = append(c.value.v, v)
		c.hasValue.v = append(c.hasValue.v, b2u(e.HasValue))
		c.currency.appendBytes(trimCurrency(&e.Currency))
		c.consent.v = append(c.consent.v, b2u(e.Consent))
		c.hasEmail.v = append(c.hasEmail.v, b2u(e.HasEmail))
		if e.HasEmail {
			c.email.b = append(c.email.b, e.EmailSHA[:]...)
		} else {
			c.email.b = append(c.email.b, zero32[:]...)
		}
		c.requestID.append(b.RequestID)
		c.received.v = append(c.received.v, received)
		c.partition.v = append(c.partition.v, partition)
		c.offset.v = append(c.offset.v, offset)
		c.batchIndex.v = append(c.batchIndex.v, uint8(i))
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
	c.topic.reset()
	c.inserted.reset()
	at := uint32(now.Unix())
	for range s.Len() {
		c.topic.append(s.topic)
		c.inserted.v = append(c.inserted.v, at)
	}
}

// load hands the buffered columns to the driver's columns of one prepared INSERT: the
// driver's column of each name decodes the buffer's Native bytes (a bulk copy for
// fixed-width columns), with no per-row conversion.
//
// (clickhouse-go's typed Append would convert every row: a big.Int per Decimal, a
// time.Time per DateTime, and allocate. ch-go's own client cannot talk to ClickHouse
// 18.16: it omits the client info that 18.16's protocol revision 54412 expects with
// a query.)
func (s *Sink) load(cols []column.Interface) error {
	if len(cols) != len(s.table) {
		return fmt.Errorf("insert has %d columns, the sink %d", len(cols), len(s.table))
	}
	s.wire.reset()
	for i, nc := range s.table {
		if cols[i].Name() != nc.name || string(cols[i].Type()) != nc.chType {
			return fmt.Errorf("insert column %d is %s %s, the sink writes %s %s", i, cols[i].Name(), cols[i].Type(), nc.name, nc.chType)
		}
		s.wire.parts = append(s.wire.parts, nc.col.native())
	}
	r := proto.NewReader(&s.wire)
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
		nc.col.reset()
	}
	s.receivedMs, s.occurredMs = s.receivedMs[:0], s.occurredMs[:0]
}

// Partitions returns, for each partition with buffered rows, the highest buffered offset.
func (s *Sink) Partitions() map[int32]int64 {
	out := map[int32]int64{}
	for i, p := range s.c.partition.v {
		if o, ok := out[p]; !ok || s.c.offset.v[i] > o {
			out[p] = s.c.offset.v[i]
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
		keep[i] = !drop(c.partition.v[i], c.offset.v[i])
		any = any || !keep[i]
	}
	if !any {
		return
	}
	c.topic.reset() // refilled by the next Flush
	c.inserted.reset()
	for _, nc := range s.table {
		if nc.col != &c.topic && nc.col != &c.inserted {
			nc.col.compact(keep)
		}
	}
	s.receivedMs, s.occurredMs = compact(s.receivedMs, keep), compact(s.occurredMs, keep)
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
