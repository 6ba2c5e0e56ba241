package rollup

import (
	"bytes"
	"context"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"svc/lib/svctest"
)

// TestBinaryKilledAndRestarted runs `svc rollup` as a separate process while events
// are produced, kills it with SIGKILL three times at random moments (so, sooner or
// later, between an INSERT and its commit), restarts it each time, and finally stops
// it with SIGTERM: the totals must be exact and the exit clean.
func TestBinaryKilledAndRestarted(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	w := newWorld(t, 4)
	bin := svctest.Binary(t)
	env := append(os.Environ(),
		"SVC_KAFKA_BROKERS="+strings.Join(w.seeds, ","),
		"SVC_CLICKHOUSE_ADDR="+w.ch.Addr,
		"SVC_CLICKHOUSE_DB="+w.ch.Database,
		"SVC_ROLLUP_GROUP=e2e",
		"SVC_HTTP_ADDR=127.0.0.1:0", // health only: any free port, never a fixed one another process may hold
		"SVC_METRICS_ADDR=off",
		"SVC_ROLLUP_BATCH_ROWS=1000",
		"SVC_ROLLUP_BATCH_INTERVAL=30ms",
		"SVC_ROLLUP_SESSION_TIMEOUT=2s",
		"SVC_ROLLUP_REBALANCE_TIMEOUT=4s",
		"SVC_ROLLUP_INSERT_TIMEOUT=3s",
		"SVC_ROLLUP_REVOKE_TIMEOUT=2s",
		"SVC_ROLLUP_RETRY_MIN=20ms",
		"SVC_ROLLUP_RETRY_MAX=300ms",
	)
	var logs bytes.Buffer
	var logMu sync.Mutex
	start := func() *exec.Cmd {
		cmd := exec.Command(bin, "rollup")
		cmd.Env = env
		out := writerFunc(func(p []byte) (int, error) { logMu.Lock(); defer logMu.Unlock(); return logs.Write(p) })
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd
	}
	defer func() {
		if t.Failed() {
			logMu.Lock()
			t.Logf("svc rollup output:\n%s", logs.String())
			logMu.Unlock()
		}
	}()

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			w.produce(5)
			time.Sleep(10 * time.Millisecond)
		}
	}()
	for i := 0; i < 3; i++ {
		cmd := start()
		time.Sleep(time.Duration(1500+rand.IntN(1000)) * time.Millisecond)
		_ = cmd.Process.Kill() // SIGKILL
		_ = cmd.Wait()
	}
	cancel()
	wg.Wait()
	if n, _ := w.rawCheck(); n == 0 {
		t.Fatal("the killed processes inserted nothing")
	}
	cmd := start()
	w.waitExact(30 * time.Second)
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("svc rollup after SIGTERM: %v", err)
	}
	w.waitExact(time.Second)
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
