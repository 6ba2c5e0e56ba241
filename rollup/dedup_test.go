package rollup

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"fmt"
	"os"
	"slices"
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
// after a restart the claiming record's redelivery is not mistaken for a copy. Claims
// of the formats before (a key of its own; a bucket table, written as the consumers
// before this one did) are honoured: a copy they name another record for is skipped,
// the record they name is stored. The consumer writes no claim of its own to a bucket
// table.
func TestSecondCopyOfABatchIsSkipped(t *testing.T) {
	w := newWorld(t, 2)
	rdb := apitest.Redis(t)
	withID := func(b *schema.Batch, p int32, id []byte) *kgo.Record {
		r := record(b, p)
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: schema.HeaderBatchID, Value: id})
		return r
	}
	ids := make([][]byte, 6)
	for i := range ids {
		ids[i] = make([]byte, 16)
		rand.Read(ids[i])
	}
	idA, idB, idOld, idOwn, idTable, idTableOwn := ids[0], ids[1], ids[2], ids[3], ids[4], ids[5]
	a, pa := w.batch() // counted once in the expected totals
	b, pb := w.batch()
	c, pc := w.batch()
	d, pd := w.batch()
	e, pe := w.batch()
	recs := []*kgo.Record{withID(a, pa, idA), withID(b, pb, idB), record(c, pc), withID(a, pa, idA), withID(b, pb, idB),
		withID(a, pa, idOld), withID(d, pd, idOwn), withID(a, pa, idTable), withID(e, pe, idTableOwn)}
	res := w.prod.ProduceSync(context.Background(), recs...)
	if err := res.FirstErr(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	own, tableOwn := recs[6], recs[8] // ProduceSync set their partitions and offsets
	defer dropClaimGroups(t, rdb, schema.TopicEvents, ids)
	// idTable: a copy an older consumer claimed at 0:999999 in its bucket table;
	// idTableOwn: this very record, claimed there before the older consumer's INSERT.
	if _, err := claimIDs(ctx, rdb, schema.TopicEvents, [][]byte{idTable, idTableOwn},
		[]recordPos{{0, 999999}, {tableOwn.Partition, tableOwn.Offset}}, map[string]bool{}); err != nil {
		t.Fatal(err)
	}
	// idOld: a copy an older consumer stored at 0:999999; idOwn: this very record.
	legacy := map[string]string{legacyClaimKey(schema.TopicEvents, idOld): "0:999999",
		legacyClaimKey(schema.TopicEvents, idOwn): fmt.Sprintf("%d:%d", own.Partition, own.Offset)}
	for k, v := range legacy {
		if err := rdb.Set(ctx, k, v, time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
		defer rdb.Del(ctx, k)
	}
	cfg := w.config("g-dedup")
	cfg.Redis, cfg.RejectionSamples = rdb, 100
	stop := w.start(cfg)
	w.waitExact(20 * time.Second)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if got := metric(t, cfg.Registerer, "svc_rollup_duplicate_batches_total"); got != 4 {
		t.Fatalf("duplicate batches counted %v, want 4", got)
	}
	if held := heldInTables(t, rdb, idA, idB); held[0] != "" || held[1] != "" {
		t.Fatalf("the consumer claimed batches in a bucket table: %q", held)
	}
	// Each copy's events are kept as rejections of rule duplicate_batch under the copy's
	// request (GET /batches, GET /rejections): here the copies of a (three times) and b.
	want := uint64(3*len(a.Events) + len(b.Events))
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

// scratchTopic is a topic name of a test's own, for claims in Redis that no consumer
// reads: a bench's consumer on the same Redis would otherwise find their tables (and read
// them as claims older consumers wrote) for the 31 h they live.
func scratchTopic() string { return fmt.Sprintf("test-%d", time.Now().UnixNano()) }

// dropClaimGroups removes the bucket tables of the claim groups of ids in topic, whole
// (ForgetClaims leaves a group's emptied table: a consumer would go on looking there).
func dropClaimGroups(t *testing.T, rdb redis.UniversalClient, topic string, ids [][]byte) {
	t.Helper()
	for _, id := range ids {
		if _, err := process.UnlinkPattern(context.Background(), rdb, "svc:claim2:"+claimGroup(topic, id)+":*"); err != nil {
			t.Error(err)
		}
	}
}

// heldInTables is what the bucket and epoch tables hold of the claims on ids: the
// holders' values, "" where none.
func heldInTables(t *testing.T, rdb redis.UniversalClient, ids ...[]byte) []string {
	t.Helper()
	out := make([]string, len(ids))
	for i, id := range ids {
		args := append(append([]any{time.Now().UnixMilli()}, claimTable.Args()...), epochClaimTable.Args()...)
		vals, err := claimLibrary.Call(context.Background(), rdb, "held",
			[]string{claimDir(schema.TopicEvents, id), epochClaimDir(schema.TopicEvents, id)}, append(args, claimField(id))...).Slice()
		if err != nil || len(vals) != 1 {
			t.Fatalf("held: %v, %v", vals, err)
		}
		out[i], _ = vals[0].(string)
	}
	return out
}

// TestBatchWindow: a second copy of a batch accepted up to a second short of
// batchWindow after the stored one is skipped, whatever the client event ids' window
// (here an hour); one accepted batchWindow after it is stored and holds the claim from
// then on. A new group, which replays the claims from the logs (those of the records
// up to the stored offset: the last copy, after it, is decided and counted again),
// skips a copy accepted two hours after that holder: the replayed claim keeps its
// kind's window, not the event ids' hour.
func TestBatchWindow(t *testing.T) {
	w := newWorld(t, 2)
	rdb := apitest.Redis(t)
	id := make([]byte, 16)
	rand.Read(id)
	t0 := time.Now().Add(-batchWindow - time.Hour).Truncate(time.Second)
	var recs []*kgo.Record
	for _, c := range []struct {
		after  time.Duration
		stored bool
	}{{0, true}, {2 * time.Hour, false}, {batchWindow - time.Second, false}, {batchWindow, true}, {batchWindow + time.Second, false}} {
		b := w.idBatch(0, t0.Add(c.after).UnixMilli(), "once-"+c.after.String())
		if c.stored {
			w.addAll(b)
		}
		r := record(b, 0)
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: schema.HeaderBatchID, Value: id})
		recs = append(recs, r)
	}
	late := record(w.idBatch(0, t0.Add(batchWindow+2*time.Hour).UnixMilli(), "late"), 0)
	late.Headers = append(late.Headers, kgo.RecordHeader{Key: schema.HeaderBatchID, Value: id})
	for i, group := range []string{"g-batchwindow", "g-batchwindow-2"} {
		if err := w.prod.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		cfg := w.config(group)
		cfg.Redis, cfg.EventIDWindow = rdb, time.Hour
		stop := w.start(cfg)
		w.waitExact(20 * time.Second)
		if i > 0 {
			time.Sleep(2 * time.Second) // time enough to have stored the copy
			w.waitExact(10 * time.Second)
		}
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		if got, want := metric(t, cfg.Registerer, "svc_rollup_duplicate_batches_total"), []float64{3, 2}[i]; got != want {
			t.Fatalf("%s: duplicate batches counted %v, want %v", group, got, want)
		}
		recs = []*kgo.Record{late}
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
	topic := scratchTopic() // not the topic a consumer on this Redis reads
	id := make([]byte, 16)
	rand.Read(id)
	defer ForgetClaims(ctx, rdb, topic, [][]byte{id})
	claim := func(at time.Time, pos recordPos) string {
		args := append([]any{at.UnixMilli(), claimField(id), claimValue(pos)}, claimTable.Args()...)
		v, err := claimLibrary.Call(ctx, rdb, "claim", []string{claimDir(topic, id)}, args...).Text()
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
	if err := ForgetClaims(ctx, rdb, topic, [][]byte{id}); err != nil {
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
	topic := scratchTopic() // not the topic a consumer on this Redis reads
	id := make([]byte, 16)
	rand.Read(id)
	defer ForgetClaims(ctx, rdb, topic, [][]byte{id})
	now := time.Now()
	first, second := recordPos{2, 7}, recordPos{2, 70}
	args := append([]any{now.UnixMilli(), claimField(id), claimValue(first)}, epochClaimTable.Args()...)
	if err := epochClaimScript.Run(ctx, rdb, []string{epochClaimDir(topic, id)}, args...).Err(); err != nil {
		t.Fatal(err)
	}
	claim := func(epochs bool) string {
		keys := []string{claimDir(topic, id)}
		args := append([]any{now.UnixMilli(), claimField(id), claimValue(second)}, claimTable.Args()...)
		if epochs {
			keys = append(keys, epochClaimDir(topic, id))
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
// key's requests to many pixels (batch ids as the edge makes them, schema.BatchID: the
// SHA-256 of the key id and the Idempotency-Key) are logged with their partitions'
// claims, one hash tag per partition and epoch, and so land on every master of a Redis
// Cluster, each log on the master of its slot.
func TestOneKeysClaimsSpreadOverMasters(t *testing.T) {
	if os.Getenv("SVC_REDIS_CLUSTER") == "" {
		t.Skip("SVC_REDIS_CLUSTER is not set (make test-scale runs this against a local cluster)")
	}
	rdb, ok := apitest.Redis(t).(*redis.ClusterClient)
	if !ok {
		t.Fatal("SVC_REDIS_CLUSTER is set but the client is not a cluster client")
	}
	ctx := context.Background()
	db := fmt.Sprintf("bench_spread_%d", time.Now().UnixNano())
	t.Cleanup(func() { _, _ = DropEventClaims(ctx, rdb, db) })
	c := claimConsumer(rdb, db, DefaultEventIDWindow)
	kid := uuid.New()
	const partitions = 32
	for p := range int32(partitions) {
		recs, _ := batchRecords(1, p, 0)
		h := sha256.New()
		h.Write(kid[:])
		h.Write([]byte("spread-" + strconv.Itoa(int(p))))
		recs[0].Headers[len(recs[0].Headers)-1].Value = h.Sum(nil)[:16]
		c.held = recs
		if err := c.claimBatches(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.writeEventLogs(ctx); err != nil {
		t.Fatal(err)
	}
	e := time.Now().Unix() / int64(eventClaimSpan/time.Second)
	perMaster := map[string]int{}
	for p := range int32(partitions) {
		key := c.eventLogKey(p, e)
		node, err := rdb.MasterForKey(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if n, err := node.LLen(ctx, key).Result(); err != nil || n != 1 {
			t.Fatalf("partition %d: its claim log on the master of its slot has %d elements (%v), want 1", p, n, err)
		}
		perMaster[node.Options().Addr]++
	}
	masters := 0
	_ = rdb.ForEachMaster(ctx, func(context.Context, *redis.Client) error { masters++; return nil })
	if len(perMaster) != masters {
		t.Errorf("one key's claims on %d partitions are on %d of %d masters: %v", partitions, len(perMaster), masters, perMaster)
	}
	t.Logf("one key's claim logs per master: %v", perMaster)
}

// BenchmarkBatchClaimRedis: Redis's own time for one batch claim (redis-us/claim, the
// FCALLs' usec from INFO commandstats), claimed as the consumer does (claimIDs: a
// poll's batches in one pipeline, one call per claim group; 1,000 batches a poll, what
// 10,000 requests/s brings in 100 ms), in steady state: the groups already hold 30 hours
// of claims. What the events' consumer paid per idempotent POST /events until issue 30
// moved its claims into the claim logs (BenchmarkClaimBatchesPoll); the rejections'
// consumer still claims so. Run it on a Redis of its own (SVC_REDIS_URL).
func BenchmarkBatchClaimRedis(b *testing.B) {
	rdb := apitest.Redis(b)
	ctx := context.Background()
	topic := scratchTopic() // not the topic a consumer on this Redis reads
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
			keys[i] = []string{claimDir(topic, id)}
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
	b.Cleanup(func() { _ = ForgetClaims(ctx, rdb, topic, all) })
	unsynced := map[string]bool{}
	pos := make([]recordPos, b.N)
	for i := range pos {
		pos[i] = recordPos{3, int64(i)}
	}
	calls0, us0 := fcallStats(b, rdb)
	b.ResetTimer()
	for i := 0; i < b.N; i += 1000 {
		if _, err := claimIDs(ctx, rdb, topic, ids[i:min(b.N, i+1000)], pos[i:min(b.N, i+1000)], unsynced); err != nil {
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

// pipelineCounter counts the pipelines (n) and the commands sent alone (single) of a
// Redis client: its round trips.
type pipelineCounter struct{ n, single atomic.Int64 }

func (*pipelineCounter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *pipelineCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.single.Add(1)
		return next(ctx, cmd)
	}
}
func (h *pipelineCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmds)
	}
}

// batchRecords makes n records of one event each on partition p from offset off, each
// with a batch id of its own (ids), accepted now.
func batchRecords(n int, p int32, off int64) (recs []*kgo.Record, ids [][]byte) {
	b := &schema.Batch{ReceivedAt: time.Now().UnixMilli(), RequestID: "req_batches",
		Events: []schema.Event{{Name: "purchase", OccurredAt: time.Now().UnixMilli(), Consent: true}}}
	b.Pixel[0], b.Pixel[1] = 0x50, byte(p)
	for i := range n {
		id := make([]byte, 16)
		rand.Read(id)
		r := record(b, p)
		r.Offset = off + int64(i)
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: schema.HeaderBatchID, Value: id})
		recs, ids = append(recs, r), append(ids, id)
	}
	return recs, ids
}

// TestBatchClaimsOfAPollInOneRoundTrip: a poll's batch claims are decided in memory.
// Where claims older consumers wrote may exist, their look-ups take one round trip to
// Redis (one pipeline, no other command) while a key of the key format may be left, and
// one more only when a batch's claim group has a table; a consumer that found none of
// either at its start, or one past legacyClaimsFor, asks Redis nothing. A copy named by
// a key of the format before, by a bucket table or by an earlier poll's claim is found.
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
	db := fmt.Sprintf("bench_batchclaims_%d", time.Now().UnixNano())
	defer DropEventClaims(ctx, base, db)
	newConsumer := func(topic string, want int32) *consumer {
		t.Helper()
		c := claimConsumer(rdb, db, DefaultEventIDWindow)
		c.cfg.Topic = topic
		if _, err := c.claimIndexOf(ctx, 1); err != nil { // the logs read first (a new owner's LRANGEs)
			t.Fatal(err)
		}
		var err error
		if c.older, err = readOlderClaims(ctx, rdb, topic); err != nil { // as the first claim does
			t.Fatal(err)
		}
		<-c.older.done
		if got := c.older.keys.Load(); got != want {
			t.Fatalf("the scan for claims of the key format in %s ended in state %d, want %d", topic, got, want)
		}
		return c
	}
	// Claims older consumers left in topic: batch 7 of the first poll has a key of the
	// key format naming another record; more[1] (whose claim group no batch of the
	// first poll shares) is claimed in its group's bucket table for another record.
	topic := "test-" + db // no claim tables of earlier runs
	recs, ids := batchRecords(40, 1, 0)
	defer ForgetClaims(ctx, base, topic, ids)
	more, moreIDs := batchRecords(2, 1, 100)
	defer ForgetClaims(ctx, base, topic, moreIDs)
	used := map[byte]bool{}
	for _, id := range ids {
		used[id[15]] = true
	}
	for used[moreIDs[1][15]] {
		moreIDs[1][15]++ // the record's header holds the same bytes
	}
	old := legacyClaimKey(topic, ids[7])
	if err := base.Set(ctx, old, "0:999999", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	defer base.Del(ctx, old)
	if _, err := claimIDs(ctx, base, topic, moreIDs[1:], []recordPos{{0, 999999}}, map[string]bool{}); err != nil {
		t.Fatal(err)
	}
	c := newConsumer(topic, keysSome)
	if n := countTrue(c.older.groups[:]); n != 1 || !c.older.groups[moreIDs[1][15]] {
		t.Fatalf("%d claim groups with a table, want only %s", n, claimGroup(topic, moreIDs[1]))
	}
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
	poll := func(c *consumer, recs []*kgo.Record, pipelines int64, copies ...int) {
		t.Helper()
		hook.n.Store(0)
		hook.single.Store(0)
		c.held = recs
		if err := c.claimBatches(ctx); err != nil {
			t.Fatal(err)
		}
		if got, one := hook.n.Load(), hook.single.Load(); got != pipelines || one != 0 {
			t.Fatalf("a poll's batch claims took %d pipelines and %d commands, want %d and none", got, one, pipelines)
		}
		for i, r := range recs {
			if dup := c.claims[recordPos{r.Partition, r.Offset}]; dup != slices.Contains(copies, i) {
				t.Fatalf("batch %d at offset %d: taken for a copy %v", i, r.Offset, dup)
			}
		}
	}
	// The first poll: the keys' GETs, no group with a table.
	poll(c, recs, 1, 7)
	// The second: a copy of the first poll's batch 3, and more[1] (its group's table
	// read in a second round trip).
	again := *recs[3]
	again.Offset = 99
	poll(c, []*kgo.Record{&again, more[0], more[1]}, 2, 0, 2)
	// A consumer of a topic no older consumer wrote in asks nothing, and finds copies.
	fresh := newConsumer("test-fresh-"+db, keysNone)
	freshRecs, _ := batchRecords(6, 1, 0)
	again2 := *freshRecs[4]
	again2.Offset = 6
	poll(fresh, append(freshRecs, &again2), 0, 6)
	// After legacyClaimsFor: nothing asked of Redis, a copy still found.
	defer func(at time.Time) { processStart = at }(processStart)
	processStart = time.Now().Add(-legacyClaimsFor - time.Minute)
	third, _ := batchRecords(5, 1, 200)
	again3 := *recs[4]
	again3.Offset = 205
	poll(c, append(third, &again3), 0, 5)
}

// BenchmarkClaimBatchesPoll: the consumer's batch claims of small polls (pollSize
// records, as at 200k events/s on two cores), in memory: "upgraded", where an older
// consumer left a claim of the key format (a round trip a poll, the Redis time
// included; no claim group has a table), and "steady", where none left anything. Time
// per record.
func BenchmarkClaimBatchesPoll(b *testing.B) {
	const pollSize = 4
	rdb := apitest.Redis(b)
	ctx := context.Background()
	for _, name := range []string{"upgraded", "steady"} {
		b.Run(name, func(b *testing.B) {
			db := fmt.Sprintf("bench_batchclaims_%d", time.Now().UnixNano())
			b.Cleanup(func() { _, _ = DropEventClaims(ctx, rdb, db) })
			held, _ := batchRecords(b.N, 2, 0)
			c := claimConsumer(rdb, db, DefaultEventIDWindow)
			c.cfg.Topic = "test-" + db // no claim tables of earlier runs
			if name == "upgraded" {
				old := legacyClaimKey(c.cfg.Topic, []byte("an older claim"))
				if err := rdb.Set(ctx, old, "0:1", time.Minute).Err(); err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { rdb.Del(ctx, old) })
			}
			var err error
			if c.older, err = readOlderClaims(ctx, rdb, c.cfg.Topic); err != nil {
				b.Fatal(err)
			}
			<-c.older.done
			b.ResetTimer()
			for i := 0; i < b.N; i += pollSize {
				c.held = held[i:min(b.N, i+pollSize)]
				if err := c.claimBatches(ctx); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			if err := c.writeEventLogs(ctx); err != nil {
				b.Fatal(err)
			}
		})
	}
}

func countTrue(bs []bool) (n int) {
	for _, b := range bs {
		if b {
			n++
		}
	}
	return n
}
