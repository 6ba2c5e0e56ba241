package idempotency

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"svc/lib/redisfn"
)

// bucketLibrary exposes the bucket functions: ARGV = op ("put", "get" or "del"), base,
// now, life, every, skew, f[, v]. A function library, as the service runs them, so that
// what the library keeps from call to call (B_NUM, B_DIRS) is tested too.
var bucketLibrary = redisfn.New("buckets_test", LuaBuckets+`
local function bucket_op(KEYS, ARGV)
  local b = b_open(ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6])
  local v = b_get(b, ARGV[7])
  if ARGV[1] == 'put' then return b_put(b, ARGV[7], ARGV[8]) and 1 or 0 end
  if ARGV[1] == 'del' then b_del(b, ARGV[7]) end
  return v or false
end
local function bucket_memo(KEYS, ARGV) return {B_DIRN, B_DIRS_MAX} end
`, "bucket_op", "bucket_memo")

type testBuckets struct {
	t    *testing.T
	rdb  redis.UniversalClient
	base string
	tab  Buckets
}

func newTestBuckets(t *testing.T, tab Buckets) *testBuckets {
	rdb := testRedis(t)
	return &testBuckets{t: t, rdb: rdb, base: scratchBase(t, rdb, "buckets"), tab: tab}
}

func (tb *testBuckets) run(op string, now time.Time, f string, v ...any) any {
	tb.t.Helper()
	args := append(append([]any{op, tb.base, now.UnixMilli()}, tb.tab.Args()...), f)
	res, err := bucketLibrary.Call(context.Background(), tb.rdb, "bucket_op", []string{tb.base + "d"}, append(args, v...)...).Result()
	if err == redis.Nil {
		return nil
	}
	if err != nil {
		tb.t.Fatal(err)
	}
	return res
}

func (tb *testBuckets) put(now time.Time, f, v string) { tb.run("put", now, f, v) }

func (tb *testBuckets) get(now time.Time, f string) (string, bool) {
	v, ok := tb.run("get", now, f).(string)
	return v, ok
}

// level and split of the table's directory.
func (tb *testBuckets) dir() (level, split int) {
	d, _ := tb.rdb.Get(context.Background(), tb.base+"d").Result()
	fmt.Sscanf(d, "%d %d", &level, &split)
	return level, split
}

// A busy table splits its buckets as it fills: every field is found in one read, every
// bucket stays in the listpack encoding (under 128 fields), the buckets average Load to
// 2·Load fields, and
// every bucket and the directory expire no sooner than Life + Skew from now.
func TestBucketsSplitIntoCompactHashes(t *testing.T) {
	tb := newTestBuckets(t, Buckets{Life: 24 * time.Hour, Every: 6 * time.Hour, Skew: time.Minute})
	ctx := context.Background()
	now := time.Now()
	const n = 3000
	for i := 0; i < n; i++ {
		tb.put(now, testField(i), fmt.Sprintf("value %d", i))
	}
	for i := 0; i < n; i++ {
		if v, ok := tb.get(now, testField(i)); !ok || v != fmt.Sprintf("value %d", i) {
			t.Fatalf("field %d: %q %v", i, v, ok)
		}
	}
	if _, ok := tb.get(now, testField(n)); ok {
		t.Fatal("a field never written was found")
	}
	level, split := tb.dir()
	buckets := 1<<level + split
	if n/buckets < Load*85/100 || n/buckets > Load*2 {
		t.Fatalf("%d buckets for %d fields", buckets, n)
	}
	lo := now.Add(tb.tab.Life + tb.tab.Skew).UnixMilli()
	total := 0
	for i := 0; i < buckets; i++ {
		key := BucketKey(tb.base, i)
		enc, _ := tb.rdb.ObjectEncoding(ctx, key).Result()
		size, _ := tb.rdb.HLen(ctx, key).Result()
		at, _ := tb.rdb.PExpireTime(ctx, key).Result()
		if enc != "listpack" || at.Milliseconds() < lo {
			t.Errorf("bucket %d: %s, %d fields, expires at %d (want after %d)", i, enc, size, at.Milliseconds(), lo)
		}
		total += int(size) - 1 // the sweep time
	}
	if total != n {
		t.Fatalf("%d fields in the buckets, want %d", total, n)
	}
	if at, _ := tb.rdb.PExpireTime(ctx, tb.base+"d").Result(); at.Milliseconds() < lo {
		t.Fatalf("the directory expires at %d, before %d", at.Milliseconds(), lo)
	}
}

// A record is kept at least Life + Skew after its last write, across the sweeps of its
// bucket, and swept out by the first write past that (and Every after the last sweep);
// a rewrite restarts its life. A bucket emptied by deletes keeps its expiry.
func TestBucketsSweepOnlyExpiredRecords(t *testing.T) {
	tab := Buckets{Life: 24 * time.Hour, Every: 6 * time.Hour, Skew: time.Minute}
	tb := newTestBuckets(t, tab)
	ctx := context.Background()
	t0 := time.Now()
	tb.put(t0, testField(1), "old")
	tb.put(t0, testField(2), "rewritten")
	// A write every 5 h sweeps the bucket (its last sweep is then over Every old at
	// times), up to just before the old record's life ends.
	at := t0
	for i := 3; at.Before(t0.Add(tab.Life)); i++ {
		at = at.Add(5 * time.Hour)
		tb.put(at, testField(i), "filler")
	}
	if v, ok := tb.get(t0.Add(tab.Life+tab.Skew), testField(1)); !ok || v != "old" {
		t.Fatalf("Life + Skew later: %q %v, want the record", v, ok)
	}
	tb.put(t0.Add(tab.Life), testField(2), "rewritten") // its life starts again
	late := t0.Add(tab.Life + tab.Skew + tab.Every + 3*time.Minute)
	tb.put(late, testField(100), "new")
	if _, ok := tb.get(late, testField(1)); ok {
		t.Error("a record past Life + Skew survived a sweep")
	}
	if v, ok := tb.get(late, testField(2)); !ok || v != "rewritten" {
		t.Errorf("a rewritten record was swept by its first write's time: %q %v", v, ok)
	}
	for _, f := range []string{testField(2), testField(100)} {
		tb.run("del", late, f)
	}
	for i := 3; i < 10; i++ {
		tb.run("del", late, testField(i))
	}
	key := BucketKey(tb.base, 0)
	if n := tb.rdb.HLen(ctx, key).Val(); n != 1 {
		t.Fatalf("bucket holds %d fields after deleting every record, want the sweep time only", n)
	}
	if ex, err := tb.rdb.PExpireTime(ctx, key).Result(); err != nil || ex.Milliseconds() < late.Add(tab.Life).UnixMilli() {
		t.Fatalf("emptied bucket expires at %v (%v)", ex, err)
	}
}

// A directory is read by its text, whatever the library kept from earlier calls: a
// directory written by hand (another version, an operator) moves a field to the bucket
// it names; and what the library keeps of directories it read stays within B_DIRS_MAX
// entries however many it reads.
func TestBucketsDirectoryIsReadByItsText(t *testing.T) {
	tb := newTestBuckets(t, Buckets{Life: 24 * time.Hour, Every: 6 * time.Hour, Skew: time.Minute})
	ctx := context.Background()
	now := time.Now()
	f := testField(7)
	odd := int(f[3]) % 2 // the field's bucket among two: its hash mod 2
	for i := 0; i < 3000; i++ {
		if err := tb.rdb.Set(ctx, tb.base+"d", fmt.Sprintf("0 0 %d", 100000+i), 0).Err(); err != nil {
			t.Fatal(err)
		}
		tb.get(now, f)
	}
	memo, err := bucketLibrary.Call(ctx, tb.rdb, "bucket_memo", []string{tb.base + "d"}).Int64Slice()
	if err != nil || len(memo) != 2 {
		t.Fatalf("bucket_memo: %v %v", memo, err)
	}
	if memo[0] < 1 || memo[0] > memo[1] {
		t.Fatalf("the library keeps %d directory values after reading 3,000, want 1 to %d", memo[0], memo[1])
	}
	if err := tb.rdb.Set(ctx, tb.base+"d", "1 0 0", 0).Err(); err != nil {
		t.Fatal(err)
	}
	tb.put(now, f, "moved")
	if n, _ := tb.rdb.HExists(ctx, BucketKey(tb.base, odd), f).Result(); !n {
		t.Fatalf("with the directory at level 1, the field is not in bucket %d", odd)
	}
}

// The Lua bucket functions use the package's Load, CountStep, SweepMargin and StampAhead.
func TestLuaBucketsUseTheGoConstants(t *testing.T) {
	for _, want := range []string{fmt.Sprintf("local B_LOAD = %d\n", Load), fmt.Sprintf("local B_STEP = %d\n", CountStep),
		fmt.Sprintf("local B_MARGIN = %d\n", SweepMargin.Milliseconds()), fmt.Sprintf("local B_AHEAD = %d\n", StampAhead)} {
		if !strings.Contains(LuaBuckets, want) {
			t.Errorf("LuaBuckets lacks %q", want)
		}
	}
}

// A record written with a clock ahead of the sweeping writer's (within the tolerated
// Skew: an edge completing an answer, a consumer claiming a batch) carries the next
// quarter hour's stamp across a quarter-hour boundary: the sweep keeps it, as fresh.
func TestBucketsSweepKeepsRecordsStampedAhead(t *testing.T) {
	tab := Buckets{Life: 24 * time.Hour, Every: 6 * time.Hour, Skew: time.Minute}
	tb := newTestBuckets(t, tab)
	ctx := context.Background()
	boundary := time.UnixMilli((time.Now().UnixMilli()/900000 + 4) * 900000) // a quarter hour ahead
	t0 := boundary.Add(-tab.Every - 2*time.Millisecond)
	tb.put(t0, testField(1), "first") // a new bucket, swept now
	ahead := boundary.Add(time.Millisecond)
	if err := tb.rdb.HSet(ctx, BucketKey(tb.base, 0), testField(2), stamp(ahead)+"answer").Err(); err != nil {
		t.Fatal(err)
	}
	behind := boundary.Add(-time.Millisecond) // over Every since the last sweep: sweeps
	tb.put(behind, testField(3), "third")
	if v, ok := tb.get(behind, testField(2)); !ok || v != "answer" {
		t.Fatalf("a record stamped a quarter hour ahead of the sweep's clock: %q %v, want it kept", v, ok)
	}
	if v, ok := tb.get(behind, testField(1)); !ok || v != "first" {
		t.Fatalf("the first record: %q %v", v, ok)
	}
}

// Records written and deleted again (reservations released: a denied request's, a
// failed one's) leave the table's size estimate as it was: a table whose records are
// all deleted does not split.
func TestBucketsDeletesCountOff(t *testing.T) {
	tab := Buckets{Life: 24 * time.Hour, Every: 6 * time.Hour, Skew: time.Minute}
	tb := newTestBuckets(t, tab)
	now := time.Now()
	for i := range 2000 {
		tb.put(now, testField(i), "reserved")
		tb.run("del", now, testField(i))
	}
	if level, split := tb.dir(); level != 0 || split != 0 {
		t.Fatalf("2,000 records written and deleted one after another: directory level %d split %d, want one bucket", level, split)
	}
}
