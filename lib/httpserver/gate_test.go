package httpserver_test

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"svc/lib/apikey"
	"svc/lib/httpserver"
	"svc/lib/idempotency"
	"svc/lib/limits"
	"svc/lib/process"
	"svc/schema/apitest"
	"svc/schema/workspace"
)

// The gate's one call run twice (the Redis client retries a call whose reply was lost,
// and Redis ran the first): the second run finds the request's own reservation and
// proceeds, spending nothing more; it used to answer "in use" to the request that made
// the reservation, which then stayed reserved and the key in use.
// (On a Redis Cluster the gate makes two calls; TestRecordLifecycle runs reserve twice.)
func TestReserveGateRunTwice(t *testing.T) {
	ctx := context.Background()
	rdb := oneServer(t)
	store := idempotency.New(rdb)
	kid := "twice-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	burst, daily := httpserver.LimitsWindowsForTest(100, 1000)
	t.Cleanup(func() { _ = store.Forget(ctx, kid, "k"); rdb.Del(ctx, limits.Keys(kid)...) })
	fp := idempotency.Fingerprint("POST", "/v1/events", []byte(`{"events":[]}`))
	now := time.Now()
	for run := 1; run <= 2; run++ {
		res, err := reserveGate(ctx, rdb, store, kid, "k", fp, "req_twice", now, burst, daily)
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

// An answer this version cannot read (stored by a newer version, during a rolling
// upgrade) is answered 409 in use, retryable, and spends nothing, in one call as in two.
func TestUnreadableAnswerSpendsNothing(t *testing.T) {
	for _, mode := range []string{"one call", "two calls"} {
		t.Run(mode, func(t *testing.T) {
			s := apitest.Start(t, testRoutes(), nil)
			if mode == "two calls" {
				httpserver.TwoCallGateForTest(s.API)
			} else if !s.API.Deps.OneServer {
				t.Skip("a Redis Cluster: the gate makes two calls (the other subtest)")
			}
			ctx := context.Background()
			tn := s.Tenant(t, false)
			k, sec := s.Key(t, workspace.KeySpec{WorkspaceID: tn.Workspace.ID, Env: apikey.Live, Burst: 10, Daily: 100})
			b, d := httpserver.LimitsWindowsForTest(10, 100)
			left := func() int {
				dec, err := s.Deps.Limits.Peek(ctx, k.ID.String(), b, d)
				if err != nil {
					t.Fatal(err)
				}
				return dec.Burst.Remaining
			}
			body := `{"name":"from a newer version"}`
			if r := s.Do(t, "POST", "/things", sec, body, "Idempotency-Key", "k-new"); r.Status != 201 {
				t.Fatalf("first: %d", r.Status)
			}
			kid := k.ID.String()
			unreadable(t, s.Redis, idempotency.GroupBase(idempotency.Group(kid, "k-new")), idempotency.Field(kid, "k-new"),
				idempotency.Fingerprint("POST", "/things", []byte(body)))
			before := left()
			apitest.Problem(t, s.Do(t, "POST", "/things", sec, body, "Idempotency-Key", "k-new"), 409, "idempotency_key_in_use")
			if after := left(); after != before {
				t.Fatalf("the 409 spent quota: %d left, %d before", after, before)
			}
		})
	}
}

// unreadable rewrites the stored answer at field (of fingerprint fp) in the record group
// at base with a head no version of this code writes.
func unreadable(t *testing.T, rdb redis.UniversalClient, base, field, fp string) {
	t.Helper()
	ctx := context.Background()
	var mu sync.Mutex
	var keys []string
	err := process.EachMaster(ctx, rdb, func(ctx context.Context, node *redis.Client) error {
		ks, err := node.Keys(ctx, base+"[0-9]*").Result()
		mu.Lock()
		defer mu.Unlock()
		keys = append(keys, ks...)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range keys {
		all, err := rdb.HGetAll(ctx, key).Result()
		if err != nil {
			t.Fatal(err)
		}
		if v, ok := all[field]; ok && len(v) > 1 && strings.HasPrefix(v[1:], "D"+fp) {
			if err := rdb.HSet(ctx, key, field, v[:1]+"D"+fp+"\xff\xfe\xfd").Err(); err != nil {
				t.Fatal(err)
			}
			return
		}
	}
	t.Fatalf("no stored answer at its field under %s", base)
}

// oneServer is the test Redis; it skips tb on a Redis Cluster, where the gate makes two
// calls.
func oneServer(tb testing.TB) redis.UniversalClient {
	rdb := apitest.Redis(tb)
	if _, cluster := rdb.(*redis.ClusterClient); cluster {
		tb.Skip("a Redis Cluster: the gate makes two calls there")
	}
	return rdb
}

// reserveGate runs the one-call gate (reserve_gate) for key id kid's Idempotency-Key
// idemKey of request reqID at now, with the arguments the server's gate sends.
func reserveGate(ctx context.Context, rdb redis.UniversalClient, store *idempotency.Store, kid, idemKey, fp, reqID string,
	now time.Time, burst, daily limits.Window) ([]any, error) {
	dir, rargs := store.ReserveArgs(kid, idemKey, fp, 0, reqID)
	args := append(append([]any{len(rargs)}, rargs...), limits.Args(now, burst, daily)...)
	return httpserver.ReserveGateForTest(ctx, rdb, append([]string{dir}, limits.Keys(kid)...), args...).Slice()
}
