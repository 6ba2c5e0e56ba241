package webhooks

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"svc/lib/process"
	"svc/lib/svctest"
	"svc/schema/apitest"
	"svc/schema/chtest"
)

// fakeClock is the compressed clock: tests move it forward by hours in an instant.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *fakeClock {
	return &fakeClock{t: time.Now().UTC().Truncate(time.Second)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t.After(c.t) {
		c.t = t
	}
}

func (c *fakeClock) Add(d time.Duration) { c.Set(c.Now().Add(d)) }

// env is one test's world: a private Redis prefix, a private ClickHouse database, a
// fake clock.
type testEnv struct {
	cfg   Config
	rdb   redis.UniversalClient
	conn  driver.Conn
	clock *fakeClock
	logs  *Logs
	log   *slog.Logger
}

func newEnv(t *testing.T) *testEnv {
	t.Helper()
	rdb := apitest.Redis(t)
	chc, conn := chtest.NewDB(t)
	cfg := DefaultConfig()
	cfg.ClickHouse = chc
	cfg.Prefix = "test:wh:" + uuid.NewString()[:8] + ":"
	cfg.Timeout = 2 * time.Second
	cfg.Lease = 5 * time.Second
	cfg.Poll = 10 * time.Millisecond
	cfg.Worker = "test"
	// The receivers are httptest servers on loopback: allowed explicitly, as an operator
	// would (the default refuses them).
	cfg.AllowNets = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
	t.Cleanup(func() { cleanPrefix(rdb, cfg.Prefix) })
	return &testEnv{cfg: cfg, rdb: rdb, conn: conn, clock: newClock(), logs: NewLogs(conn),
		log: slog.New(slog.NewTextHandler(io.Discard, nil))}
}

func cleanPrefix(rdb redis.UniversalClient, prefix string) {
	ctx, cancel := contextTimeout()
	defer cancel()
	_, _ = process.UnlinkPattern(ctx, rdb, prefix+"*")
}

// store returns a new Store on the test's prefix and clock (a new one per simulated
// process).
func (e *testEnv) store() *Store {
	s := NewStore(e.rdb, e.cfg.Prefix)
	s.Now = e.clock.Now
	s.Egress = e.cfg.Egress()
	return s
}

// worker returns a new worker (a new process, as far as the schedule knows).
func (e *testEnv) worker(name string) *Worker {
	cfg := e.cfg
	cfg.Worker = name
	w := NewWorker(cfg, e.store(), e.logs, NewMetrics(nil), e.log)
	w.Now = e.clock.Now
	return w
}

func (e *testEnv) emitter() *Emitter {
	return &Emitter{Store: e.store(), Logs: e.logs, Log: e.log}
}

// verifyIndependently checks an SVC-Signature header without this package's code: a
// plain reading of the scheme (README.md) as a receiver would write it.
func verifyIndependently(header string, body []byte, secret string, now time.Time) bool {
	var ts string
	var sigs []string
	for _, kv := range strings.Split(header, ",") {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "t":
			ts = v
		case "v1":
			sigs = append(sigs, v)
		}
	}
	t, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || now.Unix()-t > 300 || t-now.Unix() > 300 {
		return false
	}
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(ts + "." + string(body)))
	want := hex.EncodeToString(mac.Sum(nil))
	for _, s := range sigs {
		if hmac.Equal([]byte(s), []byte(want)) {
			return true
		}
	}
	return false
}

// TestMain removes the svc binary the end-to-end test builds (svctest.Binary).
func TestMain(m *testing.M) { os.Exit(svctest.RunTests(m)) }

// endpoint creates an endpoint on url for a new workspace in a new store of e's (a new
// process); it returns the store, the workspace and the endpoint.
func (e *testEnv) endpoint(t *testing.T, url string) (*Store, uuid.UUID, Endpoint) {
	t.Helper()
	st, ws := e.store(), uuid.New()
	ep, err := st.CreateEndpoint(context.Background(), ws, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	return st, ws, ep
}

// emitKey emits a key.expiring event of ws and fails unless exactly one delivery was
// scheduled.
func (e *testEnv) emitKey(t *testing.T, ws uuid.UUID) Event {
	t.Helper()
	ev := keyEvent(ws)
	if n, err := e.emitter().Emit(context.Background(), ev); err != nil || n != 1 {
		t.Fatalf("Emit = %d, %v", n, err)
	}
	return ev
}
