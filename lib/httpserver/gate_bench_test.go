package httpserver

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"svc/lib/idempotency"
	"svc/lib/limits"
	"svc/lib/svctest"
)

// BenchmarkGateAndComplete runs the two scripts an Idempotency-Key request of POST
// /events costs in Redis (the gate, then the stored answer) against the test Redis, one
// request at a time with a fresh key each, and reports Redis's own time for them
// (redis-us/req, from INFO commandstats: the functions' execution, without the round trip)
// beside the wall time. The client's time is not the figure to watch; Redis's is, since
// at 200,000 events/s Redis spends a fifth of a core on these scripts (bench/HISTORY.md).
func BenchmarkGateAndComplete(b *testing.B) {
	ctx := context.Background()
	rdb := svctest.Redis(b)
	store := idempotency.New(rdb)
	kid := uuid.NewString()
	burst, daily := limits.Windows(1_000_000, 1_000_000_000)
	st := idempotency.Stored{Status: 202, ContentType: "application/json",
		Body: []byte(`{"accepted":50,"rejected":0,"rejections":[],"request_id":"req_2f4c5d8e9a1b3c7d"}`)}
	fp := idempotency.Fingerprint("POST", "/events", []byte(kid))
	b.Cleanup(func() { _, _ = idempotency.Drop(ctx, rdb, idempotency.KeyPrefix(kid)) })
	before := scriptMicros(b, rdb)
	b.ResetTimer()
	for i := range b.N {
		idemKey := kid + "-" + strconv.Itoa(i)
		keys := append(limits.Keys(kid), idempotency.DirKey(kid))
		args := append(limits.Args(time.Now(), burst, daily),
			store.ReserveArgs(idemKey, fp, 7*time.Second, "req_"+strconv.Itoa(i))...)
		res, err := gateLibrary.Call(ctx, rdb, "gate", keys, args...).Slice()
		if err != nil {
			b.Fatal(err)
		}
		if o, _ := idempotency.OutcomeOf(res[limits.Results:]); o != idempotency.Proceed {
			b.Fatalf("request %d: outcome %v, want Proceed", i, o)
		}
		if err := store.Complete(ctx, kid, idemKey, fp, st); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric((scriptMicros(b, rdb)-before)/float64(b.N), "redis-us/req")
}

// scriptMicros is the time Redis has spent in scripts and functions (EVALSHA, FCALL)
// since its statistics were reset.
func scriptMicros(b *testing.B, rdb redis.UniversalClient) float64 {
	b.Helper()
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	var total float64
	for _, line := range strings.Split(info, "\r\n") {
		name, stats, _ := strings.Cut(line, ":")
		if name != "cmdstat_evalsha" && name != "cmdstat_fcall" {
			continue
		}
		for _, kv := range strings.Split(stats, ",") {
			if v, ok := strings.CutPrefix(kv, "usec="); ok {
				us, err := strconv.ParseFloat(v, 64)
				if err != nil {
					b.Fatalf("%s: %v", name, err)
				}
				total += us
			}
		}
	}
	return total
}
