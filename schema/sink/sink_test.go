package sink

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/google/uuid"

	"svc/lib/chpool"
	"svc/schema"
	"svc/schema/chtest"
)

// BenchmarkSinkFlush50k is the consumer's per-row client cost with the real
// ClickHouse (rollup materialized view attached): decode each record (as the consumer
// does), hand it to the sink, and INSERT 50,000-row flushes. It reports rows/s (wall,
// server included), rows/cpu-s (this process's user+system CPU: decoding, building and
// encoding the columns, sending, GC; the server runs in another process) and
// allocs/row, B/row. Run with GOMAXPROCS=1 for the per-core figure:
//
//	GOMAXPROCS=1 go test -run '^$' -bench SinkFlush50k -benchtime 20x ./schema/sink/
func BenchmarkSinkFlush50k(b *testing.B) { benchSink(b, true) }

// BenchmarkSinkFlush50kNoMV is the same without the rollup materialized view: the
// difference is the server's cost of maintaining pixel_rollups_daily.
func BenchmarkSinkFlush50kNoMV(b *testing.B) { benchSink(b, false) }

func benchSink(b *testing.B, withMV bool) {
	cfg, conn := chtest.NewDB(b)
	if !withMV {
		if err := conn.Exec(context.Background(), "DROP TABLE pixel_rollups_daily_mv"); err != nil {
			b.Fatal(err)
		}
	}
	batches := chtest.Batches(1000)
	records := make([][]byte, len(batches))
	for i := range batches {
		records[i] = schema.AppendBatch(nil, &batches[i])
	}
	s := newBenchSink(b, cfg, conn)
	ctx := context.Background()
	var scratch schema.Batch
	b.ReportAllocs()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	cpu0 := chtest.CPUTime()
	b.ResetTimer()
	var off int64
	for i := 0; i < b.N; i++ {
		for j := range records {
			if err := schema.DecodeBatch(records[j], &scratch); err != nil {
				b.Fatal(err)
			}
			s.Add(&scratch, int32(j%8), off)
			off++
		}
		if err := benchFlush(ctx, s); err != nil {
			b.Fatal(err)
		}
		s.Reset()
	}
	b.StopTimer()
	cpu := chtest.CPUTime() - cpu0
	runtime.ReadMemStats(&m1)
	rows := float64(b.N) * 50000
	b.ReportMetric(rows/b.Elapsed().Seconds(), "rows/s")
	b.ReportMetric(rows/cpu.Seconds(), "rows/cpu-s")
	b.ReportMetric(float64(m1.Mallocs-m0.Mallocs)/rows, "allocs/row")
	b.ReportMetric(float64(m1.TotalAlloc-m0.TotalAlloc)/rows, "B/row")
}

// TestOneFlushIsOnePart checks, on the server at hand (18.16 here), that one flush of
// 60,000 rows whose events span three months becomes exactly one part of events (and
// one of the rollup table): the all-or-nothing property exactly-once relies on.
func TestOneFlushIsOnePart(t *testing.T) {
	cfg, conn := chtest.NewDB(t)
	s := New(conn, "events", schema.TopicEvents)
	batches := chtest.Batches(1200)
	for i := range batches {
		for j := range batches[i].Events {
			batches[i].Events[j].OccurredAt -= int64(i%3) * 35 * 86400_000 // three months
		}
		s.Add(&batches[i], int32(i%4), int64(i))
	}
	if err := s.Flush(context.Background(), time.Now()); err != nil {
		t.Fatal(err)
	}
	for table, wantRows := range map[string]uint64{"events": 60000, "pixel_rollups_daily": 0} {
		var parts, rows uint64
		err := conn.QueryRow(context.Background(),
			"SELECT count(), sum(rows) FROM system.parts WHERE database = ? AND table = ? AND active",
			cfg.Database, table).Scan(&parts, &rows)
		if err != nil {
			t.Fatal(err)
		}
		if parts != 1 || (wantRows > 0 && rows != wantRows) {
			t.Errorf("%s: %d parts with %d rows, want 1 part (%d rows)", table, parts, rows, wantRows)
		}
	}
}

func newBenchSink(_ testing.TB, _ chpool.Config, conn driver.Conn) *Sink {
	return New(conn, "events", schema.TopicEvents)
}

func benchFlush(ctx context.Context, s *Sink) error { return s.Flush(ctx, time.Now()) }

// sinkTestBatches is three records with every kind of field: values present and
// absent (negative too), currency absent, email absent, sandbox, an event at the
// first second of a UTC day and one at its last, and a long request id.
func sinkTestBatches() []schema.Batch {
	day := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	ev := func(id byte, name string, at time.Time, value int64, has bool, cur string, email bool) schema.Event {
		e := schema.Event{Name: name, OccurredAt: at.UnixMilli(), HasValue: has, Value: value, Consent: email, HasEmail: email}
		e.ID[0], e.ID[15] = id, 0xEE
		copy(e.Currency[:], cur)
		if email {
			for i := range e.EmailSHA {
				e.EmailSHA[i] = id + byte(i)
			}
		}
		return e
	}
	return []schema.Batch{
		{Workspace: schema.UUID{1, 2}, Pixel: schema.UUID{3}, Key: schema.UUID{4}, ReceivedAt: day.Add(26*time.Hour + 999*time.Millisecond).UnixMilli(),
			RequestID: "req_a", Events: []schema.Event{
				ev(1, "purchase", day, 123456789, true, "EUR", true),
				ev(2, "page_view", day.Add(24*time.Hour-time.Millisecond), 0, false, "", false),
			}},
		{Workspace: schema.UUID{1, 2}, Pixel: schema.UUID{5}, Key: schema.UUID{4}, Sandbox: true, ReceivedAt: day.Add(27 * time.Hour).UnixMilli(),
			RequestID: strings.Repeat("r", 200), Events: []schema.Event{
				ev(3, "refund", day.Add(25*time.Hour+500*time.Millisecond), -5, true, "JPY", false),
			}},
		{Workspace: schema.UUID{9}, Pixel: schema.UUID{3}, Key: schema.UUID{6}, ReceivedAt: day.Add(28 * time.Hour).UnixMilli(),
			RequestID: "req_c", Events: []schema.Event{
				ev(4, "lead", day.Add(2*time.Hour), 99990000, true, "", true),
			}},
	}
}

// storedRow renders one events row the way TestSinkStoresEveryColumn selects it.
func storedRow(b *schema.Batch, i int, partition int32, offset int64, inserted time.Time) string {
	e := &b.Events[i]
	occ, recv := time.UnixMilli(e.OccurredAt).UTC(), time.UnixMilli(b.ReceivedAt).UTC()
	value := int64(0)
	if e.HasValue {
		value = e.Value
	}
	email := make([]byte, 32)
	if e.HasEmail {
		email = e.EmailSHA[:]
	}
	return strings.Join([]string{
		uuid.UUID(b.Workspace).String(), uuid.UUID(b.Pixel).String(), fmt.Sprint(chpool.UInt8(b.Sandbox)),
		uuid.UUID(b.Key).String(), uuid.UUID(e.ID).String(), e.Name,
		fmt.Sprint(occ.Unix()), occ.Format("2006-01-02"), fmt.Sprint(value), fmt.Sprint(chpool.UInt8(e.HasValue)),
		strings.TrimRight(string(e.Currency[:]), "\x00"), fmt.Sprint(chpool.UInt8(e.Consent)), fmt.Sprint(chpool.UInt8(e.HasEmail)),
		fmt.Sprintf("%X", email), b.RequestID, fmt.Sprint(recv.Unix()), fmt.Sprint(inserted.Unix()),
		schema.TopicEvents, fmt.Sprint(partition), fmt.Sprint(offset), fmt.Sprint(i),
	}, "|")
}

// TestSinkStoresEveryColumn writes records through Add, Drop and two Flushes (the
// second after Reset, reusing the buffers) and reads every column back as text, with
// the columns handed over to the driver and with them decoded (decodeInto, the path
// for a driver that does not allow the hand-over).
func TestSinkStoresEveryColumn(t *testing.T) {
	t.Run("handed over", func(t *testing.T) { sinkStoresEveryColumn(t, false) })
	t.Run("decoded", func(t *testing.T) { sinkStoresEveryColumn(t, true) })
}

func sinkStoresEveryColumn(t *testing.T, decodeOnly bool) {
	_, conn := chtest.NewDB(t)
	ctx := context.Background()
	s := New(conn, "events", schema.TopicEvents)
	s.decodeOnly = decodeOnly
	batches := sinkTestBatches()
	inserted := time.Date(2026, 3, 5, 10, 0, 0, 0, time.UTC)
	var want []string
	for i := range batches {
		s.Add(&batches[i], int32(i), int64(100+i))
	}
	// The second record "landed already": drop it, keep the others.
	s.Drop(func(p int32, o int64) bool { return p == 1 && o == 101 })
	if s.Len() != 3 {
		t.Fatalf("Len after Drop = %d, want 3", s.Len())
	}
	if got := s.Partitions(); len(got) != 2 || got[0] != 100 || got[2] != 102 {
		t.Fatalf("Partitions = %v", got)
	}
	for _, i := range []int{0, 2} {
		for j := range batches[i].Events {
			want = append(want, storedRow(&batches[i], j, int32(i), int64(100+i), inserted))
		}
	}
	if err := s.Flush(ctx, inserted.Add(999*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	s.Reset()
	s.Add(&batches[1], 1, 200)
	want = append(want, storedRow(&batches[1], 0, 1, 200, inserted))
	if err := s.Flush(ctx, inserted); err != nil {
		t.Fatal(err)
	}
	rows, err := conn.Query(ctx, `SELECT concat(toString(workspace_id), '|', toString(pixel_id), '|', toString(sandbox), '|',
		toString(key_id), '|', toString(event_id), '|', event_name, '|',
		toString(toUnixTimestamp(occurred_at)), '|', toString(event_date), '|', toString(toInt64(value * 10000)), '|', toString(has_value), '|',
		currency, '|', toString(consent), '|', toString(has_email), '|',
		hex(email_sha256), '|', request_id, '|', toString(toUnixTimestamp(received_at)), '|', toString(toUnixTimestamp(inserted_at)), '|',
		kafka_topic, '|', toString(kafka_partition), '|', toString(kafka_offset), '|', toString(batch_index))
		FROM events ORDER BY kafka_offset, batch_index`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got []string
	for rows.Next() {
		var r string
		if err := rows.Scan(&r); err != nil {
			t.Fatal(err)
		}
		got = append(got, r)
	}
	if len(got) != len(want) {
		t.Fatalf("%d rows stored, want %d:\n%s", len(got), len(want), strings.Join(got, "\n"))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("row %d:\n got %s\nwant %s", i, got[i], want[i])
		}
	}
}

// TestSinkHandsEveryColumnOver: with the driver in go.mod, every column of the INSERT
// takes the buffers without a copy. A driver upgrade that keeps its columns otherwise
// fails here (the sink still works, by decoding, but slower).
func TestSinkHandsEveryColumnOver(t *testing.T) {
	_, conn := chtest.NewDB(t)
	s := New(conn, "events", schema.TopicEvents)
	b := sinkTestBatches()
	s.Add(&b[0], 0, 1)
	s.stamp(time.Now())
	batch, err := conn.PrepareBatch(context.Background(), s.query)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = batch.Abort() }()
	cols := batch.Columns()
	for i, nc := range s.table {
		if !handOver(cols[i], nc.col) {
			t.Errorf("column %s (%T): not handed over", nc.name, cols[i])
		} else if cols[i].Rows() != s.Len() {
			t.Errorf("column %s: %d rows after the hand-over, want %d", nc.name, cols[i].Rows(), s.Len())
		}
	}
	// The driver's column is a copy of the sink's header: resetting it leaves the sink's.
	cols[0].Reset()
	if s.c.workspace.Rows() != s.Len() {
		t.Errorf("resetting the driver's column emptied the sink's (%d rows)", s.c.workspace.Rows())
	}
}

// TestSinkFlushAllocations: decoding records, buffering them and writing them costs
// well under one allocation per row (the per-flush allocations of the driver's block,
// none per row).
func TestSinkFlushAllocations(t *testing.T) {
	_, conn := chtest.NewDB(t)
	batches := chtest.Batches(200) // 10,000 rows
	records := make([][]byte, len(batches))
	for i := range batches {
		records[i] = schema.AppendBatch(nil, &batches[i])
	}
	s := New(conn, "events", schema.TopicEvents)
	var scratch schema.Batch
	var off int64
	allocs := testing.AllocsPerRun(5, func() {
		for _, r := range records {
			if err := schema.DecodeBatch(r, &scratch); err != nil {
				t.Fatal(err)
			}
			s.Add(&scratch, 0, off)
			off++
		}
		if err := s.Flush(context.Background(), time.Now()); err != nil {
			t.Fatal(err)
		}
		s.Reset()
	})
	if perRow := allocs / 10000; perRow > 0.05 {
		t.Errorf("%.0f allocations per 10,000-row flush (%.3f per row), want < 0.05 per row", allocs, perRow)
	}
}

// TestSinkRefusesAnotherColumnType: the sink writes each column's native encoding, so a
// table whose column has another type (a migration that widened value) must fail the
// flush rather than receive misread bytes.
func TestSinkRefusesAnotherColumnType(t *testing.T) {
	_, conn := chtest.NewDB(t)
	ctx := context.Background()
	if err := conn.Exec(ctx, "CREATE TABLE events_wide AS events"); err != nil {
		t.Fatal(err)
	}
	if err := conn.Exec(ctx, "ALTER TABLE events_wide MODIFY COLUMN value Decimal(38, 4)"); err != nil {
		t.Fatal(err)
	}
	s := New(conn, "events_wide", schema.TopicEvents)
	b := sinkTestBatches()
	s.Add(&b[0], 0, 1)
	err := s.Flush(ctx, time.Now())
	if err == nil || !strings.Contains(err.Error(), "value Decimal(38, 4)") {
		t.Fatalf("flush into a Decimal(38, 4) column: %v, want a type mismatch", err)
	}
	var n uint64
	if err := conn.QueryRow(ctx, "SELECT count() FROM events_wide").Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d rows stored (%v), want none", n, err)
	}
}

// TestSinkColumnsAreTheDeclaration: the sink's INSERT names exactly the columns of
// schema.EventFields, in their order, with their types, each kept in the ch-go column
// type of its ClickHouse type (gatherColumn has a rule for each).
func TestSinkColumnsAreTheDeclaration(t *testing.T) {
	buffers := map[string]string{
		"UUID": "*proto.ColUUID", "UInt8": "*proto.ColUInt8", "Int32": "*proto.ColInt32", "Int64": "*proto.ColInt64",
		"String": "*proto.ColStr", "DateTime('UTC')": "*proto.ColDateTime", "Date": "*proto.ColDate",
		"Decimal(18, 4)": "*proto.ColDecimal64", "FixedString(32)": "*proto.ColFixedStr",
	}
	var declared []string
	for _, f := range schema.EventFields {
		if f.Column != "" {
			declared = append(declared, f.Column+" "+f.CHType)
		}
	}
	var sink []string
	for _, nc := range (&sinkColumns{}).columns() {
		sink = append(sink, nc.name+" "+nc.chType)
		if want, ok := buffers[nc.chType]; !ok {
			t.Errorf("column %s: no buffer type known for %s (add it here and to gatherColumn)", nc.name, nc.chType)
		} else if got := fmt.Sprintf("%T", nc.col); got != want {
			t.Errorf("column %s %s is buffered in a %s, want %s", nc.name, nc.chType, got, want)
		}
		if err := gatherColumn(nc.col, nc.col, nil); err != nil {
			t.Errorf("column %s: %v", nc.name, err)
		}
	}
	if strings.Join(sink, ", ") == strings.Join(declared, ", ") {
		return
	}
	in := func(list []string, c string) bool { return slices.Contains(list, c) }
	for _, c := range declared {
		if !in(sink, c) {
			t.Errorf("declared column %s: the sink does not write it (sinkColumns, columns(), Add)", c)
		}
	}
	for _, c := range sink {
		if !in(declared, c) {
			t.Errorf("the sink writes %s, which schema.EventFields does not declare", c)
		}
	}
	t.Errorf("the sink's columns are not schema.EventFields', in order:\n sink     %s\n declared %s", strings.Join(sink, ", "), strings.Join(declared, ", "))
}
