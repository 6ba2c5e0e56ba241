package idempotency

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
)

// testRedis is the test Redis (SVC_REDIS_CLUSTER or SVC_REDIS_URL, as apitest.Redis,
// which this package cannot import).
func testRedis(t *testing.T) redis.UniversalClient {
	t.Helper()
	var rdb redis.UniversalClient
	if c := os.Getenv("SVC_REDIS_CLUSTER"); c != "" {
		rdb = redis.NewClusterClient(&redis.ClusterOptions{Addrs: strings.Split(c, ",")})
	} else {
		url := os.Getenv("SVC_REDIS_URL")
		if url == "" {
			url = "redis://127.0.0.1:6379/0"
		}
		opt, err := redis.ParseURL(url)
		if err != nil {
			t.Fatal(err)
		}
		rdb = redis.NewClient(opt)
	}
	if err := rdb.Ping(context.Background()).Err(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("redis: %v", err)
		}
		t.Skipf("redis unavailable: %v", err)
	}
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

// keysLike lists the keys matching pattern, all in the slot of its hash tag.
func keysLike(t *testing.T, rdb redis.UniversalClient, pattern string) []string {
	ctx := context.Background()
	node := redis.Cmdable(rdb)
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		c, err := cc.MasterForKey(ctx, pattern)
		if err != nil {
			t.Fatal(err)
		}
		node = c
	}
	var keys []string
	iter := node.Scan(ctx, 0, pattern, 1000).Iterator()
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	return keys
}

// tableScript exposes the table functions: ARGV = op, base, now, life, span, skew, f[, v].
var tableScript = redis.NewScript(LuaTable + `
local t = t_open(ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6])
if ARGV[1] == 'put' then
  local key, en = t_put(t, ARGV[7], ARGV[8])
  return {key, en}
end
local v, key, en = t_find(t, ARGV[7])
if not v then return false end
return {v, key, en}
`)

type testTable struct {
	t    *testing.T
	rdb  redis.UniversalClient
	base string
	tab  Table
}

func newTestTable(t *testing.T, tab Table) *testTable {
	rdb := testRedis(t)
	return &testTable{t: t, rdb: rdb, base: scratchBase(t, rdb, "table"), tab: tab}
}

// scratchBase returns a base name of its own under one hash tag, for a test's table of
// the given kind; its keys are deleted when the test ends.
func scratchBase(t *testing.T, rdb redis.UniversalClient, kind string) string {
	base := "svc:test:" + kind + ":{" + uuid.NewString() + "}:"
	t.Cleanup(func() {
		for _, k := range keysLike(t, rdb, base+"*") {
			rdb.Del(context.Background(), k)
		}
	})
	return base
}

func (tt *testTable) run(op string, now time.Time, f string, v ...string) ([]any, error) {
	args := append([]any{op, tt.base, now.UnixMilli()}, tt.tab.Args()...)
	args = append(args, f)
	for _, x := range v {
		args = append(args, x)
	}
	res, err := tableScript.Run(context.Background(), tt.rdb, []string{tt.base + "m"}, args...).Slice()
	if err == redis.Nil {
		return nil, nil
	}
	return res, err
}

func (tt *testTable) put(now time.Time, f, v string) string {
	tt.t.Helper()
	res, err := tt.run("put", now, f, v)
	if err != nil {
		tt.t.Fatal(err)
	}
	return res[0].(string)
}

func (tt *testTable) find(now time.Time, f string) (string, bool) {
	tt.t.Helper()
	res, err := tt.run("find", now, f)
	if err != nil {
		tt.t.Fatal(err)
	}
	if res == nil {
		return "", false
	}
	return res[0].(string), true
}

func testField(i int) string {
	h := sha256.Sum256([]byte(fmt.Sprint("field-", i)))
	return string(h[:fieldLen])
}

// A busy table splits its shards as it fills: every field is found, every shard stays
// in the listpack encoding (under 128 fields), the shards average about Load fields,
// and each expires between Life + Skew and Life + Skew + Span after its fields were
// written.
func TestTableSplitsIntoCompactShards(t *testing.T) {
	tt := newTestTable(t, Table{Life: 24 * time.Hour, Span: 6 * time.Hour, Skew: time.Minute})
	ctx := context.Background()
	now := time.Now()
	const n = 3000
	for i := 0; i < n; i++ {
		tt.put(now, testField(i), fmt.Sprintf("value %d", i))
	}
	for i := 0; i < n; i++ {
		if v, ok := tt.find(now, testField(i)); !ok || v != fmt.Sprintf("value %d", i) {
			t.Fatalf("field %d: %q %v", i, v, ok)
		}
	}
	if _, ok := tt.find(now, testField(n)); ok {
		t.Fatal("a field never written was found")
	}
	epoch := tt.tab.Epoch(now.UnixMilli())
	dir, err := tt.rdb.HGet(ctx, tt.base+"m", fmt.Sprint(epoch)).Result()
	if err != nil {
		t.Fatal(err)
	}
	var level, split, count int
	fmt.Sscanf(dir, "%d %d %d", &level, &split, &count)
	shards := 1<<level + split
	// The count is an estimate (CountStep): within 15% of n, and so the shards' average.
	if count < n*85/100 || count > n*115/100 || n/shards < Load*85/100 || n/shards > Load*115/100 {
		t.Fatalf("directory %q: %d shards for %d fields, want about %d each", dir, shards, n, Load)
	}
	total := 0
	lo := now.Add(tt.tab.Life + tt.tab.Skew).UnixMilli()
	hi := now.Add(tt.tab.Life + tt.tab.Skew + tt.tab.Span).UnixMilli()
	for s := 0; s < shards; s++ {
		key := ShardKey(tt.base, epoch, s)
		enc, _ := tt.rdb.ObjectEncoding(ctx, key).Result()
		size, _ := tt.rdb.HLen(ctx, key).Result()
		at, _ := tt.rdb.PExpireTime(ctx, key).Result()
		if enc != "listpack" || at.Milliseconds() < lo || at.Milliseconds() > hi {
			t.Errorf("shard %d: %s, %d fields, expires at %d (want %d..%d)", s, enc, size, at.Milliseconds(), lo, hi)
		}
		total += int(size)
	}
	if total != n {
		t.Fatalf("%d fields in the shards, want %d", total, n)
	}
}

// Drop removes every key of a table, split shards of two epochs included, and nothing
// of another table.
func TestDropRemovesTheWholeTable(t *testing.T) {
	tab := Table{Life: 24 * time.Hour, Span: 6 * time.Hour, Skew: time.Minute}
	tt, other := newTestTable(t, tab), newTestTable(t, tab)
	now := time.Now()
	for i := 0; i < 500; i++ {
		tt.put(now, testField(i), "v")
		tt.put(now.Add(-tab.Span), testField(1000+i), "v")
	}
	other.put(now, testField(1), "v")
	before := keysLike(t, tt.rdb, tt.base+"*")
	if len(before) < 20 {
		t.Fatalf("%d keys before Drop: the table did not split", len(before))
	}
	gone, err := Drop(context.Background(), tt.rdb, tt.base)
	if err != nil {
		t.Fatal(err)
	}
	if left := keysLike(t, tt.rdb, tt.base+"*"); len(left) != 0 || gone != len(before) {
		t.Fatalf("Drop removed %d of %d keys; left %v", gone, len(before), left)
	}
	if v, ok := other.find(now, testField(1)); !ok || v != "v" {
		t.Fatalf("the other table lost its field: %q %v", v, ok)
	}
}

// A field written in one epoch is found from the next ones for Life + Skew, and no
// longer looked for after that; the directory forgets epochs out of reach.
func TestTableFindsFieldsAcrossEpochs(t *testing.T) {
	tab := Table{Life: 24 * time.Hour, Span: 6 * time.Hour, Skew: time.Minute}
	tt := newTestTable(t, tab)
	start := time.UnixMilli((time.Now().UnixMilli()/tab.Span.Milliseconds() + 1) * tab.Span.Milliseconds()).Add(-time.Second)
	tt.put(start, testField(1), "one")
	for _, later := range []time.Duration{2 * time.Second, 7 * time.Hour, tab.Life + tab.Skew} {
		if v, ok := tt.find(start.Add(later), testField(1)); !ok || v != "one" {
			t.Errorf("%s later: %q %v, want found", later, v, ok)
		}
	}
	gone := start.Add(tab.Life + 2*tab.Skew + tab.Span + time.Second)
	if _, ok := tt.find(gone, testField(1)); ok {
		t.Errorf("found %s later, past its epoch's life", gone.Sub(start))
	}
	tt.put(gone, testField(2), "two")
	names, _ := tt.rdb.HKeys(context.Background(), tt.base+"m").Result()
	if len(names) != 1 {
		t.Errorf("directory %v: want only the new epoch", names)
	}
}

type testStore struct {
	*Store
	t     *testing.T
	rdb   redis.UniversalClient
	keyID string
	now   time.Time
	used  []string
	last  Reservation
}

func newTestStore(t *testing.T) *testStore {
	rdb := testRedis(t)
	ts := &testStore{Store: New(rdb), t: t, rdb: rdb, keyID: uuid.NewString(), now: time.Now()}
	ts.Now = func() time.Time { return ts.now }
	t.Cleanup(func() { _ = ts.Forget(context.Background(), ts.keyID, ts.used...) })
	return ts
}

func (ts *testStore) reserve(idemKey, fp string, takeover time.Duration, reqID string) (Outcome, *Stored) {
	ts.t.Helper()
	ts.used = append(ts.used, idemKey)
	r, err := ts.Reserve(context.Background(), ts.keyID, idemKey, fp, takeover, reqID)
	if err != nil {
		ts.t.Fatal(err)
	}
	ts.last = r
	return r.Outcome, r.Stored
}

func (ts *testStore) peek(idemKey string) State {
	ts.t.Helper()
	st, err := ts.Peek(context.Background(), ts.keyID, idemKey)
	if err != nil {
		ts.t.Fatal(err)
	}
	return st
}

func sameStored(a *Stored, b Stored) bool {
	return a != nil && a.Status == b.Status && a.ContentType == b.ContentType && bytes.Equal(a.Body, b.Body)
}

// The record's life: reserved, in use, reuse with another body, completed and replayed
// byte for byte (a long answer too, kept outside the table), released only by its owner,
// lapsed after PendingTTL, taken over after the takeover time, and replayed 24 h after it
// was stored.
func TestRecordLifecycle(t *testing.T) {
	ts := newTestStore(t)
	ctx := context.Background()
	fp, other := Fingerprint("POST", "/events", []byte("a")), Fingerprint("POST", "/events", []byte("b"))
	if o, _ := ts.reserve("k1", fp, 0, "req_1"); o != Proceed {
		t.Fatalf("first: %v", o)
	}
	if o, _ := ts.reserve("k1", fp, 0, "req_2"); o != InUse {
		t.Fatalf("repeat while pending: %v", o)
	}
	if o, _ := ts.reserve("k1", fp, 0, "req_1"); o != Proceed {
		t.Fatalf("the same call run again (a client library's retry after a lost reply): %v, want proceed", o)
	}
	if o, _ := ts.reserve("k1", other, 0, "req_2"); o != Reuse {
		t.Fatalf("other body while pending: %v", o)
	}
	if err := ts.Release(ctx, ts.keyID, "k1", fp, "req_2"); err != nil || ts.peek("k1") != Pending {
		t.Fatalf("a release by another request dropped the reservation (%v)", err)
	}
	if err := ts.Complete(ctx, ts.keyID, "k1", fp, clean202); err != nil {
		t.Fatal(err)
	}
	if o, st := ts.reserve("k1", fp, 0, "req_3"); o != Replay || !sameStored(st, clean202) {
		t.Fatalf("replay: %v %+v", o, st)
	}
	if o, _ := ts.reserve("k1", other, 0, "req_3"); o != Reuse {
		t.Fatalf("other body after completion: %v", o)
	}

	long := Stored{Status: 422, ContentType: "application/problem+json", Body: []byte(`{"detail":"` + strings.Repeat("long ", 60) + `"}`)}
	ts.reserve("k2", fp, 0, "req_4")
	if err := ts.Complete(ctx, ts.keyID, "k2", fp, long); err != nil {
		t.Fatal(err)
	}
	if o, st := ts.reserve("k2", fp, 0, "req_5"); o != Replay || !sameStored(st, long) {
		t.Fatalf("replay of a long answer: %v %+v", o, st)
	}

	ts.reserve("k3", fp, 0, "req_6")
	if err := ts.Release(ctx, ts.keyID, "k3", fp, "req_6"); err != nil || ts.peek("k3") != Absent {
		t.Fatalf("release by its owner: %v, state %v", err, ts.peek("k3"))
	}

	ts.reserve("k4", fp, 0, "req_7")
	ts.now = ts.now.Add(ts.PendingTTL + time.Millisecond)
	if ts.peek("k4") != Absent {
		t.Fatal("a reservation older than PendingTTL is still pending")
	}
	if o, _ := ts.reserve("k4", other, 0, "req_8"); o != Proceed {
		t.Fatalf("after the reservation lapsed, another body: %v", o)
	}

	ts.reserve("k5", fp, 7*time.Second, "req_9")
	ts.now = ts.now.Add(6 * time.Second)
	if o, _ := ts.reserve("k5", fp, 7*time.Second, "req_10"); o != InUse {
		t.Fatalf("before the takeover time: %v", o)
	}
	ts.now = ts.now.Add(time.Second)
	if o, _ := ts.reserve("k5", fp, 7*time.Second, "req_10"); o != Proceed {
		t.Fatalf("at the takeover time: %v", o)
	}
	ts.Release(ctx, ts.keyID, "k5", fp, "req_9") // the first run fails late
	if o, _ := ts.reserve("k5", fp, 7*time.Second, "req_11"); o != InUse {
		t.Fatalf("the first run's late release dropped the taker's reservation: %v", o)
	}

	// Stored, then replayed a day later (TestBucketsSweepOnlyExpiredRecords: the sweeps
	// of its bucket in between keep it).
	ts.reserve("k7", fp, 0, "req_13")
	ts.Complete(ctx, ts.keyID, "k7", fp, oneRejection)
	ts.now = ts.now.Add(ts.TTL + time.Minute)
	if o, st := ts.reserve("k7", fp, 0, "req_14"); o != Replay || !sameStored(st, oneRejection) {
		t.Fatalf("replay 24 h later: %v %+v", o, st)
	}
	if err := ts.Forget(ctx, ts.keyID, "k7"); err != nil || ts.peek("k7") != Absent {
		t.Fatalf("forget: %v, state %v", err, ts.peek("k7"))
	}
}

// The Lua table functions use the package's Load and CountStep.
func TestLuaTableUsesTheGoConstants(t *testing.T) {
	for _, want := range []string{fmt.Sprintf("local T_LOAD = %d\n", Load), fmt.Sprintf("local T_STEP = %d\n", CountStep)} {
		if !strings.Contains(LuaTable, want) {
			t.Errorf("LuaTable lacks %q", want)
		}
	}
}

// CompleteReserved writes the answer over the reservation with one HSET (stamped as the
// Lua functions stamp), and where the reservation is not in its bucket any more (its
// bucket split, or it was dropped) it leaves no stray field and stores the answer where a
// lookup finds it.
func TestCompleteReservedWritesOverTheReservation(t *testing.T) {
	ts := newTestStore(t)
	ctx := context.Background()
	fp := Fingerprint("POST", "/events", []byte("a"))
	if o, _ := ts.reserve("c1", fp, 0, "req_1"); o != Proceed || ts.last.bucket == "" {
		t.Fatalf("reserve: %v, bucket %q", o, ts.last.bucket)
	}
	if err := ts.CompleteReserved(ctx, ts.last, ts.keyID, "c1", fp, clean202); err != nil {
		t.Fatal(err)
	}
	dir, f := record(ts.keyID, "c1")
	if v := storedValue(ctx, ts.rdb, dir, f); !strings.HasPrefix(v, stamp(ts.now)+"D") {
		t.Fatalf("the record in its bucket is %q, want the stamp and the done record", v)
	}
	if o, st := ts.reserve("c1", fp, 0, "req_2"); o != Replay || !sameStored(st, clean202) {
		t.Fatalf("replay: %v %+v", o, st)
	}

	ts.reserve("c2", fp, 0, "req_3")
	moved := ts.last
	_, f2 := record(ts.keyID, "c2")
	ts.rdb.HDel(ctx, moved.bucket, f2) // as if a split had moved it to a new bucket
	moved.bucket = moved.bucket + "x"
	if err := ts.CompleteReserved(ctx, moved, ts.keyID, "c2", fp, oneRejection); err != nil {
		t.Fatal(err)
	}
	if n := ts.rdb.Exists(ctx, moved.bucket).Val(); n != 0 {
		t.Fatalf("a stray field was left in %s", moved.bucket)
	}
	if o, st := ts.reserve("c2", fp, 0, "req_4"); o != Replay || !sameStored(st, oneRejection) {
		t.Fatalf("replay after the fallback: %v %+v", o, st)
	}
}

// storedValue is field f's value in whichever bucket of the table with directory dir
// holds it now: the groups are shared with every other test using this Redis (make test
// runs packages in parallel), whose records can split the bucket a reservation found
// between the reservation and the read.
func storedValue(ctx context.Context, rdb redis.UniversalClient, dir, f string) string {
	var level, split int
	fmt.Sscan(rdb.Get(ctx, dir).Val(), &level, &split) // absent: "0 0 0", one bucket
	base := strings.TrimSuffix(dir, "d")
	for n := 0; n < 1<<level+split; n++ {
		if v := rdb.HGet(ctx, BucketKey(base, n), f).Val(); v != "" {
			return v
		}
	}
	return ""
}

// commandLog records the names of the commands a client sends (go-redis hook).
type commandLog struct{ names []string }

func (l *commandLog) add(cmd redis.Cmder) {
	if n := cmd.Name(); n != "hello" && n != "client" { // a new connection's handshake
		l.names = append(l.names, n)
	}
}

func (l *commandLog) DialHook(next redis.DialHook) redis.DialHook { return next }
func (l *commandLog) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		l.add(cmd)
		return next(ctx, cmd)
	}
}
func (l *commandLog) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			l.add(c)
		}
		return next(ctx, cmds)
	}
}

// An answer too long for a field is completed without a function call too: the string
// that holds it, living as long as the buckets' keys written then, and the "L" record
// over the reservation, in one round trip; a repeat replays it byte for byte.
func TestCompleteReservedStoresALongAnswerWithoutAFunction(t *testing.T) {
	ts := newTestStore(t)
	ctx := context.Background()
	fp := Fingerprint("POST", "/events", []byte("long"))
	long := Stored{Status: 202, ContentType: "application/json",
		Body: []byte(`{"accepted":45,"rejected":5,"duplicates":0,"rejections":[{"index":3,"field":"currency","rule":"iso4217","value":"EURO"},{"index":9,"field":"value","rule":"range","value":-12.5},{"index":17,"field":"occurred_at","rule":"rfc3339","value":"28/11/2026 10:00"},{"index":30,"field":"event_name","rule":"required","value":null},{"index":44,"field":"currency","rule":"iso4217","value":"DOLLARS"}],"request_id":"req_4e96cdcc6c8cd28aa7c62e80"}`)}
	if len(doneRecord(fp, long)) <= MaxValue-stampLen {
		t.Fatal("twoRejections fits a field: the test needs a longer answer")
	}
	if o, _ := ts.reserve("l1", fp, 0, "req_1"); o != Proceed || ts.last.bucket == "" {
		t.Fatalf("reserve: %v, bucket %q", o, ts.last.bucket)
	}
	log := &commandLog{}
	ts.rdb.AddHook(log)
	if err := ts.CompleteReserved(ctx, ts.last, ts.keyID, "l1", fp, long); err != nil {
		t.Fatal(err)
	}
	got := strings.Join(log.names, " ")
	if got != "set hset" {
		t.Fatalf("CompleteReserved sent %q, want the string and the field (set hset)", got)
	}
	dir, f := record(ts.keyID, "l1")
	if v := storedValue(ctx, ts.rdb, dir, f); v != stamp(ts.now)+"L"+fp {
		t.Fatalf("the record in its bucket is %q, want the stamp, L and the fingerprint", v)
	}
	// The string lives as long as a bucket key written at the same moment (b_expiry), so
	// at least as long as the record. (The bucket itself may live longer: every later
	// write of another record into it pushes its expiry on, which does not lengthen this
	// record's life, swept by its stamp; comparing with it failed when another test's
	// later clock had written into the same bucket of a shared Redis.)
	ttl := ts.rdb.PTTL(ctx, largeKey(dir, f)).Val()
	if life := ts.largeLife(); ttl < ts.TTL+ts.Span || ttl > life || ttl < life-time.Minute {
		t.Fatalf("the answer's string lives %v, want %v (a bucket key's life), at least %v", ttl, life, ts.TTL+ts.Span)
	}
	if o, st := ts.reserve("l1", fp, 0, "req_2"); o != Replay || !sameStored(st, long) {
		t.Fatalf("replay: %v %+v", o, st)
	}
	if err := ts.Forget(ctx, ts.keyID, "l1"); err != nil || ts.rdb.Exists(ctx, largeKey(dir, f)).Val() != 0 {
		t.Fatalf("forget left the answer's string: %v", err)
	}
}
