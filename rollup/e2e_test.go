package rollup

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"svc/lib/svctest"
)

// TestBinaryKilledAndRestarted runs `svc rollup` as a separate process while events
// are produced, kills it with SIGKILL three times at random moments (so, sooner or
// later, between an INSERT and its commit), restarts it each time, and finally stops
// it with SIGTERM: the totals must be exact and the exit clean.
func TestBinaryKilledAndRestarted(t *testing.T) {
	svctest.SkipShort(t)
	w := newWorld(t, 4)
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
	var procs []*svctest.Proc
	start := func() *svctest.Proc {
		p := svctest.Start(t, env, "", "rollup") // SVC_HTTP_ADDR is in env: any free port
		procs = append(procs, p)
		return p
	}
	defer func() {
		if t.Failed() {
			for i, p := range procs {
				t.Logf("svc rollup #%d output:\n%s", i+1, p.Output())
			}
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
		p := start()
		// Kill only once the process owns every partition: the group then holds no
		// member of an unfinished rebalance. The embedded kfake broker never expires a
		// member killed while it waits for its SyncGroup answer (it starts the session
		// timer only when that answer is delivered), which would strand its partitions;
		// a real Kafka would expire it. The moment stays random within the flushing.
		svctest.WaitFor(t, 20*time.Second, "svc rollup owning all 4 partitions", func() bool {
			return len(ownedPartitions(p.Output())) == 4
		})
		if i == 0 { // SVC_ROLLUP_LOOP_NICE's default: the poll loops' threads at nice 10
			if n := threadsAtNice(t, p.Cmd.Process.Pid, 10); n != 2 {
				t.Fatalf("svc rollup has %d threads at nice 10, want 2 (the events' and the rejections' poll loops)", n)
			}
		}
		time.Sleep(time.Duration(200+rand.IntN(1000)) * time.Millisecond)
		p.Kill() // SIGKILL
	}
	cancel()
	wg.Wait()
	if n, _ := w.rawCheck(); n == 0 {
		t.Fatal("the killed processes inserted nothing")
	}
	p := start()
	w.waitExact(30 * time.Second)
	if err := p.Stop(t, 30*time.Second); err != nil {
		t.Fatalf("svc rollup after SIGTERM: %v", err)
	}
	w.waitExact(time.Second)
}

// ownedPartitions reads a consumer's JSON log: the partitions it was assigned and has not
// had revoked or lost since.
func ownedPartitions(log string) map[int]bool {
	owned := map[int]bool{}
	for _, line := range strings.Split(log, "\n") {
		var e struct {
			Msg        string `json:"msg"`
			Partitions []int  `json:"partitions"`
		}
		if json.Unmarshal([]byte(line), &e) != nil {
			continue
		}
		for _, p := range e.Partitions {
			switch e.Msg {
			case "partitions assigned":
				owned[p] = true
			case "partitions revoked", "partitions lost":
				delete(owned, p)
			}
		}
	}
	return owned
}

// threadsAtNice counts the threads of process pid at nice value nice (procStat's [16]).
func threadsAtNice(t *testing.T, pid, nice int) int {
	t.Helper()
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, task := range tasks {
		f, err := procStat(fmt.Sprintf("/proc/%d/task/%s/stat", pid, task.Name()))
		if err != nil {
			continue // the thread ended meanwhile
		}
		if len(f) > 16 && f[16] == strconv.Itoa(nice) {
			n++
		}
	}
	return n
}

// procStat is the fields of a process's or thread's /proc stat file after the command's
// closing parenthesis: the state is [0], user and system CPU [11] and [12], nice [16].
func procStat(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:])), nil
}
