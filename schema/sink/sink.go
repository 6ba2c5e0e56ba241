package sink

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/ClickHouse/ch-go/proto"
	"github.com/ClickHouse/clickhouse-go/v2/lib/column"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/google/uuid"

	"svc/lib/chpool"
	"svc/schema"
)

// Sink buffers decoded events column by column, in ch-go's column types, and writes
// them to the events table in one INSERT per Flush. One INSERT of one block into a table
// partitioned by toYYYYMM(inserted_at), with one inserted_at per flush, is one part: all
// or nothing.
//
// Each buffer is a ch-go column, the type clickhouse-go itself keeps an INSERT's column
// in: DateTime as uint32 seconds, Date as uint16 days, Decimal(18,4) as int64 × 10^4,
// FixedString(32) as 32 bytes, String as its bytes and positions. Add converts nothing
// per row beyond integer division; a flush hands the buffers to the driver's columns
// without copying them (native.go), and the driver encodes them once onto the wire;
// buffers are kept across flushes, so Add allocates only while they grow.
//
// A Sink is not safe for concurrent use.
type Sink struct {
	conn  driver.Conn
	query string
	topic string
	c     sinkColumns
	// table lists the columns in INSERT order, pointing into c.
	table []namedColumn
	// decodeOnly makes load fill the driver's columns by decoding (tests of that path).
	decodeOnly bool
	// receivedMs and occurredMs keep the millisecond times per row for EachAge.
	receivedMs, occurredMs []int64
	// spare holds the rows in the table's sorting key while a flush sorts them (then it
	// and c trade places, spareTable pointing into spare as table into c), order the
	// sort's buffers (order.go).
	spare      sinkColumns
	spareTable []namedColumn
	spareMs    []int64
	order      rowOrder
}

type sinkColumns struct {
	workspace, pixel, key, event                     proto.ColUUID
	sandbox, hasValue, consent, hasEmail, batchIndex proto.ColUInt8
	name, currency, requestID, topic                 proto.ColStr
	occurred, received, inserted                     proto.ColDateTime  // Unix seconds
	date                                             proto.ColDate      // days since 1970-01-01
	value                                            proto.ColDecimal64 // Decimal(18,4): × 10^4
	email                                            proto.ColFixedStr  // FixedString(32)
	partition                                        proto.ColInt32
	offset                                           proto.ColInt64
}

// namedColumn is one column of the INSERT: its name, its ClickHouse type (as
// schema.EventFields declares them: TestSinkColumnsAreTheDeclaration), and the buffer
// holding its rows.
type namedColumn struct {
	name, chType string
	col          proto.Column
}

// columns lists c's columns in the order of the INSERT's column list: schema.EventFields'
// columns, in its order.
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

// New returns a sink writing to table (normally "events") in conn's database, for
// records of topic.
func New(conn driver.Conn, table, topic string) *Sink {
	s := &Sink{conn: conn, topic: topic}
	s.c.email.Size, s.spare.email.Size = 32, 32
	s.table, s.spareTable = s.c.columns(), s.spare.columns()
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
func (s *Sink) Len() int { return len(s.c.offset) }

const (
	msPerSecond = 1000
	msPerDay    = 86400 * msPerSecond
)

// Add buffers the events of one decoded record; it keeps no reference to b. Times must
// lie in [1970, 2106) (the consumer refuses others): they are stored as unsigned
// seconds and days.
func (s *Sink) Add(b *schema.Batch, partition int32, offset int64) {
	s.AddExcept(b, partition, offset, 0)
}

// AddExcept is Add without the events whose bit is set in skip (bit i: the event at
// index i, which keeps its batch_index): copies of client event ids (eventdedup.go).
func (s *Sink) AddExcept(b *schema.Batch, partition int32, offset int64, skip uint64) {
	c := &s.c
	n := 0
	for i := range b.Events {
		if skip&(1<<i) != 0 {
			continue
		}
		n++
		e := &b.Events[i]
		c.event = append(c.event, uuid.UUID(e.ID))
		c.name.Append(e.Name)
		c.occurred.Data = append(c.occurred.Data, proto.DateTime(e.OccurredAt/msPerSecond))
		c.date = append(c.date, proto.Date(e.OccurredAt/msPerDay))
		v := e.Value
		if !e.HasValue {
			v = 0
		}
		c.value = append(c.value, proto.Decimal64(v))
		c.hasValue = append(c.hasValue, chpool.UInt8(e.HasValue))
		c.currency.AppendBytes(trimCurrency(&e.Currency))
		c.consent = append(c.consent, chpool.UInt8(e.Consent))
		c.hasEmail = append(c.hasEmail, chpool.UInt8(e.HasEmail))
		if e.HasEmail {
			c.email.Buf = append(c.email.Buf, e.EmailSHA[:]...)
		} else {
			c.email.Buf = append(c.email.Buf, zero32[:]...)
		}
		c.batchIndex = append(c.batchIndex, uint8(i))
		s.occurredMs = append(s.occurredMs, e.OccurredAt)
	}
	s.addRecordColumns(b, partition, offset, n)
}

// addRecordColumns appends the record's own values, the same for each of its n events.
func (s *Sink) addRecordColumns(b *schema.Batch, partition int32, offset int64, n int) {
	c := &s.c
	ws, px, key := uuid.UUID(b.Workspace), uuid.UUID(b.Pixel), uuid.UUID(b.Key)
	received, sandbox := proto.DateTime(b.ReceivedAt/msPerSecond), chpool.UInt8(b.Sandbox)
	for range n {
		c.workspace = append(c.workspace, ws)
		c.pixel = append(c.pixel, px)
		c.key = append(c.key, key)
	}
	for range n {
		c.sandbox = append(c.sandbox, sandbox)
		c.received.Data = append(c.received.Data, received)
		c.partition = append(c.partition, partition)
		c.offset = append(c.offset, offset)
		s.receivedMs = append(s.receivedMs, b.ReceivedAt)
	}
	for range n {
		c.requestID.Append(b.RequestID)
	}
}

var zero32 [32]byte

// trimCurrency returns the code without its trailing zero bytes (none for "no currency").
func trimCurrency(c *[3]byte) []byte {
	n := len(c)
	for n > 0 && c[n-1] == 0 {
		n--
	}
	return c[:n]
}

// ErrNotSent marks a Flush error that came before any row was sent: the INSERT stored
// nothing.
var ErrNotSent = errors.New("no row sent")

// Flush writes every buffered row in one INSERT, stamped inserted_at = now, in the events
// table's sorting key (order.go). The rows stay buffered either way (in that order):
// call Reset after a success. On error the outcome is
// unknown, the INSERT may or may not have landed (read MaxOffsets, then Drop), unless
// the error is ErrNotSent.
//
// The query id and settings come from ctx (clickhouse.Context), as for any query.
func (s *Sink) Flush(ctx context.Context, now time.Time) error {
	if s.Len() == 0 {
		return nil
	}
	if err := s.sortRows(); err != nil {
		return fmt.Errorf("%w: %w", ErrNotSent, err)
	}
	s.stamp(now)
	b, err := s.conn.PrepareBatch(ctx, s.query)
	if err != nil {
		return fmt.Errorf("prepare insert (%w): %w", ErrNotSent, err)
	}
	if err := s.load(b.Columns()); err != nil {
		_ = b.Abort()
		return fmt.Errorf("%w: %w", ErrNotSent, err)
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

// sortRows puts the buffered rows in the events table's sorting key (order.go).
func (s *Sink) sortRows() error {
	perm := s.order.order(&s.c)
	if perm == nil {
		return nil
	}
	if err := s.gatherRows(s.spareTable, perm); err != nil {
		return err
	}
	s.c, s.spare = s.spare, s.c // table and spareTable point at the fields: now the sorted rows
	s.receivedMs, s.spareMs = gather(s.spareMs, s.receivedMs, perm), s.receivedMs
	s.occurredMs, s.spareMs = gather(s.spareMs, s.occurredMs, perm), s.occurredMs
	return nil
}

// gatherRows sets each column of dst (table, or spareTable) to the buffered rows listed
// in rows, in that order (dst may be table when rows ascend), but kafka_topic and
// inserted_at, the same on every row, which stamp fills for each flush.
func (s *Sink) gatherRows(dst []namedColumn, rows []uint32) error {
	for i, nc := range s.table {
		if nc.col == &s.c.topic || nc.col == &s.c.inserted {
			continue
		}
		if err := gatherColumn(dst[i].col, nc.col, rows); err != nil {
			return err
		}
	}
	return nil
}

// load gives the buffered columns to the driver's columns of one prepared INSERT:
// handed over without a copy (handOver), or decoded from their Native encoding where
// the driver does not allow that (decodeInto); no per-row conversion either way.
//
// (clickhouse-go's typed Append would convert every row: a big.Int per Decimal, a
// time.Time per DateTime, and allocate. ch-go's own client cannot talk to ClickHouse
// 18.16: it omits the client info that 18.16's protocol revision 54412 expects with
// a query.)
func (s *Sink) load(cols []column.Interface) error {
	if len(cols) != len(s.table) {
		return fmt.Errorf("insert has %d columns, the sink %d", len(cols), len(s.table))
	}
	n := s.Len()
	for i, nc := range s.table {
		if cols[i].Name() != nc.name || string(cols[i].Type()) != nc.chType {
			return fmt.Errorf("insert column %d is %s %s, the sink writes %s %s", i, cols[i].Name(), cols[i].Type(), nc.name, nc.chType)
		}
		if s.decodeOnly || !handOver(cols[i], nc.col) {
			if err := decodeInto(cols[i], nc.col); err != nil {
				return fmt.Errorf("column %s: %w", nc.name, err)
			}
		}
		if got := cols[i].Rows(); got != n {
			return fmt.Errorf("column %s holds %d rows, want %d", nc.name, got, n)
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
	kept := make([]uint32, 0, s.Len())
	for i := range c.offset {
		if !drop(c.partition[i], c.offset[i]) {
			kept = append(kept, uint32(i))
		}
	}
	if len(kept) == s.Len() {
		return
	}
	c.topic.Reset() // refilled by the next Flush
	c.inserted.Reset()
	if err := s.gatherRows(s.table, kept); err != nil { // in place: kept ascends
		panic(err) // a column type without a rule: a programming error
	}
	s.receivedMs, s.occurredMs = gather(s.receivedMs, s.receivedMs, kept), gather(s.occurredMs, s.occurredMs, kept)
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
	err := chpool.EachRow(ctx, conn, "SELECT kafka_partition, max(kafka_offset) FROM "+table+
		" WHERE kafka_topic = ? AND kafka_partition IN ("+strings.Join(in, ", ")+") GROUP BY kafka_partition", []any{topic},
		func(row chpool.Row) error {
			var p int32
			var o int64
			if err := row.Scan(&p, &o); err != nil {
				return err
			}
			out[p] = o
			return nil
		})
	if err != nil {
		return nil, fmt.Errorf("read stored offsets: %w", err)
	}
	return out, nil
}
