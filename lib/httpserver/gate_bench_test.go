package httpserver_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"svc/lib/apikey"
	"svc/lib/idempotency"
	"svc/schema/apitest"
	"svc/schema/workspace"
)

// BenchmarkIdempotentRequestRedis runs requests with an Idempotency-Key each through a
// real server (auth, the gate, the handler, the stored answer) against the test Redis,
// one at a time, and reports Redis's own time for them (redis-us/req: the usec of the
// functions and scripts they ran, from INFO commandstats, without reading requests and
// writing replies) beside the wall time. Before the timer starts, the key has 30 hours of
// answers behind it (one every 3 h), so the records' tables hold every age a lookup may
// meet, as in steady use. The consumer's batch claim, the third part of POST /events'
// Redis work, is rollup's BenchmarkBatchClaimRedis. Point it at a Redis nothing else uses
// (SVC_REDIS_URL) for a clean figure.
func BenchmarkIdempotentRequestRedis(b *testing.B) {
	ctx := context.Background()
	s := apitest.Start(b, testRoutes(), nil)
	rdb := apitest.Redis(b)
	w := s.Workspace(b, false)
	k, secret := s.Key(b, workspace.KeySpec{WorkspaceID: w.ID, Env: apikey.Live, Scopes: []string{"plans:read"},
		Burst: 1_000_000, Daily: 1_000_000_000})
	kid := k.ID.String()
	store := idempotency.New(rdb)
	fp := idempotency.Fingerprint("POST", "/things", []byte(`{"name":"history"}`))
	answer := idempotency.Stored{Status: 201, ContentType: "application/json", Body: []byte(`{"request_id":"req_2f4c5d8e9a1b3c7d"}`)}
	now := time.Now()
	var history []string
	for h := 30; h > 0; h -= 3 {
		store.Now = func() time.Time { return now.Add(-time.Duration(h) * time.Hour) }
		for i := range 200 {
			key := fmt.Sprintf("history-%d-%d", h, i)
			history = append(history, key)
			if err := store.Complete(ctx, kid, key, fp, answer); err != nil {
				b.Fatal(err)
			}
		}
	}
	store.Now = time.Now
	var sent []string
	b.Cleanup(func() { _ = store.Forget(ctx, kid, append(history, sent...)...) })
	s.Do(b, "POST", "/things", secret, `{"name":"warm-up"}`, "Idempotency-Key", "warm-up")
	sent = append(sent, "warm-up")
	before := topLevelMicros(b, rdb)
	b.ResetTimer()
	for i := range b.N {
		key := "bench-" + strconv.Itoa(i)
		sent = append(sent, key)
		if r := s.Do(b, "POST", "/things", secret, `{"name":"a"}`, "Idempotency-Key", key); r.Status != 201 {
			b.Fatalf("request %d: %d %s", i, r.Status, r.Body)
		}
	}
	b.StopTimer()
	after := topLevelMicros(b, rdb)
	b.ReportMetric((after.us-before.us)/float64(b.N), "redis-us/req")
	b.ReportMetric((after.calls-before.calls)/float64(b.N), "redis-calls/req")
}

type redisTime struct{ us, calls float64 }

// topLevelMicros is the time Redis has spent in functions and scripts (FCALL,
// EVALSHA, and their read-only forms; the commands they run are counted within them)
// since its statistics were reset, and how many ran.
func topLevelMicros(b testing.TB, rdb redis.UniversalClient) (total redisTime) {
	b.Helper()
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(info, "\r\n") {
		name, stats, _ := strings.Cut(line, ":")
		switch name {
		case "cmdstat_evalsha", "cmdstat_evalsha_ro", "cmdstat_fcall", "cmdstat_fcall_ro", "cmdstat_eval", "cmdstat_eval_ro":
		default:
			continue
		}
		for _, kv := range strings.Split(stats, ",") {
			k, v, _ := strings.Cut(kv, "=")
			n, err := strconv.ParseFloat(v, 64)
			if err != nil {
				continue
			}
			switch k {
			case "usec":
				total.us += n
			case "calls":
				total.calls += n
			}
		}
	}
	return total
}
