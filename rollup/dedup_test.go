package rollup

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kgo"

	"svc/lib/idempotency"
	"svc/lib/process"
	"svc/schema"
	"svc/schema/apitest"
)

// TestSecondCopyOfABatchIsSkipped: a batch produced twice with the same batch id (an
// edge died between Kafka's acknowledgement and the response, and the client retried)
// is stored once, the copies' events kept as rejections of rule duplicate_batch; a batch
// without an id, or with another id, is stored as usual; and
// after a restart the claiming record's redelivery is not mistaken for a copy. A claim of
// the format before (a key of its own) is honoured: a copy it names another record for
// is skipped, the record it names is stored.
func TestSecondCopyOfABatchIsSkipped(t *testing.T) {
	w := newWorld(t, 2)
	rdb := apitest.Redis(t)
	withID := func(b *schema.Batch, p int32, id []byte) *kgo.Record {
		r := record(b, p)
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: schema.HeaderBatchID, Value: id})
		return r
	}
	ids := make([][]byte, 4)
	for i := range ids {
		ids[i] = make([]byte, 16)
		rand.Read(ids[i])
	}
	idA, idB, idOld, idOwn := ids[0], ids[1], ids[2], ids[3]
	a, pa := w.batch() // counted once in the expected totals
	b, pb := w.batch()
	c, pc := w.batch()
	d, pd := w.batch()
	recs := []*kgo.Record{withID(a, pa, idA), withID(b, pb, idB), record(c, pc), withID(a, pa, idA), withID(b, pb, idB),
		withID(a, pa, idOld), withID(d, pd, idOwn)}
	res := w.prod.ProduceSync(context.Background(), recs...)
	if err := res.FirstErr(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	own := recs[len(recs)-1] // ProduceSync set its partition and offset
	// idOld: a copy an older consumer stored at 0:999999; idOwn: this very record.
	legacy := map[string]string{legacyClaimKey(schema.TopicEvents, idOld): "0:999999",
		legacyClaimKey(schema.TopicEvents, idOwn): fmt.Sprintf("%d:%d", own.Partition, own.Offset)}
	for k, v := range legacy {
		if err := rdb.Set(ctx, k, v, time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
		defer rdb.Del(ctx, k)
	}
	defer ForgetClaims(ctx, rdb, schema.TopicEvents, ids)
	cfg := w.config("g-dedup")
	cfg.Redis, cfg.RejectionSamples = rdb, 100
	stop := w.start(cfg)
	w.waitExact(20 * time.Second)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if got := metric(t, cfg.Registerer, "svc_rollup_duplicate_batches_total"); got != 3 {
		t.Fatalf("duplicate batches counted %v, want 3", got)
	}
	// Each copy's events are kept as rejections of rule duplicate_batch under the copy's
	// request (GET /batches, GET /rejections): here the copies of a (twice) and b.
	want := uint64(2*len(a.Events) + len(b.Events))
	var n uint64
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if err := w.conn.QueryRow(ctx, `SELECT sum(rejections) FROM rejections WHERE rule = 'duplicate_batch'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n >= want || time.Now().After(deadline) {
			break
		}
	}
	if n != want {
		t.Fatalf("rejections of rule duplicate_batch: %d, want %d (the events of the three copies)", n, want)
	}
	// A new group re-reads everything from the start: the claiming records are stored
	// data already (skipped by offset), the copies are still copies; nothing changes.
	cfg2 := w.config("g-dedup-2")
	cfg2.Redis = rdb
	stop2 := w.start(cfg2)
	time.Sleep(2 * time.Second)
	w.waitExact(10 * time.Second)
	if err := stop2(); err != nil {
		t.Fatal(err)
	}
}

// A claim lives at least its 25 h: the table keeps it that long, whatever epoch it was
// made in, and it is found from a later epoch.
func TestClaimOutlivesTheRetryWindow(t *testing.T) {
	if claimTable.Life < 25*time.Hour {
		t.Fatalf("claims live %s, want at least 25 h (24 h of retries, 1 h of lag)", claimTable.Life)
	}
	rdb := apitest.Redis(t)
	ctx := context.Background()
	id := make([]byte, 16)
	rand.Read(id)
	defer ForgetClaims(ctx, rdb, schema.TopicEvents, [][]byte{id})
	claim := func(at time.Time, pos recordPos) string {
		args := append([]any{at.UnixMilli(), claimField(id), claimValue(pos)}, claimTable.Args()...)
		v, err := claimLibrary.Call(ctx, rdb, "claim", []string{claimDir(schema.TopicEvents, id)}, args...).Text()
		if err != nil && err != redis.Nil {
			t.Fatal(err)
		}
		return v
	}
	now := time.Now()
	first, second := recordPos{1, 41}, recordPos{1, 9000}
	if v := claim(now, first); v != "" {
		t.Fatalf("first claim: held by %q", v)
	}
	if v := claim(now.Add(claimTable.Life), second); v != claimValue(first) {
		t.Fatalf("25 h later the second copy sees %q, want the first record's claim", v)
	}
	if err := ForgetClaims(ctx, rdb, schema.TopicEvents, [][]byte{id}); err != nil {
		t.Fatal(err)
	}
	if v := claim(now, second); v != "" {
		t.Fatalf("after ForgetClaims the claim is still held by %q", v)
	}
}

// epochClaimScript writes a claim in the format before (an epoch table,
// idempotency.Table): KEYS = epochClaimDir; ARGV = now ms, field, value,
// epochClaimTable.Args.
var epochClaimScript = redis.NewScript(idempotency.LuaTable + `
local t = t_open(string.sub(KEYS[1], 1, -2), ARGV[1], ARGV[4], ARGV[5], ARGV[6])
t_put(t, ARGV[2], ARGV[3])
return 1`)

// A claim of the format before (an epoch table) is honoured while that table exists: a
// second copy finds the first record's claim there; once it is gone (or not asked for),
// a claim is made in the bucket table as usual.
func TestEpochClaimsAreHonoured(t *testing.T) {
	rdb := apitest.Redis(t)
	ctx := context.Background()
	id := make([]byte, 16)
	rand.Read(id)
	defer ForgetClaims(ctx, rdb, schema.TopicEvents, [][]byte{id})
	now := time.Now()
	first, second := recordPos{2, 7}, recordPos{2, 70}
	args := append([]any{now.UnixMilli(), claimField(id), claimValue(first)}, epochClaimTable.Args()...)
	if err := epochClaimScript.Run(ctx, rdb, []string{epochClaimDir(schema.TopicEvents, id)}, args...).Err(); err != nil {
		t.Fatal(err)
	}
	claim := func(epochs bool) string {
		keys := []string{claimDir(schema.TopicEvents, id)}
		args := append([]any{now.UnixMilli(), claimField(id), claimValue(second)}, claimTable.Args()...)
		if epochs {
			keys = append(keys, epochClaimDir(schema.TopicEvents, id))
			args = append(args, epochClaimTable.Args()...)
		}
		v, err := claimLibrary.Call(ctx, rdb, "claim", keys, args...).Text()
		if err != nil && err != redis.Nil {
			t.Fatal(err)
		}
		return v
	}
	if v := claim(true); v != claimValue(first) {
		t.Fatalf("the second copy sees %q, want the first record's claim of the format before", v)
	}
	if v := claim(false); v != "" {
		t.Fatalf("without the format before, the claim is held by %q", v)
	}
	if v := claim(false); v != claimValue(second) {
		t.Fatalf("the claim just made reads %q", v)
	}
}

// TestOneKeysClaimsSpreadOverMasters (make test-scale): the batch claims of one API
// key's requests (batch ids as the edge makes them, schema.BatchID: the SHA-256 of the
// key id and the Idempotency-Key) land on every master of a Redis Cluster, each in its
// group's slot.
func TestOneKeysClaimsSpreadOverMasters(t *testing.T) {
	if os.Getenv("SVC_REDIS_CLUSTER") == "" {
		t.Skip("SVC_REDIS_CLUSTER is not set (make test-scale runs this against a local cluster)")
	}
	rdb, ok := apitest.Redis(t).(*redis.ClusterClient)
	if !ok {
		t.Fatal("SVC_REDIS_CLUSTER is set but the client is not a cluster client")
	}
	ctx := context.Background()
	kid := uuid.New()
	const n = 60
	ids := make([][]byte, n)
	keys, args := make([][]string, n), make([][]any, n)
	for i := range ids {
		h := sha256.New()
		h.Write(kid[:])
		h.Write([]byte("spread-" + strconv.Itoa(i)))
		ids[i] = h.Sum(nil)[:16]
		keys[i] = []string{claimDir(schema.TopicEvents, ids[i])}
		args[i] = append([]any{time.Now().UnixMilli(), claimField(ids[i]), claimValue(recordPos{0, int64(i)})}, claimTable.Args()...)
	}
	t.Cleanup(func() { _ = ForgetClaims(ctx, rdb, schema.TopicEvents, ids) })
	if _, err := claimLibrary.PipelinedKeys(ctx, rdb, "claim", keys, args); err != nil {
		t.Fatal(err)
	}
	perMaster := map[string]int{}
	for i, k := range keys {
		node, err := rdb.MasterForKey(ctx, k[0])
		if err != nil {
			t.Fatal(err)
		}
		if found, err := node.Exists(ctx, k[0]).Result(); err != nil || found != 1 {
			t.Fatalf("claim %d: its group's directory is not on the master of its slot (%v)", i, err)
		}
		perMaster[node.Options().Addr]++
	}
	masters := 0
	_ = rdb.ForEachMaster(ctx, func(context.Context, *redis.Client) error { masters++; return nil })
	if len(perMaster) != masters {
		t.Errorf("one key's %d claims are on %d of %d masters: %v", n, len(perMaster), masters, perMaster)
	}
	t.Logf("one key's claims per master: %v", perMaster)
}

// BenchmarkBatchClaimRedis: Redis's own time for one batch claim (redis-us/claim, the
// FCALLs' usec from INFO commandstats), claimed as the consumer does (claimIDs: a
// poll's batches in one pipeline, one call per claim group; 1,000 batches a poll, what
// 10,000 requests/s brings in 100 ms), in steady state: the groups already hold 30 hours
// of claims. The
// third part of an idempotent POST /events' Redis work beside httpserver's
// BenchmarkIdempotentRequestRedis; run it on a Redis of its own (SVC_REDIS_URL).
func BenchmarkBatchClaimRedis(b *testing.B) {
	rdb := apitest.Redis(b)
	ctx := context.Background()
	newIDs := func(n int) [][]byte {
		ids := make([][]byte, n)
		for i := range ids {
			ids[i] = make([]byte, 16)
			rand.Read(ids[i])
		}
		return ids
	}
	claimAll := func(ids [][]byte, at time.Time) {
		keys, args := make([][]string, len(ids)), make([][]any, len(ids))
		for i, id := range ids {
			keys[i] = []string{claimDir(schema.TopicEvents, id)}
			args[i] = append([]any{at.UnixMilli(), claimField(id), claimValue(recordPos{1, int64(i)})}, claimTable.Args()...)
		}
		if _, err := claimLibrary.PipelinedKeys(ctx, rdb, "claim", keys, args); err != nil {
			b.Fatal(err)
		}
	}
	var all [][]byte
	for h := 30; h > 0; h -= 3 {
		ids := newIDs(2000)
		claimAll(ids, time.Now().Add(-time.Duration(h)*time.Hour))
		all = append(all, ids...)
	}
	ids := newIDs(b.N)
	all = append(all, ids...)
	b.Cleanup(func() { _ = ForgetClaims(ctx, rdb, schema.TopicEvents, all) })
	unsynced := map[string]bool{}
	pos := make([]recordPos, b.N)
	for i := range pos {
		pos[i] = recordPos{3, int64(i)}
	}
	calls0, us0 := fcallStats(b, rdb)
	b.ResetTimer()
	for i := 0; i < b.N; i += 1000 {
		if _, err := claimIDs(ctx, rdb, schema.TopicEvents, ids[i:min(b.N, i+1000)], pos[i:min(b.N, i+1000)], unsynced); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	calls1, us1 := fcallStats(b, rdb)
	b.ReportMetric(float64(us1-us0)/float64(b.N), "redis-us/claim")
	b.ReportMetric(float64(calls1-calls0)/float64(b.N), "fcalls/claim")
}

// fcallStats returns Redis's count of FCALLs and the microseconds it spent in them
// (INFO commandstats; summed over a cluster's masters).
func fcallStats(t testing.TB, rdb redis.UniversalClient) (calls, usec int64) {
	t.Helper()
	read := func(info string) {
		for _, line := range strings.Split(info, "\n") {
			stats, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_fcall:")
			if !ok {
				continue
			}
			for _, kv := range strings.Split(stats, ",") {
				k, v, _ := strings.Cut(kv, "=")
				n, _ := strconv.ParseInt(v, 10, 64)
				switch k {
				case "calls":
					calls += n
				case "usec":
					usec += n
				}
			}
		}
	}
	err := process.EachMaster(context.Background(), rdb, func(ctx context.Context, node *redis.Client) error {
		info, err := node.Info(ctx, "commandstats").Result()
		read(info)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return calls, usec
}

// pipelineCounter counts the pipelines (round trips) a Redis client sends.
type pipelineCounter struct{ n atomic.Int64 }

func (*pipelineCounter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (*pipelineCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return next
}
func (h *pipelineCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmds)
	}
}

// TestBatchClaimsOfAPollInOneRoundTrip: a poll's batch claims and, while they are read,
// the look-ups of the claims of the format before go to Redis in one pipeline; a copy
// named by either is still found.
func TestBatchClaimsOfAPollInOneRoundTrip(t *testing.T) {
	base := apitest.Redis(t)
	var rdb redis.UniversalClient // a client of its own, for the hook
	switch c := base.(type) {
	case *redis.Client:
		rdb = redis.NewClient(c.Options())
	case *redis.ClusterClient: // the pipeline's commands go to their masters at once
		rdb = redis.NewClusterClient(c.Options())
	default:
		t.Fatalf("a Redis client of type %T", base)
	}
	defer rdb.Close()
	ctx := context.Background()
	ids := make([][]byte, 40)
	held := make([]*kgo.Record, len(ids))
	for i := range ids {
		ids[i] = make([]byte, 16)
		rand.Read(ids[i])
		held[i] = &kgo.Record{Partition: 1, Offset: int64(i),
			Headers: []kgo.RecordHeader{{Key: schema.HeaderBatchID, Value: ids[i]}}}
	}
	defer ForgetClaims(ctx, base, schema.TopicEvents, ids)
	old := legacyClaimKey(schema.TopicEvents, ids[7])
	if err := base.Set(ctx, old, "0:999999", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	defer base.Del(ctx, old)
	// The library loaded and the connection made first (its handshake is a pipeline of
	// its own), so that the count below is the steady state's.
	if err := claimLibrary.Load(ctx, base); err != nil {
		t.Fatal(err)
	}
	if _, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error { return p.Ping(ctx).Err() }); err != nil {
		t.Fatal(err)
	}
	hook := &pipelineCounter{}
	rdb.AddHook(hook)
	c := &consumer{cfg: Config{Redis: rdb, Topic: schema.TopicEvents}, held: held,
		claims: map[recordPos]bool{}, sync: claimSync{unsynced: map[string]bool{}}}
	if err := c.claimBatches(ctx); err != nil {
		t.Fatal(err)
	}
	if got := hook.n.Load(); got != 1 {
		t.Fatalf("%d round trips for a poll's claims, want 1", got)
	}
	for i := range ids {
		if dup := c.claims[recordPos{1, int64(i)}]; dup != (i == 7) {
			t.Fatalf("batch %d: taken for a copy %v, want %v", i, dup, i == 7)
		}
	}
}

// BenchmarkClaimBatchesPoll: the consumer's batch claims of small polls (pollSize
// records, as at 200k events/s on two cores), while the claims of the format before are
// still read: wall time per record, the Redis round trip(s) included.
func BenchmarkClaimBatchesPoll(b *testing.B) {
	const pollSize = 4
	rdb := apitest.Redis(b)
	ctx := context.Background()
	ids := make([][]byte, b.N)
	held := make([]*kgo.Record, b.N)
	for i := range ids {
		ids[i] = make([]byte, 16)
		rand.Read(ids[i])
		held[i] = &kgo.Record{Partition: 2, Offset: int64(i),
			Headers: []kgo.RecordHeader{{Key: schema.HeaderBatchID, Value: ids[i]}}}
	}
	b.Cleanup(func() { _ = ForgetClaims(ctx, rdb, schema.TopicEvents, ids) })
	c := &consumer{cfg: Config{Redis: rdb, Topic: schema.TopicEvents},
		claims: map[recordPos]bool{}, sync: claimSync{unsynced: map[string]bool{}}}
	b.ResetTimer()
	for i := 0; i < b.N; i += pollSize {
		c.held = held[i:min(b.N, i+pollSize)]
		if err := c.claimBatches(ctx); err != nil {
			b.Fatal(err)
		}
	}
}
