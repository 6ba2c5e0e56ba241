package bench

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestPartitionLagSumsEveryPartition(t *testing.T) {
	body := []byte(`# HELP svc_rollup_partition_lag Records in the partition after the last one this consumer read.
# TYPE svc_rollup_partition_lag gauge
svc_rollup_partition_lag{partition="0",topic="events.v1"} 12
svc_rollup_partition_lag{partition="1",topic="events.v1"} 30
svc_rollup_partition_lag_seconds 99
svc_rollup_partition_lagging 7
go_goroutines 40
`)
	lag, seen := PartitionLag(body)
	if !seen || lag != 42 {
		t.Fatalf("PartitionLag = %v, %v; want 42, true (other series left out)", lag, seen)
	}
	if lag, seen := PartitionLag([]byte("go_goroutines 40\n")); seen || lag != 0 {
		t.Fatalf("PartitionLag without the series = %v, %v; want 0, false", lag, seen)
	}
}

// lagServer serves /metrics with a lag that falls by one at each scrape, to zero.
func lagServer(start int64) (*httptest.Server, *atomic.Int64) {
	var lag atomic.Int64
	lag.Store(start)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		v := lag.Load()
		if v > 0 {
			lag.Add(-1)
		}
		fmt.Fprintf(w, "svc_rollup_partition_lag{partition=\"0\"} %d\n", v)
	}))
	return srv, &lag
}

func TestCatchUpWaitsForTheConsumer(t *testing.T) {
	srv, lag := lagServer(3)
	defer srv.Close()
	s := catchUp{limit: 10 * time.Second, metrics: srv.URL + "/metrics"}
	start := time.Now()
	if !s.wait(context.Background()) {
		t.Fatal("wait gave up before the lag reached 0")
	}
	if lag.Load() != 0 {
		t.Fatalf("wait returned with lag %d", lag.Load())
	}
	// 3 polls with a lag, then two calm ones in a row, 250 ms apart.
	if d := time.Since(start); d < time.Second {
		t.Fatalf("caught up after %v: sooner than four polls 250 ms apart", d)
	}

	never, _ := lagServer(1 << 30)
	defer never.Close()
	s = catchUp{limit: 600 * time.Millisecond, metrics: never.URL + "/metrics"}
	if s.wait(context.Background()) {
		t.Fatal("wait returned true while the lag never reached 0")
	}
}

func TestCaughtUpInTheSummary(t *testing.T) {
	c := &CPU{Busy: 1.5, Span: 2, Procs: map[string]float64{"svc (target)": 1, "redis": 0.25, "clickhouse": 0.25}}
	c.SetPerEvent(1_000_000) // 2 s: svc 2 µs, redis 0.5, clickhouse 0.5 per event
	rep := &Report{Scenario: "ingest", CaughtUp: &CaughtUp{After: 12.3, Complete: true, CPU: c}}
	var b strings.Builder
	PrintSummary(&b, rep)
	want := "svc 2.00, redis 0.50, clickhouse 0.50, generator 0.00, svc+redis+clickhouse 3.00 (caught up 12 s after the load)"
	if !strings.Contains(b.String(), "cpu per event, caught up") || !strings.Contains(b.String(), want) {
		t.Fatalf("summary lacks the caught-up line %q:\n%s", want, b.String())
	}
	rep.CaughtUp.Complete = false
	b.Reset()
	PrintSummary(&b, rep)
	if !strings.Contains(b.String(), "not caught up 12 s after the load") {
		t.Fatalf("summary does not say the run did not catch up:\n%s", b.String())
	}
}
