package httpserver_test

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"svc/lib/apikey"
	"svc/lib/httpserver"
	"svc/lib/idempotency"
	"svc/lib/limits"
	"svc/lib/redisfn"
	"svc/schema/apitest"
	"svc/schema/workspace"
)

// BenchmarkIdempotentRequestRedis runs requests with an Idempotency-Key each through a
// real server (auth, the gate, the handler, the stored answer) against the test Redis,
// one at a time, and reports Redis's own time for them beside the wall time:
// redis-us/req, from INFO commandstats, the usec of the functions and scripts they ran
// plus the one HSET the server sends itself (the stored answer, CompleteReserved; Redis
// counts the HSETs functions run on the same line, so it is taken at the line's average
// per call), without reading requests and writing replies; and redis-cpu-us/req, the
// main thread's CPU time (INFO cpu), which includes those. Before the timer starts, the key has 30 hours of
// answers behind it (one every 3 h), so the records' tables hold every age a lookup may
// meet, as in steady use. The consumer's batch claim, once the third part of POST
// /events' Redis work, is in the claim logs since issue 30 (rollup's
// BenchmarkClaimBatchesPoll). Point it at a Redis nothing else uses
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
	before := redisWork(b, rdb)
	b.ResetTimer()
	for i := range b.N {
		key := "bench-" + strconv.Itoa(i)
		sent = append(sent, key)
		if r := s.Do(b, "POST", "/things", secret, `{"name":"a"}`, "Idempotency-Key", key); r.Status != 201 {
			b.Fatalf("request %d: %d %s", i, r.Status, r.Body)
		}
	}
	b.StopTimer()
	after := redisWork(b, rdb)
	n := float64(b.N)
	hset := 0.0 // the stored answers' HSETs, at the line's average per call
	if dc := after.hsetCalls - before.hsetCalls; dc > 0 {
		hset = n * (after.hsetUs - before.hsetUs) / dc
	}
	b.ReportMetric((after.fnUs-before.fnUs+hset)/n, "redis-us/req")
	b.ReportMetric((after.fnCalls-before.fnCalls)/n, "fcalls/req")
	b.ReportMetric((after.cpuUs-before.cpuUs)/n, "redis-cpu-us/req")
}

// redisTotals are Redis's statistics since they were reset: the usec and calls of
// functions and scripts (FCALL, EVALSHA, their read-only forms; the commands they run
// count within them), of HSET, and the main thread's CPU time.
type redisTotals struct{ fnUs, fnCalls, hsetUs, hsetCalls, cpuUs float64 }

func redisWork(b testing.TB, rdb redis.UniversalClient) (t redisTotals) {
	b.Helper()
	info, err := rdb.Info(context.Background(), "commandstats", "cpu").Result()
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(info, "\r\n") {
		name, stats, _ := strings.Cut(line, ":")
		var us, calls *float64
		switch name {
		case "cmdstat_evalsha", "cmdstat_evalsha_ro", "cmdstat_fcall", "cmdstat_fcall_ro", "cmdstat_eval", "cmdstat_eval_ro":
			us, calls = &t.fnUs, &t.fnCalls
		case "cmdstat_hset":
			us, calls = &t.hsetUs, &t.hsetCalls
		case "used_cpu_user_main_thread", "used_cpu_sys_main_thread":
			sec, _ := strconv.ParseFloat(stats, 64)
			t.cpuUs += sec * 1e6
			continue
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
				*us += n
			case "calls":
				*calls += n
			}
		}
	}
	return t
}

// BenchmarkReserveGateRedis: Redis's own time for the gate of an Idempotency-Key request
// on one server (reserve_gate: the record's reservation and both windows, one FCALL) and
// its stored answer (CompleteReserved: one HSET), with eight callers at once keeping
// Redis busy, as under load (BenchmarkIdempotentRequestRedis sends one request at a time
// through the whole server, so Redis's caches are cold at each call). redis-us/req is the
// FCALLs' and HSETs' usec from INFO commandstats per request, fcall-us/req the FCALLs'
// alone. Every request has an Idempotency-Key of its own; one API key's windows serve
// all, with quotas that never deny. Point it at a Redis nothing else uses (SVC_REDIS_URL).
func BenchmarkReserveGateRedis(b *testing.B) {
	answer := idempotency.Stored{Status: 202, ContentType: "application/json", Body: []byte(`{"accepted":50,"rejected":0}`)}
	g := newGateBench(b, "bench")
	before, after := g.run(b, func(ctx context.Context, key string) error {
		g.sent.Store(key, true)
		res, err := reserveGate(ctx, g.rdb, g.store, g.kid, key, g.fp, "req_"+key, time.Now(), g.burst, g.daily)
		if err != nil {
			return err
		}
		rsv, err := idempotency.ReservationOf(res[:2])
		if err != nil || rsv.Outcome != idempotency.Proceed || res[2] != int64(1) {
			return fmt.Errorf("reserve_gate answered %v (%v)", res, err)
		}
		return g.store.CompleteReserved(ctx, rsv, g.kid, key, g.fp, answer)
	})
	n := float64(b.N)
	b.ReportMetric((after.fnUs-before.fnUs+after.hsetUs-before.hsetUs)/n, "redis-us/req")
	b.ReportMetric((after.fnUs-before.fnUs)/n, "fcall-us/req")
}

// BenchmarkReserveGateBatch: BenchmarkReserveGateRedis with the gates of m requests of
// one API key in one reserve_gate call, as the server's gate batches concurrent
// requests (gateBatcher): Redis's time per request as m grows. An op is one call of m
// requests and their m stored answers; redis-us/req and fcall-us/req are per request.
func BenchmarkReserveGateBatch(b *testing.B) {
	answer := idempotency.Stored{Status: 202, ContentType: "application/json", Body: []byte(`{"accepted":50,"rejected":0}`)}
	for _, m := range []int{1, 4, 16} {
		b.Run("m="+strconv.Itoa(m), func(b *testing.B) {
			g := newGateBench(b, "batch")
			before, after := g.run(b, func(ctx context.Context, key string) error {
				calls := make([]httpserver.GateCallForTest, m)
				keys := make([]string, m)
				for i := range calls {
					keys[i] = key + "-" + strconv.Itoa(i)
					g.sent.Store(keys[i], true)
					calls[i] = httpserver.GateCallForTest{Kid: g.kid, Burst: g.burst, Daily: g.daily,
						Rec: g.store.PendingRecord(g.kid, keys[i], g.fp, 0, "req_"+keys[i])}
				}
				res, err := httpserver.ReserveGatesForTest(ctx, g.rdb, calls, time.Now())
				if err != nil {
					return err
				}
				for i, r := range res {
					rsv, err := idempotency.ReservationOf(r[:2])
					if err != nil || rsv.Outcome != idempotency.Proceed || r[2] != int64(1) {
						return fmt.Errorf("reserve_gate answered %v (%v)", r, err)
					}
					if err := g.store.CompleteReserved(ctx, rsv, g.kid, keys[i], g.fp, answer); err != nil {
						return err
					}
				}
				return nil
			})
			n := float64(b.N * m)
			b.ReportMetric((after.fnUs-before.fnUs+after.hsetUs-before.hsetUs)/n, "redis-us/req")
			b.ReportMetric((after.fnUs-before.fnUs)/n, "fcall-us/req")
		})
	}
}

// gateBench is what the gate's parallel benchmarks share: one API key's windows, with
// quotas that never deny, and a request fingerprint; the Idempotency-Keys noted in sent
// are forgotten, and the windows dropped, at the benchmark's end.
type gateBench struct {
	rdb          redis.UniversalClient
	store        *idempotency.Store
	kid, fp      string
	burst, daily limits.Window
	seq          atomic.Int64
	sent         sync.Map
}

func newGateBench(b *testing.B, prefix string) *gateBench {
	rdb := oneServer(b)
	g := &gateBench{rdb: rdb, store: idempotency.New(rdb), kid: prefix + "-" + strconv.FormatInt(time.Now().UnixNano(), 36),
		fp: idempotency.Fingerprint("POST", "/v1/events", []byte(`{"events":[]}`))}
	g.burst, g.daily = httpserver.LimitsWindowsForTest(1<<40, 1<<40)
	b.Cleanup(func() {
		ctx := context.Background()
		g.sent.Range(func(k, _ any) bool { _ = g.store.Forget(ctx, g.kid, k.(string)); return true })
		g.rdb.Del(ctx, limits.Keys(g.kid)...)
	})
	return g
}

// run calls call b.N times from eight callers at once, each call with an Idempotency-Key
// of its own, and returns Redis's totals before and after.
func (g *gateBench) run(b *testing.B, call func(ctx context.Context, key string) error) (before, after redisTotals) {
	ctx := context.Background()
	before = redisWork(b, g.rdb)
	b.SetParallelism(4)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := call(ctx, fmt.Sprintf("hot-%d", g.seq.Add(1))); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	return before, redisWork(b, g.rdb)
}

// gatePartsLibrary runs the parts of reserve_gate alone, over the same library code and
// arguments, and three Lua primitives ten times each, so that BenchmarkReserveGateParts
// can tell where the gate's Redis time goes.
var gatePartsLibrary = redisfn.New("gate_parts", idempotency.LuaBuckets+idempotency.LuaRecords+limits.LuaTake+`
local function gp_args(ARGV)
  local n, ra = tonumber(ARGV[1]), {}
  for i = 2, n + 1 do ra[#ra + 1] = ARGV[i] end
  return n, ra
end
local function gp_empty(KEYS, ARGV) return 1 end
local function gp_locate(KEYS, ARGV)
  local _, ra = gp_args(ARGV)
  b_locate(r_table(KEYS[1], ra), ra[2])
  return 1
end
local function gp_lookup(KEYS, ARGV)
  local _, ra = gp_args(ARGV)
  b_get(r_table(KEYS[1], ra), ra[2])
  return 1
end
local function gp_reserve(KEYS, ARGV)
  local _, ra = gp_args(ARGV)
  return reserve(KEYS[1], ra)[1]
end
local function gp_take(KEYS, ARGV)
  local g = tonumber(ARGV[1]) + 2
  return take(KEYS[2], KEYS[3], KEYS[4], tonumber(ARGV[g]), tonumber(ARGV[g + 1]), tonumber(ARGV[g + 2]),
    tonumber(ARGV[g + 3]), tonumber(ARGV[g + 4]), 1)
end
local function gp_format10(KEYS, ARGV)
  local x = 0
  for i = 1, 10 do x = x + #(tostring(1234.5678 + i) .. ' ' .. string.format('%d', 1700000000000 + i)) end
  return x
end
local function gp_match10(KEYS, ARGV)
  local x = 0
  for i = 1, 10 do
    local d, b, at = string.match('12.5 3.25 1700000000000', '^(%S+) (%S+) (%S+)$')
    x = x + tonumber(d) + tonumber(b) + tonumber(at)
  end
  return x
end
local function gp_table10(KEYS, ARGV)
  local x = 0
  for i = 1, 10 do x = x + ({base = KEYS[1], now = i, life = 1, every = 2, skew = 3}).now end
  return x
end
`, "gp_empty", "gp_locate", "gp_lookup", "gp_reserve", "gp_take", "gp_format10", "gp_match10", "gp_table10")

// BenchmarkReserveGateParts: where reserve_gate's Redis time goes. Each sub-benchmark
// calls one part of it as a function of its own, with the gate's keys and arguments
// (a new Idempotency-Key each call, eight callers at once, as BenchmarkReserveGateRedis):
// empty (the call itself), locate (the record's bucket: the directory's GET and the Lua
// around it), lookup (locate and the bucket's HMGET), reserve (the whole reservation),
// take (both windows); and three Lua primitives, ten at a call: format (a number
// formatted twice and joined), match (a window state parsed), table (a table made).
// fcall-us/call is Redis's usec of FCALL (INFO commandstats) per call. Point it at a
// Redis nothing else uses (SVC_REDIS_URL).
func BenchmarkReserveGateParts(b *testing.B) {
	for _, fn := range []string{"gp_empty", "gp_locate", "gp_lookup", "gp_reserve", "gp_take", "gp_format10", "gp_match10", "gp_table10"} {
		b.Run(strings.TrimPrefix(fn, "gp_"), func(b *testing.B) {
			g := newGateBench(b, "parts")
			before, after := g.run(b, func(ctx context.Context, key string) error {
				if fn == "gp_reserve" {
					g.sent.Store(key, true)
				}
				rec := g.store.PendingRecord(g.kid, key, g.fp, 0, "req_"+key)
				rargs := append([]any{time.Now().UnixMilli(), rec.Field, rec.Value}, g.store.Buckets().Args()...) // reserve's a
				args := append(append([]any{len(rargs)}, rargs...), limits.Args(time.Now(), g.burst, g.daily)...)
				return gatePartsLibrary.Call(ctx, g.rdb, fn, append([]string{rec.Dir}, limits.Keys(g.kid)...), args...).Err()
			})
			b.ReportMetric((after.fnUs-before.fnUs)/float64(b.N), "fcall-us/call")
		})
	}
}

// TestReserveGateForCallgrind drives reserve_gate for bench/callgrind-gate.sh, which runs
// Redis under callgrind and counts the instructions of its FCALLs: 4,800 requests, each
// with a new Idempotency-Key of one API key, in calls of SVC_CALLGRIND_M requests (16),
// each answer then stored as the server stores it (a plain HSET, outside the count).
// Instructions do not vary with the host's speed or its neighbours, as the time of the
// same calls does (bench/HISTORY.md, stop 54). It runs only against the Redis that
// SVC_CALLGRIND_REDIS names (host:port), which it leaves full.
func TestReserveGateForCallgrind(t *testing.T) {
	rdb, store := callgrindRedis(t)
	m, err := strconv.Atoi(cmp.Or(os.Getenv("SVC_CALLGRIND_M"), "16"))
	if err != nil || m < 1 || 4800%m != 0 {
		t.Fatalf("SVC_CALLGRIND_M=%q: want a divisor of 4800", os.Getenv("SVC_CALLGRIND_M"))
	}
	ctx := context.Background()
	burst, daily := httpserver.LimitsWindowsForTest(1<<40, 1<<40)
	for c := range 4800 / m {
		calls, keys := make([]httpserver.GateCallForTest, m), make([]string, m)
		for i := range calls {
			keys[i] = fmt.Sprintf("callgrind-%d-%d", c, i)
			calls[i] = httpserver.GateCallForTest{Kid: "callgrind", Burst: burst, Daily: daily,
				Rec: store.PendingRecord("callgrind", keys[i], callgrindFP, 0, "req_"+keys[i])}
		}
		res, err := httpserver.ReserveGatesForTest(ctx, rdb, calls, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range res {
			rsv, err := idempotency.ReservationOf(r[:2])
			if err != nil || rsv.Outcome != idempotency.Proceed || r[2] != int64(1) {
				t.Fatalf("call %d, request %d: reserve_gate answered %v (%v)", c, i, r, err)
			}
			if err := store.CompleteReserved(ctx, rsv, "callgrind", keys[i], callgrindFP, callgrindAnswer); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestReserveRecordForCallgrind is TestReserveGateForCallgrind's reservation as a Redis
// Cluster makes it, in a call of its own on the record's master (idempotency.Store.Reserve:
// reserve_record), for the same 4,800 Idempotency-Keys; the take from the windows, a
// call on another master there, is not in it.
func TestReserveRecordForCallgrind(t *testing.T) {
	_, store := callgrindRedis(t)
	ctx := context.Background()
	for i := range 4800 {
		key := fmt.Sprintf("callgrind-%d", i)
		rsv, err := store.Reserve(ctx, "callgrind", key, callgrindFP, 0, "req_"+key)
		if err != nil || rsv.Outcome != idempotency.Proceed {
			t.Fatalf("request %d: %+v (%v)", i, rsv, err)
		}
		if err := store.CompleteReserved(ctx, rsv, "callgrind", key, callgrindFP, callgrindAnswer); err != nil {
			t.Fatal(err)
		}
	}
}

// callgrindRedis is the callgrind tests' Redis (SVC_CALLGRIND_REDIS, closed when t ends)
// and a records store on it; the test is skipped without it.
func callgrindRedis(t *testing.T) (*redis.Client, *idempotency.Store) {
	addr := os.Getenv("SVC_CALLGRIND_REDIS")
	if addr == "" {
		t.Skip("SVC_CALLGRIND_REDIS is not set: bench/callgrind-gate.sh runs this")
	}
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { rdb.Close() })
	return rdb, idempotency.New(rdb)
}

// callgrindFP and callgrindAnswer are the callgrind tests' requests' fingerprint and
// stored answer.
var (
	callgrindFP     = idempotency.Fingerprint("POST", "/v1/events", []byte(`{"events":[]}`))
	callgrindAnswer = idempotency.Stored{Status: 202, ContentType: "application/json", Body: []byte(`{"accepted":50,"rejected":0}`)}
)
