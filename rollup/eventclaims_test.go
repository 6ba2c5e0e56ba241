package rollup

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kgo"

	"svc/schema"
	"svc/schema/apitest"
)

// TestEventIndexDecides: the first claim holds; its own redelivery is held, not a copy;
// another record's copy is a copy up to a second short of the window and claims afresh
// at exactly the window (then its own copies are copies again); an earlier-accepted copy
// later in the partition is a copy; other pixels' ids are not.
func TestEventIndexDecides(t *testing.T) {
	const window = 3600
	ix := newClaimIndex(window)
	px, other := schema.UUID{1}, schema.UUID{2}
	id := schema.ClientEventID([]byte("order-1"))
	f := eventKey(px, id)
	t0 := int64(1_800_000_000)
	steps := []struct {
		name string
		f    eventField
		sec  int64
		pos  uint64
		want claimOutcome
	}{
		{"first copy", f, t0, 10 << 6, claimNew},
		{"its redelivery", f, t0, 10 << 6, claimHeld},
		{"another record's copy", f, t0 + 4, 11 << 6, claimIsCopy},
		{"same record, other index", f, t0, 10<<6 | 1, claimIsCopy},
		{"accepted earlier, later in the partition", f, t0 - 30, 12 << 6, claimIsCopy},
		{"a second short of the window", f, t0 + window - 1, 13 << 6, claimIsCopy},
		{"another pixel", eventKey(other, id), t0 + 5, 14 << 6, claimNew},
		{"exactly the window", f, t0 + window, 15 << 6, claimNew},
		{"a copy of the new claim", f, t0 + window + 1, 16 << 6, claimIsCopy},
		{"the new claim's redelivery", f, t0 + window, 15 << 6, claimHeld},
	}
	for _, s := range steps {
		if got := ix.claim(s.f, s.sec, s.pos); got != s.want {
			t.Fatalf("%s: outcome %d, want %d", s.name, got, s.want)
		}
	}
	if ix.held() != 2 {
		t.Fatalf("%d claims held, want 2 (a claim made afresh in its epoch replaces the old one)", ix.held())
	}
}

// TestEventIndexExpires: a claim is kept until the newest acceptance time seen is the
// window and the margin past it, not a second less; then it no longer makes copies, and
// its table, rebuilt as it fills, holds only live claims. A window shorter than the
// batch claims' keeps claims for batchWindow.
func TestEventIndexExpires(t *testing.T) {
	if got := newClaimIndex(3600).keep; got != int64(batchWindow/time.Second) {
		t.Fatalf("an hour's window keeps claims %d s, want batchWindow", got)
	}
	const window = 30 * 3600
	ix := newClaimIndex(window)
	f := eventKey(schema.UUID{1}, schema.ClientEventID([]byte("a")))
	t0 := int64(1_800_000_000)
	ix.claim(f, t0, 1<<6)
	margin := int64(eventIDLagMargin / time.Second)
	g := eventKey(schema.UUID{1}, schema.ClientEventID([]byte("b")))
	ix.claim(g, t0+window+margin, 2<<6)
	if _, _, ok := ix.set.get(&f); !ok {
		t.Fatal("a claim expired a second early")
	}
	ix.claim(g, t0+window+margin+1, 3<<6) // g's copy: the newest time moves on
	if _, _, ok := ix.set.get(&f); ok {
		t.Fatal("a claim kept past the window and margin")
	}
	// Fill f's table far past its first size with claims that expire as they go: it
	// stays small, holding the live claims only.
	const step = 10 // seconds between claims
	tbl := &ix.set.tables[f[0]]
	for i := range 100_000 {
		var h eventField
		h[0] = f[0]
		binary.BigEndian.PutUint64(h[1:9], uint64(i)*0x9E3779B97F4A7C15)
		ix.claim(h, t0+window+margin+2+int64(i)*step, uint64(i)<<6)
	}
	live := 0
	for k := range tbl.slots {
		if tbl.slots[k].rel() != 0 && tbl.sec(k) >= ix.set.horizon {
			live++
		}
	}
	if most := int(window+margin)/step + 2; live > most || len(tbl.slots) > 4*most*2 {
		t.Fatalf("table of %d slots, %d live claims: expired claims kept", len(tbl.slots), live)
	}
}

// TestEventIndexRebases: a table keeps its claims' times as seconds from its base, in 24
// bits; a claim accepted 2^24 seconds or more after the base rebuilds the table on a new
// base and is held with its own time, and the claims past the horizon go. A claim
// accepted before the horizon is expired on arrival and not kept.
func TestEventIndexRebases(t *testing.T) {
	const window = 3600
	ix := newClaimIndex(window)
	px := schema.UUID{1}
	f := eventKey(px, schema.ClientEventID([]byte("a")))
	t0 := int64(1_800_000_000)
	ix.claim(f, t0, 1<<6)
	var g eventField // f's table, another field
	for i := 0; g[0] != f[0] || g == f; i++ {
		g = eventKey(px, schema.ClientEventID([]byte(strconv.Itoa(i))))
	}
	t1 := t0 + 1<<24 + 10
	if got := ix.claim(g, t1, 2<<6); got != claimNew {
		t.Fatalf("a claim 2^24 s on: outcome %d", got)
	}
	if sec, pos, ok := ix.set.get(&g); !ok || int64(sec) != t1 || pos != 2<<6 {
		t.Fatalf("after the rebase: held %v at %d (pos %d), want %d (pos %d)", ok, sec, pos, t1, 2<<6)
	}
	if got := ix.claim(g, t1, 2<<6); got != claimHeld {
		t.Fatalf("its redelivery after the rebase: outcome %d, want held", got)
	}
	if _, _, ok := ix.set.get(&f); ok {
		t.Fatal("a claim 2^24 s old kept")
	}
	if ix.held() != 1 {
		t.Fatalf("%d claims held, want 1", ix.held())
	}
	if got := ix.claim(f, t0, 3<<6); got != claimNew || ix.held() != 1 {
		t.Fatalf("a claim before the horizon: outcome %d, %d held; want new, not kept", got, ix.held())
	}
}

// TestRebuildsOfAPartitionsTablesAreStaggered: a partition's tables, filled at the same
// pace by uniform fields, double over a third of their growth or more, not all at once,
// and take 19 to 41 B a claim throughout. With one size for every table (powers of two)
// the 256 tables went from 2048 to 4096 slots within 15% of the claims, most of them
// within a few percent.
func TestRebuildsOfAPartitionsTablesAreStaggered(t *testing.T) {
	ix := newClaimIndex(int64(DefaultEventIDWindow / time.Second))
	rng := rand.New(rand.NewPCG(11, 12))
	sec := int64(1_800_000_000)
	doubled := map[int]int{} // table index -> claims held when it passed 4096 slots
	for n := 1; len(doubled) < 256; n++ {
		f := randomField(rng)
		if got := ix.claim(f, sec, uint64(n)); got != claimNew {
			t.Fatalf("claim %d: outcome %d", n, got)
		}
		tbl := &ix.set.tables[f[0]]
		if _, seen := doubled[int(f[0])]; !seen && len(tbl.slots) > 4096 {
			doubled[int(f[0])] = n
		}
		if n%10_000 == 0 && n > 256*idTableMin {
			slots := 0
			for k := range ix.set.tables {
				slots += len(ix.set.tables[k].slots)
			}
			if per := float64(slots*16) / float64(n); per > 41 || per < 19 {
				t.Fatalf("%.1f B a claim at %d claims, want 19 to 41", per, n)
			}
		}
	}
	first, last := math.MaxInt, 0
	for _, n := range doubled {
		first, last = min(first, n), max(last, n)
	}
	if spread := float64(last-first) / float64(last); spread < 1.0/3 {
		t.Fatalf("the tables doubled between %d and %d claims (%.1f%% of the growth), want a third or more", first, last, 100*spread)
	}
}

// TestEventLogReplays: a log written as the consumer writes it (entries, split into
// elements) replays into the same decisions; a truncated element is refused.
func TestEventLogReplays(t *testing.T) {
	const window = 48 * 3600
	rng := rand.New(rand.NewPCG(1, 2))
	a, b := newClaimIndex(window), newClaimIndex(window)
	now := int64(1_800_000_000)
	logs := map[int64][]byte{}
	var fields []eventField
	for i := range 120_000 {
		f := randomField(rng)
		sec := now + int64(i/1000)
		pos := uint64(i)<<6 | uint64(i%50)
		if a.claim(f, sec, pos) == claimNew {
			e := sec / a.span
			logs[e] = appendLogEntry(logs[e], f, sec-e*a.span, pos)
		}
		fields = append(fields, f)
	}
	for e, blob := range logs {
		chunks := logChunks(blob)
		if len(blob) > eventLogChunk && len(chunks) < 2 {
			t.Fatalf("a %d-byte log not split", len(blob))
		}
		for _, c := range chunks {
			if err := b.replay(e, c, math.MaxInt64); err != nil {
				t.Fatal(err)
			}
		}
	}
	if a.held() != b.held() {
		t.Fatalf("replayed %d claims, want %d", b.held(), a.held())
	}
	for i, f := range fields[:1000] {
		if got := b.claim(f, now+100, uint64(1<<40)); got != claimIsCopy {
			t.Fatalf("field %d after replay: outcome %d, want a copy", i, got)
		}
	}
	if err := b.replay(0, []byte{1, 2, 3}, math.MaxInt64); err == nil {
		t.Fatal("a truncated entry replayed")
	}
}

// claimAndLog decides the held records' client event ids and logs the new claims, as a
// poll's handling and the next flush do.
func claimAndLog(ctx context.Context, c *consumer) error {
	if err := c.claimEvents(ctx); err != nil {
		return err
	}
	return c.writeEventLogs(ctx)
}

// claimConsumer is a consumer with just what claimEvents needs: Redis, database db.
func claimConsumer(rdb redis.UniversalClient, db string, window time.Duration) *consumer {
	cfg := Config{Redis: rdb, Topic: schema.TopicEvents}
	cfg.ClickHouse.Database = db
	return &consumer{cfg: cfg, events: newEventClaims(window), eventDup: map[recordPos]uint64{},
		claims: map[recordPos]bool{}, handled: map[int32]int64{}, sync: claimSync{unsynced: map[string]bool{}}}
}

// idRecords makes n records of 50 events, each a fresh client event id of one pixel,
// accepted at received, on partition p from offset 0.
func idRecords(n int, p int32, received time.Time, rng *rand.Rand) []*kgo.Record {
	var px schema.UUID
	px[0], px[1] = 0x50, byte(p)
	out := make([]*kgo.Record, n)
	for i := range out {
		b := &schema.Batch{ReceivedAt: received.UnixMilli(), RequestID: "req_footprint", Pixel: px}
		for range 50 {
			b.Events = append(b.Events, schema.Event{ID: schema.ClientEventID(strconv.AppendUint(nil, rng.Uint64(), 16)),
				Name: "purchase", OccurredAt: received.Add(-time.Minute).UnixMilli(), Consent: true})
		}
		out[i] = record(b, p)
		out[i].Offset = int64(i)
	}
	return out
}

// TestEventClaimFootprint measures a claim on a client event id: the consumer's time
// and heap a claim (the index of the partitions it owns), and Redis's memory a claim
// (MEMORY USAGE of the logs), over SVC_EVENT_CLAIM_N claims (200,000) of one partition;
// then that a consumer reading the logs back decides the same copies. The figures are
// in deploy/README.md:
//
//	SVC_EVENT_CLAIM_N=1000000 go test -count=1 -run TestEventClaimFootprint -v ./rollup/
func TestEventClaimFootprint(t *testing.T) {
	n := 200_000
	if v, err := strconv.Atoi(os.Getenv("SVC_EVENT_CLAIM_N")); err == nil && v > 0 {
		n = v
	}
	rdb := apitest.Redis(t)
	ctx := context.Background()
	db := fmt.Sprintf("footprint_%d", time.Now().UnixNano())
	defer DropEventClaims(ctx, rdb, db)
	rs := idRecords(n/50, 0, time.Now(), rand.New(rand.NewPCG(7, uint64(time.Now().UnixNano()))))
	c := claimConsumer(rdb, db, DefaultEventIDWindow)
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	tables0 := claimTableBytes.Load()
	u0 := redisUsec(t, rdb)
	start := time.Now()
	for i := 0; i < len(rs); i += 200 { // polls of 200 records
		c.held = rs[i:min(i+200, len(rs))]
		if err := claimAndLog(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	took := time.Since(start)
	u1 := redisUsec(t, rdb)
	runtime.GC()
	runtime.ReadMemStats(&m1)
	claims := c.events.held()
	if claims != len(rs)*50 {
		t.Fatalf("%d claims held, want %d", claims, len(rs)*50)
	}
	bytes, keys := logMemory(t, rdb, db)
	tables := claimTableBytes.Load() - tables0
	t.Logf("%d claims: consumer %.0f ns a claim (with the Redis round trips), %.1f B of tables a claim (mapped outside the heap from 16 KiB a table) and %.1f B of heap; Redis %.3f µs and %.1f B a claim (%d keys)",
		claims, float64(took.Nanoseconds())/float64(claims), float64(tables)/float64(claims), float64(int64(m1.HeapAlloc)-int64(m0.HeapAlloc))/float64(claims),
		float64(u1-u0)/float64(claims), float64(bytes)/float64(claims), keys)
	if per := float64(tables) / float64(claims); per < 19 || per > 41 {
		t.Fatalf("%.1f B of tables a claim; the capacity model (deploy/README.md) counts 20 to 40", per)
	}
	if per := float64(bytes) / float64(claims); per > 24 {
		t.Fatalf("Redis %.1f B a claim; the capacity model (deploy/README.md) counts 19 to 21", per)
	}

	// A new owner reads the logs: every event of the same records is its own claim, a
	// copy in a new record (offsets past them) is a copy.
	d := claimConsumer(rdb, db, DefaultEventIDWindow)
	start = time.Now()
	if _, err := d.claimIndexOf(ctx, 0); err != nil {
		t.Fatal(err)
	}
	t.Logf("a new owner read the %d claims back in %v", d.events.held(), time.Since(start).Round(time.Millisecond))
	d.held = rs
	if err := claimAndLog(ctx, d); err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		if m := d.eventDup[recordPos{r.Partition, r.Offset}]; m != 0 {
			t.Fatalf("record %d's own events taken for copies after the logs were read: %b", r.Offset, m)
		}
	}
	again := idRecords(1, 0, time.Now(), rand.New(rand.NewPCG(7, 0)))
	copyOf := *rs[len(rs)/2]
	copyOf.Offset = int64(len(rs)) + 1
	d.held = append(again, &copyOf)
	if err := claimAndLog(ctx, d); err != nil {
		t.Fatal(err)
	}
	if m := d.eventDup[recordPos{0, copyOf.Offset}]; m != 1<<50-1 {
		t.Fatalf("a copy of a stored record after the logs were read: copies %b, want all 50", m)
	}
}

// BenchmarkClaimEvents is the consumer's cost a client event id claimed (Redis's append
// included): polls of 200 records of 50 fresh ids. ns/op is per claim.
func BenchmarkClaimEvents(b *testing.B) {
	rdb := apitest.Redis(b)
	ctx := context.Background()
	db := fmt.Sprintf("bench_claims_%d", time.Now().UnixNano())
	defer DropEventClaims(ctx, rdb, db)
	rs := idRecords(max(b.N/50, 1)+200, 0, time.Now(), rand.New(rand.NewPCG(3, 4)))
	c := claimConsumer(rdb, db, DefaultEventIDWindow)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i*50 < b.N; i += 200 {
		c.held = rs[i:min(i+200, len(rs))]
		if err := claimAndLog(ctx, c); err != nil {
			b.Fatal(err)
		}
	}
}

// logMemory sums MEMORY USAGE over every claim log of database db.
func logMemory(t testing.TB, rdb redis.UniversalClient, db string) (bytes int64, keys int) {
	t.Helper()
	ctx := context.Background()
	scan := func(ctx context.Context, c redis.Cmdable) error {
		it := c.Scan(ctx, 0, "svc:eid:{"+db+":*", 1000).Iterator()
		for it.Next(ctx) {
			n, err := c.MemoryUsage(ctx, it.Val(), 0).Result()
			if err != nil {
				return err
			}
			bytes += n
			keys++
		}
		return it.Err()
	}
	var err error
	if cl, ok := rdb.(*redis.ClusterClient); ok {
		err = cl.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error { return scan(ctx, m) })
	} else {
		err = scan(ctx, rdb)
	}
	if err != nil {
		t.Fatal(err)
	}
	return bytes, keys
}

// randomField is a field of uniform bytes, as a claim's are (a SHA-256 XOR a pixel id).
func randomField(rng *rand.Rand) (f eventField) {
	for j := range f {
		f[j] = byte(rng.Uint32())
	}
	return f
}

// BenchmarkEventIndexClaim is the index's cost a claim, in memory only: fresh fields
// into a partition's index that already holds 2 million claims in each of five epochs
// (the 48 h window's steady state: a new id misses every epoch). ns/op is per claim.
func BenchmarkEventIndexClaim(b *testing.B) {
	ix := newClaimIndex(int64(DefaultEventIDWindow / time.Second))
	rng := rand.New(rand.NewPCG(5, 6))
	field := func() eventField { return randomField(rng) }
	now := int64(1_800_000_000)
	for e := range int64(5) {
		for i := range 2_000_000 {
			ix.claim(field(), now-(5-e)*ix.span, uint64(i))
		}
	}
	fields := make([]eventField, b.N)
	for i := range fields {
		fields[i] = field()
	}
	b.ResetTimer()
	for i := 0; i < len(fields); i += 50 { // as the consumer claims a record's events
		batch := fields[i:min(i+50, len(fields))]
		ix.set.touch(batch)
		for j := range batch {
			ix.claim(batch[j], now, uint64(i+j))
		}
	}
}

// redisUsec is the time Redis spent in commands so far (INFO commandstats, summed over
// every command and, on a cluster, every master), in microseconds.
func redisUsec(t testing.TB, rdb redis.UniversalClient) int64 {
	t.Helper()
	ctx := context.Background()
	var total int64
	read := func(c redis.Cmdable) error {
		info, err := c.Info(ctx, "commandstats").Result()
		if err != nil {
			return err
		}
		for _, line := range strings.Split(info, "\n") {
			if _, rest, ok := strings.Cut(line, ",usec="); ok {
				v, _, _ := strings.Cut(rest, ",")
				n, _ := strconv.ParseInt(v, 10, 64)
				total += n
			}
		}
		return nil
	}
	var err error
	if cl, ok := rdb.(*redis.ClusterClient); ok {
		err = cl.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error { return read(m) })
	} else {
		err = read(rdb)
	}
	if err != nil {
		t.Fatal(err)
	}
	return total
}

// A new owner decides the records after the partition's stored offset again exactly as
// the first owner did, although the first owner logged their claims before it was
// killed: the log's claims of those records are not replayed. Two cases, a window of a
// minute: an event id claimed afresh by a later record a window after the first (the
// first record must stay the first copy, not become a copy of the later one); and a
// record past the window plus the lag margin (it must not expire the claim an earlier
// record's copy is dropped for).
func TestEventClaimsReplayStopsAtStoredOffset(t *testing.T) {
	rdb := apitest.Redis(t)
	ctx := context.Background()
	db := fmt.Sprintf("replay_%d", time.Now().UnixNano())
	defer DropEventClaims(ctx, rdb, db)
	window := time.Minute
	// Recent: a claim log expires the window and eventIDLagMargin after the end of its
	// 12-hour epoch, by Redis's clock. Records two hours old (as this test had them) fell,
	// between one and two hours after 00:00 and 12:00 UTC, in a log that expired as it was
	// written, and the next owner found no claims to replay. The later records may be
	// ahead of now: acceptance times are only checked for their range.
	t0 := time.Now().Add(-time.Minute).Truncate(time.Second)
	var px schema.UUID
	px[0] = 0x51
	mk := func(off int64, at time.Time, id string) *kgo.Record {
		b := &schema.Batch{ReceivedAt: at.UnixMilli(), RequestID: "req_replay", Pixel: px,
			Events: []schema.Event{{ID: schema.ClientEventID([]byte(id)), Name: "purchase", OccurredAt: at.Add(-time.Minute).UnixMilli(), Consent: true}}}
		r := record(b, 0)
		r.Offset = off
		return r
	}
	decide := func(c *consumer, rs ...*kgo.Record) []uint64 {
		t.Helper()
		c.held = rs
		if err := claimAndLog(ctx, c); err != nil {
			t.Fatal(err)
		}
		out := make([]uint64, len(rs))
		for i, r := range rs {
			out[i] = c.eventDup[recordPos{r.Partition, r.Offset}]
		}
		return out
	}
	for _, tc := range []struct {
		name   string
		stored int64 // the partition's stored offset when the first owner was killed
		rs     []*kgo.Record
		want   []uint64
	}{
		{"a later claim afresh", 9, []*kgo.Record{mk(10, t0, "order-1"), mk(11, t0.Add(window), "order-1")}, []uint64{0, 0}},
		{"a later record past the margin", 20, []*kgo.Record{mk(20, t0, "order-2"), mk(21, t0.Add(30*time.Second), "order-2"),
			mk(22, t0.Add(window+eventIDLagMargin+10*time.Second), "order-3")}, []uint64{0, 1, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			first := claimConsumer(rdb, db, window)
			if got := decide(first, tc.rs...); !slices.Equal(got, tc.want) {
				t.Fatalf("the first owner decided %v, want %v", got, tc.want)
			}
			next := claimConsumer(rdb, db, window)
			next.stored = map[int32]int64{0: tc.stored}
			again := tc.rs
			for len(again) > 0 && again[0].Offset <= tc.stored {
				again = again[1:]
			}
			if got, want := decide(next, again...), tc.want[len(tc.rs)-len(again):]; !slices.Equal(got, want) {
				t.Fatalf("the next owner decided %v for the records after the stored offset %d, want %v as the first owner", got, tc.stored, want)
			}
		})
	}
}
