package httpserver_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"svc/lib/httpserver"
	"svc/lib/idempotency"
	"svc/lib/limits"
	"svc/schema/apitest"
)

// The gate's one call run twice (the Redis client retries a call whose reply was lost,
// and Redis ran the first): the second run finds the request's own reservation and
// proceeds, spending nothing more; it used to answer "in use" to the request that made
// the reservation, which then stayed reserved and the key in use.
func TestReserveGateRunTwice(t *testing.T) {
	ctx := context.Background()
	rdb := apitest.Redis(t)
	if _, cluster := rdb.(*redis.ClusterClient); cluster {
		t.Skip("a Redis Cluster: the gate makes two calls there (TestRecordLifecycle runs reserve twice)")
	}
	store := idempotency.New(rdb)
	kid := "twice-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	burst, daily := httpserver.LimitsWindowsForTest(100, 1000)
	t.Cleanup(func() { _ = store.Forget(ctx, kid, "k"); rdb.Del(ctx, limits.Keys(kid)...) })
	fp := idempotency.Fingerprint("POST", "/v1/events", []byte(`{"events":[]}`))
	dir, rargs := store.ReserveArgs(kid, "k", fp, 0, "req_twice")
	args := append(append([]any{len(rargs)}, rargs...), limits.Args(time.Now(), burst, daily)...)
	keys := append([]string{dir}, limits.Keys(kid)...)
	for run := 1; run <= 2; run++ {
		res, err := httpserver.ReserveGateForTest(ctx, rdb, keys, args...).Slice()
		if err != nil {
			t.Fatal(err)
		}
		rsv, err := idempotency.ReservationOf(res[:2])
		if err != nil || rsv.Outcome != idempotency.Proceed {
			t.Fatalf("run %d: %v (%v), want proceed", run, res, err)
		}
		if allowed, left := res[2], res[5]; allowed != int64(1) || left != int64(999) {
			t.Fatalf("run %d: allowed %v, daily left %v, want 1 and 999 (one request taken, once)", run, allowed, left)
		}
	}
}
