package process_test

import (
	"context"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"svc/lib/process"
	"svc/lib/svctest"
)

// redisServer starts a private redis-server (no persistence) with extra arguments and
// returns its client; the server stops with the test.
func redisServer(t *testing.T, extra ...string) (*redis.Client, string, *exec.Cmd) {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("CI") == "true" { // make test installs it (deploy/local/services.sh)
			t.Fatal("no redis-server to start a master and a replica")
		}
		t.Skip("no redis-server to start a master and a replica")
	}
	addr := svctest.FreeAddr(t)
	_, port, _ := net.SplitHostPort(addr)
	cmd := exec.Command(bin, append([]string{"--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", t.TempDir()}, extra...)...) // a replica's full sync writes dump.rdb there
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { rdb.Close() })
	svctest.WaitFor(t, 10*time.Second, "redis-server on "+addr, func() bool { return rdb.Ping(context.Background()).Err() == nil })
	return rdb, addr, cmd
}

// TestReplicateWaitsForAReplica: with a replica connected, Replicate returns once the
// replica holds every write made before the call, through any connection; without one,
// it returns at once; with the replica stopped (still counted as connected), it fails
// within its timeout rather than let a caller act on writes a failover could lose.
func TestReplicateWaitsForAReplica(t *testing.T) {
	ctx := context.Background()
	alone, _, _ := redisServer(t)
	if err := process.NewReplicas(alone, time.Second).Replicate(ctx, []string{"svc:claim:{x}:m"}); err != nil {
		t.Fatalf("a master without replicas: %v", err)
	}

	master, maddr, _ := redisServer(t)
	host, port, _ := net.SplitHostPort(maddr)
	replica, _, rproc := redisServer(t, "--replicaof", host, port)
	svctest.WaitFor(t, 10*time.Second, "the replica in sync", func() bool {
		info, _ := master.Info(ctx, "replication").Result()
		return strings.Contains(info, "state=online")
	})
	r := process.NewReplicas(master, time.Second)
	for i := range 200 {
		// The writes go through the pool's connections; Replicate writes through another.
		if err := master.HSet(ctx, "svc:claim:{x}:0:0", strconv.Itoa(i), i).Err(); err != nil {
			t.Fatal(err)
		}
		if err := r.Replicate(ctx, []string{"svc:claim:{x}:m"}); err != nil {
			t.Fatal(err)
		}
		if got, err := replica.HGet(ctx, "svc:claim:{x}:0:0", strconv.Itoa(i)).Result(); err != nil || got != strconv.Itoa(i) {
			t.Fatalf("after Replicate the replica has field %d = %q (%v)", i, got, err)
		}
	}
	// A replica that stops answering: the master still counts it connected (for its
	// repl-timeout, 60 s), and Replicate must not pretend the writes are safe.
	if err := rproc.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer rproc.Process.Signal(syscall.SIGCONT)
	if err := master.HSet(ctx, "svc:claim:{x}:0:0", "late", 1).Err(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err := r.Replicate(ctx, []string{"svc:claim:{x}:m"})
	if err == nil || time.Since(start) > 2*time.Second {
		t.Fatalf("Replicate with the replica stopped: %v after %v; want an error within its 1 s", err, time.Since(start))
	}
}
