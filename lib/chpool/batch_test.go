package chpool_test

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"svc/lib/chpool"
	"svc/schema/chtest"
)

// TestBatchContextEndingAfterSendSparesThePool: a caller that cancels its context right
// after Send (a deferred cancel) must not break the connection Send has put back in the
// pool. clickhouse-go v2.50's Send stops its context watchdog without waiting for it;
// with every P kept busy the watchdog goroutine first runs after the cancel, sees both
// its channels ready and, half the time, closes the pooled connection under the next
// query. Open's pool guards against it (batch.go); without the guard this test failed
// 10 runs in 10, within the first few inserts.
func TestBatchContextEndingAfterSendSparesThePool(t *testing.T) {
	cfg, _ := chtest.NewDB(t)
	cfg.MaxOpenConns = 1
	ctx := context.Background()
	conn, err := chpool.Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.Exec(ctx, "CREATE TABLE batch_guard (n UInt64) ENGINE = Memory"); err != nil {
		t.Fatal(err)
	}
	// Goroutines that keep every P busy, so that the watchdog of a Send queues behind
	// them instead of running while Send waits for the server.
	stop := make(chan struct{})
	defer close(stop)
	for range 4 * runtime.GOMAXPROCS(0) {
		go func() {
			for {
				select {
				case <-stop:
					return
				default:
					for i := 0; i < 1e5; i++ {
					}
					runtime.Gosched()
				}
			}
		}()
	}
	const rounds = 100
	for i := range rounds {
		if err := sendOne(conn, uint64(i)); err != nil {
			t.Fatalf("insert %d: %v", i, err)
		}
		var one uint8
		if err := conn.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil || one != 1 {
			t.Fatalf("query after insert %d: %d, %v", i, one, err)
		}
	}
	var n, sum uint64
	if err := conn.QueryRow(ctx, "SELECT count(), sum(n) FROM batch_guard").Scan(&n, &sum); err != nil {
		t.Fatal(err)
	}
	if n != rounds || sum != rounds*(rounds-1)/2 {
		t.Fatalf("table holds %d rows summing to %d; want %d rows, %d", n, sum, rounds, rounds*(rounds-1)/2)
	}
}

// sendOne inserts one row the way the roles do: a context of its own, cancelled as
// soon as the insert returns.
func sendOne(conn interface {
	PrepareBatch(context.Context, string, ...driver.PrepareBatchOption) (driver.Batch, error)
}, n uint64) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b, err := conn.PrepareBatch(ctx, "INSERT INTO batch_guard (n)")
	if err != nil {
		return err
	}
	if err := b.Append(n); err != nil {
		return err
	}
	return b.Send()
}
