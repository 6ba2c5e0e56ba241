package rollup

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"svc/lib/idempotency"
	"svc/schema"
	"svc/schema/apitest"
)

// claimAt runs claim_events for one packed claim list of group g at now.
func claimAt(t testing.TB, rdb redis.Cmdable, db string, window time.Duration, now time.Time, keys []string, packed [][]byte) []string {
	t.Helper()
	targs := eventClaimTable(window).Args()
	args := make([][]any, len(keys))
	for i := range keys {
		args[i] = []any{now.UnixMilli(), targs[0], targs[1], targs[2], int64(window / time.Second), packed[i]}
	}
	cmds, err := eventClaimLibrary.Pipelined(context.Background(), rdb, "claim_events", keys, args)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]string, len(cmds))
	for i, c := range cmds {
		out[i] = c.Val().(string)
	}
	return out
}

// randomClaims makes n claims of random (pixel, event id) pairs, grouped and packed as
// the consumer sends them (claimChunk per call), accepted at received.
func randomClaims(db string, n int, received time.Time, rng *rand.Rand) (keys []string, packed [][]byte) {
	var groups [256][]byte
	var counts [256]int
	for i := range n {
		var px, id schema.UUID
		for j := range px {
			px[j], id[j] = byte(rng.Uint32()), byte(rng.Uint32())
		}
		f, g := eventKey(px, id)
		groups[g] = appendEventClaim(groups[g], f, received.UnixMilli(), 0, int64(i), 0)
		counts[g]++
		if counts[g] == claimChunk {
			keys, packed = append(keys, eventClaimDir(db, schema.TopicEvents, byte(g))), append(packed, groups[g])
			groups[g], counts[g] = nil, 0
		}
	}
	for g := range groups {
		if counts[g] > 0 {
			keys, packed = append(keys, eventClaimDir(db, schema.TopicEvents, byte(g))), append(packed, groups[g])
		}
	}
	return keys, packed
}

// fcallStats returns Redis's count of FCALLs and the microseconds it spent in them
// (INFO commandstats; summed over a cluster's masters).
func fcallStats(t testing.TB, rdb redis.UniversalClient) (calls, usec int64) {
	t.Helper()
	read := func(info string) {
		for _, line := range strings.Split(info, "\n") {
			if !strings.HasPrefix(line, "cmdstat_fcall:") {
				continue
			}
			for _, kv := range strings.Split(strings.TrimSpace(strings.TrimPrefix(line, "cmdstat_fcall:")), ",") {
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
	ctx := context.Background()
	if cl, ok := rdb.(*redis.ClusterClient); ok {
		err := cl.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
			info, err := m.Info(ctx, "commandstats").Result()
			read(info)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return calls, usec
	}
	info, err := rdb.Info(ctx, "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	read(info)
	return calls, usec
}

// tableMemory sums MEMORY USAGE over every key of db's event-claim tables.
func tableMemory(t testing.TB, rdb redis.UniversalClient, db string) (bytes int64, keys int) {
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

// dropTables removes db's event-claim tables.
func dropTables(rdb redis.UniversalClient, db string) {
	ctx := context.Background()
	for g := range 256 {
		base := strings.TrimSuffix(eventClaimDir(db, schema.TopicEvents, byte(g)), "m")
		_, _ = idempotency.Drop(ctx, rdb, base)
	}
}

// TestEventClaimFootprint measures what a claim on a client event id costs Redis, in
// the steady state of the default 48 h window: SVC_EVENT_CLAIM_N claims (200,000) made
// evenly over the claims' 49 h life (so every epoch a lookup reads exists), then their
// memory (MEMORY USAGE of every key of the tables, divided by the claims) and the time
// Redis spent per claim (INFO commandstats) on 20,000 new events (each a miss that
// reads every epoch) and 20,000 copies. The figures are in deploy/README.md:
//
//	SVC_EVENT_CLAIM_N=1000000 go test -count=1 -run TestEventClaimFootprint -v ./rollup/
func TestEventClaimFootprint(t *testing.T) {
	n := 200_000
	if v, err := strconv.Atoi(os.Getenv("SVC_EVENT_CLAIM_N")); err == nil && v > 0 {
		n = v
	}
	rdb := apitest.Redis(t)
	db := fmt.Sprintf("footprint_%d", time.Now().UnixNano())
	defer dropTables(rdb, db)
	window := DefaultEventIDWindow
	life := eventClaimTable(window).Life
	rng := rand.New(rand.NewPCG(7, uint64(time.Now().UnixNano())))
	end := time.Now()
	const steps = 49
	for s := range steps {
		at := end.Add(-life + time.Duration(s)*life/steps)
		keys, packed := randomClaims(db, n/steps, at, rng)
		c0, u0 := fcallStats(t, rdb)
		for _, res := range claimAt(t, rdb, db, window, at, keys, packed) {
			if strings.Contains(res, "1") {
				t.Fatalf("a random event taken for a copy: %q", res)
			}
		}
		if s == 0 {
			c1, u1 := fcallStats(t, rdb)
			t.Logf("Redis time a claim into empty tables: %.2f µs (%d calls)", float64(u1-u0)/float64(n/steps), c1-c0)
		}
	}
	bytes, nkeys := tableMemory(t, rdb, db)
	per := float64(bytes) / float64(n/steps*steps)
	t.Logf("%d claims over %v: %d keys, %d bytes: %.1f B a claim", n/steps*steps, life, nkeys, bytes, per)

	const m = 20_000
	keys, packed := randomClaims(db, m, end, rng)
	c0, u0 := fcallStats(t, rdb)
	res := claimAt(t, rdb, db, window, end, keys, packed)
	c1, u1 := fcallStats(t, rdb)
	again := claimAt(t, rdb, db, window, end.Add(time.Second), keys, copyValues(packed))
	c2, u2 := fcallStats(t, rdb)
	if strings.Contains(strings.Join(res, ""), "1") || strings.Contains(strings.Join(again, ""), "0") {
		t.Fatal("new events not all claimed, or their copies not all refused")
	}
	t.Logf("Redis time a claim: %.2f µs for a new event (%d calls), %.2f µs for a copy (%d calls)",
		float64(u1-u0)/m, c1-c0, float64(u2-u1)/m, c2-c1)
	if per > 32 {
		t.Fatalf("%.1f B a claim; the capacity model (deploy/README.md) counts 24 to 28", per)
	}
}

// copyValues returns packed claims as another record's (offset + 1, accepted a second
// later): copies of the same events.
func copyValues(packed [][]byte) [][]byte {
	out := make([][]byte, len(packed))
	for i, p := range packed {
		var q []byte
		for pos := 0; pos < len(p); {
			vl := int(p[pos+10])
			var f [10]byte
			copy(f[:], p[pos:pos+10])
			sec := int64(p[pos+11])<<24 | int64(p[pos+12])<<16 | int64(p[pos+13])<<8 | int64(p[pos+14])
			q = appendEventClaim(q, f, (sec+1)*1000, 1, int64(pos), 1)
			pos += 11 + vl
		}
		out[i] = q
	}
	return out
}

// TestForgetAndDropEventClaims: ForgetEventClaims drops exactly the claims named (a copy
// of a forgotten event is claimed afresh, one of a kept event is still a copy), and
// DropEmptyEventClaimTables removes only the tables left with no claim: once every
// claim is forgotten, no key of the database's tables is left.
func TestForgetAndDropEventClaims(t *testing.T) {
	rdb := apitest.Redis(t)
	ctx := context.Background()
	db := fmt.Sprintf("forget_%d", time.Now().UnixNano())
	defer DropEventClaims(ctx, rdb, db)
	window := DefaultEventIDWindow
	now := time.Now()
	var pixels [2]schema.UUID
	pixels[0][0], pixels[1][0] = 1, 2
	ids := make([]schema.UUID, 300)
	for i := range ids {
		ids[i] = schema.ClientEventID([]byte(fmt.Sprintf("forget-%d", i)))
	}
	// claim makes (or re-checks) the claims of px's ids for record offset o, and returns
	// how many were copies.
	claim := func(px schema.UUID, o int64) int {
		var groups [256][]byte
		for i, id := range ids {
			f, g := eventKey(px, id)
			groups[g] = appendEventClaim(groups[g], f, now.UnixMilli(), 0, o, uint8(i%64))
		}
		var keys []string
		var packed [][]byte
		for g, p := range groups {
			if len(p) > 0 {
				keys, packed = append(keys, eventClaimDir(db, schema.TopicEvents, byte(g))), append(packed, p)
			}
		}
		return strings.Count(strings.Join(claimAt(t, rdb, db, window, now, keys, packed), ""), "1")
	}
	if n := claim(pixels[0], 1) + claim(pixels[1], 2); n != 0 {
		t.Fatalf("%d fresh events taken for copies", n)
	}
	if err := ForgetEventClaims(ctx, rdb, db, schema.TopicEvents, window, pixels[0], ids); err != nil {
		t.Fatal(err)
	}
	dropped, err := DropEmptyEventClaimTables(ctx, rdb, db, schema.TopicEvents)
	if err != nil {
		t.Fatal(err)
	}
	if n := claim(pixels[1], 3); n != len(ids) {
		t.Fatalf("after forgetting another pixel's claims (and dropping %d tables), %d of %d copies found", dropped, n, len(ids))
	}
	if n := claim(pixels[0], 4); n != 0 {
		t.Fatalf("%d forgotten events still taken for copies", n)
	}
	for _, px := range pixels {
		if err := ForgetEventClaims(ctx, rdb, db, schema.TopicEvents, window, px, ids); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := DropEmptyEventClaimTables(ctx, rdb, db, schema.TopicEvents); err != nil {
		t.Fatal(err)
	}
	if _, keys := tableMemory(t, rdb, db); keys != 0 {
		t.Fatalf("%d keys left once every claim was forgotten and the empty tables dropped", keys)
	}
}
