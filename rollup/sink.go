package rollup

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/google/uuid"
	"github.com/shopspring/decimal"

	"svc/schema"
)

// insertColumns is the column list of every INSERT, in the order of Sink's buffers.
var insertColumns = []string{
	"workspace_id", "pixel_id", "sandbox", "key_id", "event_id", "event_name",
	"occurred_at", "event_date", "value", "has_value", "currency", "consent",
	"has_email", "email_sha256", "request_id", "received_at", "inserted_at",
	"kafka_topic", "kafka_partition", "kafka_offset", "batch_index",
}

// Sink buffers decoded events column by column and writes them to the events table in
// one INSERT per Flush. One INSERT of one block into a table partitioned by
// toYYYYMM(inserted_at), with one inserted_at per flush, is one part: all or nothing.
//
// A Sink is not safe for concurrent use.
type Sink struct {
	conn  driver.Conn
	query string
	topic string
	c     columns
	// currencies interns currency codes so that buffering allocates no string per row.
	currencies map[[3]byte]string
}

type columns struct {
	workspace, pixel, key, event []uuid.UUID
	sandbox, hasValue, consent   []uint8
	hasEmail, batchIndex         []uint8
	name, currency, requestID    []string
	occurred, date, received     []time.Time
	value                        []int64 // × 10^4
	email                        []byte  // 32 bytes per row
	partition                    []int32
	offset                       []int64
}

// NewSink returns a sink writing to table (normally "events") in conn's database, for
// records of topic.
func NewSink(conn driver.Conn, table, topic string) *Sink {
	return &Sink{
		conn:       conn,
		query:      "INSERT INTO " + table + " (" + strings.Join(insertColumns, ", ") + ")",
		topic:      topic,
		currencies: map[[3]byte]string{{}: ""},
	}
}

// Len is the number of buffered rows.
func (s *Sink) Len() int { return len(s.c.offset) }

// Add buffers the events of one decoded record. Strings of b are retained.
func (s *Sink) Add(b *schema.Batch, partition int32, offset int64) {
	c := &s.c
	received := time.UnixMilli(b.ReceivedAt).UTC()
	for i := range b.Events {
		e := &b.Events[i]
		occ := time.UnixMilli(e.OccurredAt).UTC()
		c.workspace = append(c.workspace, uuid.UUID(b.Workspace))
		c.pixel = append(c.pixel, uuid.UUID(b.Pixel))
		c.key = append(c.key, uuid.UUID(b.Key))
		c.event = append(c.event, uuid.UUID(e.ID))
		c.sandbox = append(c.sandbox, b2u(b.Sandbox))
		c.name = append(c.name, e.Name)
		c.occurred = append(c.occurred, occ)
		c.date = append(c.date, time.Date(occ.Year(), occ.Month(), occ.Day(), 0, 0, 0, 0, time.UTC))
		v := e.Value
		if !e.HasValue {
			v = 0
		}
		c.value = append(c.value, v)
		c.hasValue = append(c.hasValue, b2u(e.HasValue))
		c.currency = append(c.currency, s.currency(e.Currency))
		c.consent = append(c.consent, b2u(e.Consent))
		c.hasEmail = append(c.hasEmail, b2u(e.HasEmail))
		if e.HasEmail {
			c.email = append(c.email, e.EmailSHA[:]...)
		} else {
			c.email = append(c.email, zero32[:]...)
		}
		c.requestID = append(c.requestID, b.RequestID)
		c.received = append(c.received, received)
		c.partition = append(c.partition, partition)
		c.offset = append(c.offset, offset)
		c.batchIndex = append(c.batchIndex, uint8(i))
	}
}

var zero32 [32]byte

func b2u(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}

func (s *Sink) currency(c [3]byte) string {
	if v, ok := s.currencies[c]; ok {
		return v
	}
	v := strings.TrimRight(string(c[:]), "\x00")
	if len(s.currencies) < 4096 {
		s.currencies[c] = v
	}
	return v
}

// Flush writes every buffered row in one INSERT, stamped inserted_at = now. The rows
// stay buffered either way: call Reset after a success. On error the outcome is
// unknown: the INSERT may or may not have landed (read MaxOffsets, then Drop).
func (s *Sink) Flush(ctx context.Context, now time.Time) error {
	if s.Len() == 0 {
		return nil
	}
	b, err := s.conn.PrepareBatch(ctx, s.query)
	if err != nil {
		return fmt.Errorf("prepare insert: %w", err)
	}
	if err := s.appendColumns(b, now); err != nil {
		_ = b.Abort()
		return err
	}
	if err := b.Send(); err != nil {
		return fmt.Errorf("insert %d rows: %w", s.Len(), err)
	}
	return nil
}

func (s *Sink) appendColumns(b driver.Batch, now time.Time) error {
	c := &s.c
	n := s.Len()
	inserted := make([]time.Time, n)
	topic := make([]string, n)
	now = now.UTC().Truncate(time.Second)
	for i := range inserted {
		inserted[i], topic[i] = now, s.topic
	}
	values := make([]decimal.Decimal, n)
	for i, v := range c.value {
		values[i] = decimal.New(v, -4)
	}
	emails := make([][]byte, n)
	for i := range emails {
		emails[i] = c.email[i*32 : i*32+32 : i*32+32]
	}
	cols := []any{
		c.workspace, c.pixel, c.sandbox, c.key, c.event, c.name,
		c.occurred, c.date, values, c.hasValue, c.currency, c.consent,
		c.hasEmail, emails, c.requestID, c.received, inserted,
		topic, c.partition, c.offset, c.batchIndex,
	}
	for i, col := range cols {
		if err := b.Column(i).Append(col); err != nil {
			return fmt.Errorf("column %s: %w", insertColumns[i], err)
		}
	}
	return nil
}

// EachAge calls f with the age of every buffered event at now, since the edge accepted
// it and since it happened.
func (s *Sink) EachAge(now time.Time, f func(sinceReceived, sinceOccurred time.Duration)) {
	for i := range s.c.offset {
		f(now.Sub(s.c.received[i]), now.Sub(s.c.occurred[i]))
	}
}

// Reset drops every buffered row, keeping capacity.
func (s *Sink) Reset() {
	c := &s.c
	*c = columns{
		workspace: c.workspace[:0], pixel: c.pixel[:0], key: c.key[:0], event: c.event[:0],
		sandbox: c.sandbox[:0], hasValue: c.hasValue[:0], consent: c.consent[:0],
		hasEmail: c.hasEmail[:0], batchIndex: c.batchIndex[:0],
		name: clear0(c.name), currency: clear0(c.currency), requestID: clear0(c.requestID),
		occurred: c.occurred[:0], date: c.date[:0], received: c.received[:0],
		value: c.value[:0], email: c.email[:0], partition: c.partition[:0], offset: c.offset[:0],
	}
}

// clear0 empties a string slice and drops its references so the GC can free them.
func clear0(s []string) []string {
	clear(s)
	return s[:0]
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
	c.batchIndex, c.name = compact(c.batchIndex, keep), compact(c.name, keep)
	c.currency, c.requestID = compact(c.currency, keep), compact(c.requestID, keep)
	c.occurred, c.date = compact(c.occurred, keep), compact(c.date, keep)
	c.received, c.value = compact(c.received, keep), compact(c.value, keep)
	c.partition, c.offset = compact(c.partition, keep), compact(c.offset, keep)
	email := c.email[:0]
	for i, k := range keep {
		if k {
			email = append(email, c.email[i*32:i*32+32]...)
		}
	}
	c.email = email
}

func compact[T any](s []T, keep []bool) []T {
	out := s[:0]
	for i, k := range keep {
		if k {
			out = append(out, s[i])
		}
	}
	var zero T
	for i := len(out); i < len(s); i++ {
		s[i] = zero
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
