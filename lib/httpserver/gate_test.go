package httpserver_test

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
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
	rec := store.PendingRecord(kid, idemKey, fp, 0, reqID)
	res, err := httpserver.ReserveGatesForTest(ctx, rdb, []httpserver.GateCallForTest{{Kid: kid, Burst: burst, Daily: daily, Rec: rec}}, now)
	if err != nil {
		return nil, err
	}
	return res[0], nil
}

// One reserve_gate call of several requests (of two API keys, with and without
// Idempotency-Key, as the server's gate batches concurrent requests) decides and writes
// what the same requests' calls one after another decide and write: each reservation's
// outcome, each request's windows, the denied request's reservation dropped, a
// conflicting key spending nothing.
func TestReserveGateBatchIsSequential(t *testing.T) {
	ctx := context.Background()
	rdb := oneServer(t)
	store := idempotency.New(rdb)
	fp := idempotency.Fingerprint("POST", "/v1/events", []byte(`{"events":[]}`))
	other := idempotency.Fingerprint("POST", "/v1/events", []byte(`{"events":[{}]}`))
	burstA, daily := httpserver.LimitsWindowsForTest(4, 100)
	burstB, _ := httpserver.LimitsWindowsForTest(1, 100)
	type req struct {
		key, idem, fp, id string // idem "": a request without Idempotency-Key
		outcome           idempotency.Outcome
		allowed           int64
		burstLeft         int64
	}
	reqs := []req{
		{"a", "a1", fp, "r1", idempotency.Proceed, 1, 3},
		{"a", "", "", "r2", idempotency.Proceed, 1, 2},
		{"b", "b1", fp, "r3", idempotency.Proceed, 1, 0},
		{"a", "a1", other, "r4", idempotency.Reuse, 1, 2}, // another body: spends nothing
		{"a", "a1", fp, "r5", idempotency.InUse, 1, 2},    // the same, still running
		{"a", "a2", fp, "r6", idempotency.Proceed, 1, 1},
		{"b", "b2", fp, "r7", idempotency.Proceed, 0, 0}, // denied: burst spent
		{"a", "a3", fp, "r8", idempotency.Proceed, 1, 0},
		{"a", "a4", fp, "r9", idempotency.Proceed, 0, 0}, // denied
		{"a", "", "", "r10", idempotency.Proceed, 0, 0},  // denied
	}
	now := time.Now()
	run := func(batch bool) (kids map[string]string, values [][]any) {
		stamp := strconv.FormatInt(time.Now().UnixNano(), 36)
		kids = map[string]string{"a": "seq-a-" + stamp, "b": "seq-b-" + stamp}
		if batch {
			kids = map[string]string{"a": "batch-a-" + stamp, "b": "batch-b-" + stamp}
		}
		calls := make([]httpserver.GateCallForTest, len(reqs))
		for i, q := range reqs {
			calls[i] = httpserver.GateCallForTest{Kid: kids[q.key], Burst: burstA, Daily: daily}
			if q.idem != "" {
				calls[i].Rec = store.PendingRecord(kids[q.key], q.idem, q.fp, 0, q.id)
			}
			if q.key == "b" {
				calls[i].Burst = burstB
			}
		}
		t.Cleanup(func() {
			for _, q := range reqs {
				if q.idem != "" {
					_ = store.Forget(ctx, kids[q.key], q.idem)
				}
			}
			rdb.Del(ctx, append(limits.Keys(kids["a"]), limits.Keys(kids["b"])...)...)
		})
		if batch {
			res, err := httpserver.ReserveGatesForTest(ctx, rdb, calls, now)
			if err != nil {
				t.Fatal(err)
			}
			return kids, res
		}
		for _, c := range calls {
			res, err := httpserver.ReserveGatesForTest(ctx, rdb, []httpserver.GateCallForTest{c}, now)
			if err != nil {
				t.Fatal(err)
			}
			values = append(values, res[0])
		}
		return kids, values
	}
	seqKids, seq := run(false)
	batchKids, batch := run(true)
	for i, q := range reqs {
		s, b := seq[i], batch[i]
		for j := range s {
			if j == 1 { // the bucket's name carries the key id; the record (replay) would not
				if (s[j] == nil) != (b[j] == nil) {
					t.Errorf("%s %s: value 1 %v alone, %v in the batch", q.key, q.idem, s[j], b[j])
				}
				continue
			}
			if s[j] != b[j] {
				t.Errorf("%s %s: value %d %v alone, %v in the batch (%v against %v)", q.key, q.idem, j, s[j], b[j], s, b)
			}
		}
		rsv, err := idempotency.ReservationOf(b[:2])
		if err != nil || rsv.Outcome != q.outcome || b[2] != q.allowed || b[7] != q.burstLeft {
			t.Errorf("%s %s: outcome %v, allowed %v, burst left %v (%v); want %v, %d, %d", q.key, q.idem, rsv.Outcome, b[2], b[7], err, q.outcome, q.allowed, q.burstLeft)
		}
	}
	for _, kids := range []map[string]string{seqKids, batchKids} {
		for idem, want := range map[string]idempotency.State{"a1": idempotency.Pending, "a2": idempotency.Pending, "a3": idempotency.Pending, "a4": idempotency.Absent} {
			if st, err := store.Peek(ctx, kids["a"], idem); err != nil || st != want {
				t.Errorf("%s %s: %v (%v), want %v", kids["a"], idem, st, err, want)
			}
		}
		if st, err := store.Peek(ctx, kids["b"], "b2"); err != nil || st != idempotency.Absent {
			t.Errorf("%s b2: %v (%v), want absent: the windows denied it", kids["b"], st, err)
		}
	}
}

// Concurrent requests with one gate call in flight at a time (on a cluster, one a hash
// slot) share calls, and the windows stay exact: of 48 requests at once on a burst of 20,
// exactly 20 pass, each with an Idempotency-Key reserved; the 28 denied are answered 429
// and leave no reservation. The same without Idempotency-Key (on a cluster these are the
// calls the windows' master gets for one key).
func TestGateBatchesKeepWindowsExact(t *testing.T) {
	for _, idempotent := range []bool{true, false} {
		t.Run(map[bool]string{true: "idempotency keys", false: "no idempotency key"}[idempotent], func(t *testing.T) {
			s := apitest.Start(t, testRoutes(), nil)
			httpserver.GateCallsInFlightForTest(s.API, 1)
			tn := s.Tenant(t, false)
			k, sec := s.Key(t, workspace.KeySpec{WorkspaceID: tn.Workspace.ID, Env: apikey.Live, Burst: 20, Daily: 1000})
			const n = 48
			codes := make([]int, n)
			var wg sync.WaitGroup
			for i := range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					var h []string
					if idempotent {
						h = []string{"Idempotency-Key", "batch-" + strconv.Itoa(i)}
					}
					codes[i] = s.Do(t, "POST", "/things", sec, `{"name":"a"}`, h...).Status
				}()
			}
			wg.Wait()
			ctx := context.Background()
			passed := 0
			for i, code := range codes {
				st := idempotency.Absent
				if idempotent {
					var err error
					if st, err = s.Deps.Idem.Peek(ctx, k.ID.String(), "batch-"+strconv.Itoa(i)); err != nil {
						t.Fatal(err)
					}
				}
				switch {
				case code == 201 && (st == idempotency.Done || !idempotent):
					passed++
				case code == 429 && st == idempotency.Absent:
				default:
					t.Errorf("request %d: %d, its key %v", i, code, st)
				}
			}
			if passed != 20 {
				t.Fatalf("%d of %d passed on a burst of 20", passed, n)
			}
			var m dto.Metric
			if err := s.API.Deps.Metrics.GateBatch.Write(&m); err != nil {
				t.Fatal(err)
			}
			calls, gated := m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum()
			if gated != n || calls >= n {
				t.Fatalf("%d gate calls for %v requests: want %d requests in fewer calls", calls, gated, n)
			}
			t.Logf("%d requests in %d gate calls", n, calls)
		})
	}
}
