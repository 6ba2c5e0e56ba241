// Package svctest is what svc's test suites share outside the HTTP harness (schema/apitest):
// the test Redis, the svc binary built once per test binary, and free loopback
// addresses. Tests skip when Redis is unreachable, except under CI=true, where they fail.
package svctest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"svc/lib/process"
	"svc/lib/settings"
)

// RedisURL is where tests find one Redis server (SVC_REDIS_URL or its default).
func RedisURL() string { return settings.New().String("SVC_REDIS_URL") }

// RedisConfig is the Redis the tests use: the Redis Cluster SVC_REDIS_CLUSTER names
// when it is set (every Redis-backed test then runs against the cluster), else
// RedisURL.
func RedisConfig() process.RedisConfig { return process.RedisFromEnv(settings.New()) }

// RedisEnv returns the environment entries that point a child process at RedisConfig.
func RedisEnv() []string {
	rc := RedisConfig()
	return []string{"SVC_REDIS_URL=" + rc.URL, "SVC_REDIS_CLUSTER=" + strings.Join(rc.Cluster, ",")}
}

// Redis connects to the test Redis, skipping (or failing under CI) when it is down.
func Redis(t testing.TB) redis.UniversalClient {
	t.Helper()
	rdb, err := process.OpenRedis(context.Background(), RedisConfig())
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("redis: %v", err)
		}
		t.Skipf("redis unavailable: %v", err)
	}
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

// WebhooksEnv returns the setting that gives a test's processes a webhooks state of their
// own in the shared test Redis (SVC_WEBHOOKS_REDIS_PREFIX, under a fresh prefix), whose
// keys are deleted when the test ends. Processes of concurrent tests, each writing to a
// ClickHouse database of its own, would otherwise take each other's due deliveries from
// the one schedule and log the attempts in the wrong database.
func WebhooksEnv(t testing.TB) string {
	prefix := fmt.Sprintf("svc:test:wh:%d:", time.Now().UnixNano())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if rdb, err := process.OpenRedis(ctx, RedisConfig()); err == nil {
			_, _ = process.UnlinkPattern(ctx, rdb, prefix+"*")
			rdb.Close()
		}
	})
	return "SVC_WEBHOOKS_REDIS_PREFIX=" + prefix
}

// FreeAddr returns a loopback address whose port was free a moment ago, for a process
// a test starts to listen on. The port is drawn from below the kernel's ephemeral range
// (ip_local_port_range), where the system never hands out the local port of an outgoing
// connection: a port of that range, free when drawn, can be taken by any client's
// connection (a browser's, a Redis or ClickHouse pool's) before the process binds it, and
// did fail a run with "address already in use". Ports under firstPort are left to the
// services the tests talk to (Redis 6379 and its cluster's 7000s, ClickHouse 8123 and
// 9000s, Kafka's 9092).
//
// A port is handed out once: free when drawn, it stays free until the process a test
// starts binds it, so a second draw in that moment could name it again (two processes of
// one test, or the test binaries of two packages running side by side, each drawing
// dozens of ports: one run failed so). Each draw therefore reserves its port, for every
// test process on the machine, with a file created exclusively under
// $TMPDIR/svctest-ports; a reservation older than portHold is taken as ended.
func FreeAddr(t testing.TB) string {
	t.Helper()
	below := ephemeralLow()
	for range 200 {
		port := firstPort + rand.IntN(below-firstPort)
		if !reservePort(port) {
			continue
		}
		addr := fmt.Sprintf("127.0.0.1:%d", port)
		if ln, err := net.Listen("tcp", addr); err == nil {
			ln.Close()
			return addr
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0") // every draw taken: let the kernel choose
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// portHold is how long FreeAddr's reservation of a port lasts: far longer than a process
// a test starts takes to bind it, far shorter than the time before a run reuses ports.
const portHold = 10 * time.Minute

// reservePort reserves port for this process unless another draw, here or in another
// test process, reserved it less than portHold ago.
func reservePort(port int) bool {
	dir := filepath.Join(os.TempDir(), "svctest-ports")
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return true // no reservations possible: the bind check alone
	}
	name := filepath.Join(dir, strconv.Itoa(port))
	f, err := os.OpenFile(name, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o666)
	if err == nil {
		f.Close()
		return true
	}
	fi, serr := os.Stat(name)
	if serr != nil || time.Since(fi.ModTime()) < portHold {
		return false
	}
	now := time.Now() // an ended reservation: take it over
	return os.Chtimes(name, now, now) == nil
}

// firstPort is the lowest port FreeAddr draws.
const firstPort = 20000

// ephemeralLow is the first port of the kernel's ephemeral range (32768 when it cannot
// be read, Linux's default), at least firstPort + 1000.
func ephemeralLow() int {
	low := 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if n, err := strconv.Atoi(f[0]); err == nil {
				low = n
			}
		}
	}
	return max(low, firstPort+1000)
}

var build struct {
	once sync.Once
	dir  string
	bin  string
	err  error
}

// Build builds the svc command once per test binary and returns its path, or returns
// SVC_BIN when it names a binary already built (a benchmark of the release build). Call
// Cleanup from TestMain after the tests (RunTests does).
func Build() (string, error) {
	build.once.Do(func() {
		if build.bin = settings.New().String("SVC_BIN"); build.bin != "" {
			return
		}
		root, err := moduleRoot()
		if err != nil {
			build.err = err
			return
		}
		if build.dir, build.err = os.MkdirTemp("", "svc-test-bin"); build.err != nil {
			return
		}
		build.bin = filepath.Join(build.dir, "svc")
		cmd := exec.Command("go", "build", "-o", build.bin, ".")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			build.err = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	return build.bin, build.err
}

// SkipShort skips a test that builds and runs the binary under go test -short.
func SkipShort(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
}

// Binary is Build for one test, failing it when the build fails (and skipping it under
// -short).
func Binary(t testing.TB) string {
	t.Helper()
	SkipShort(t)
	bin, err := Build()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// Cleanup removes the binary Build made.
func Cleanup() {
	if build.dir != "" {
		os.RemoveAll(build.dir)
	}
}

// RunTests runs m, then removes the built binary: the TestMain of a package whose tests
// call Binary is os.Exit(svctest.RunTests(m)).
func RunTests(m *testing.M) int {
	defer Cleanup()
	return m.Run()
}

// moduleRoot is the folder of go.mod.
func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", fmt.Errorf("not inside the svc module")
	}
	return filepath.Dir(gomod), nil
}
