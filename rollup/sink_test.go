package rollup

import (
	"context"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"svc/schema"
	"svc/schema/chtest"
)

// benchBatches returns n records of 50 events each, as the edge would write them.
func benchBatches(n int) []schema.Batch {
	out := make([]schema.Batch, n)
	for i := range out {
		b := &out[i]
		b.Workspace[0], b.Pixel[0], b.Key[0] = 1, byte(i%7), 3
		b.ReceivedAt = time.Now().UnixMilli()
		b.RequestID = "req_0123456789abcdef"
		b.Events = make([]schema.Event, 50)
		for j := range b.Events {
			e := &b.Events[j]
			e.ID[0], e.ID[1], e.ID[2] = byte(i), byte(i>>8), byte(j)
			e.Name = []string{"purchase", "page_view", "signup"}[j%3]
			e.OccurredAt = b.ReceivedAt - int64(j)*1000
			e.HasValue, e.Value = j%3 == 0, int64(j)*12345
			e.Currency = [3]byte{'E', 'U', 'R'}
			e.Consent = j%4 != 0
			e.HasEmail = e.Consent
			e.EmailSHA[0], e.EmailSHA[1] = byte(j), byte(i)
		}
	}
	return out
}

// BenchmarkSinkFlush50k is the consumer's per-row client cost with the real
// ClickHouse (rollup materialized view attached): decode each record (as the consumer
// does), hand it to the sink, and INSERT 50,000-row flushes. It reports rows/s (wall,
// server included), rows/cpu-s (this process's user+system CPU: decoding, building and
// encoding the columns, sending, GC; the server runs in another process) and
// allocs/row, B/row. Run with GOMAXPROCS=1 for the per-core figure:
//
//	GOMAXPROCS=1 go test -run '^$' -bench SinkFlush50k -benchtime 20x ./rollup/
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
	batches := benchBatches(1000)
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
	cpu0 := cpuTime()
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
	cpu := cpuTime() - cpu0
	runtime.ReadMemStats(&m1)
	rows := float64(b.N) * 50000
	b.ReportMetric(rows/b.Elapsed().Seconds(), "rows/s")
	b.ReportMetric(rows/cpu.Seconds(), "rows/cpu-s")
	b.ReportMetric(float64(m1.Mallocs-m0.Mallocs)/rows, "allocs/row")
	b.ReportMetric(float64(m1.TotalAlloc-m0.TotalAlloc)/rows, "B/row")
}

// cpuTime is the user+system CPU time of this process so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestOneFlushIsOnePart checks, on the server at hand (18.16 here), that one flush of
// 60,000 rows whose events span three months becomes exactly one part of events (and
// one of the rollup table): the all-or-nothing property exactly-once relies on.
func TestOneFlushIsOnePart(t *testing.T) {
	cfg, conn := chtest.NewDB(t)
	s := NewSink(conn, "events", schema.TopicEvents)
	batches := benchBatches(1200)
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

func newBenchSink(_ testing.TB, _ schema.Config, conn driver.Conn) *Sink {
	return NewSink(conn, "events", schema.TopicEvents)
}

func benchFlush(ctx context.Context, s *Sink) error { return s.Flush(ctx, time.Now()) }
