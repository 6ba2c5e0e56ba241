package e2e

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	json "github.com/goccy/go-json"
	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"svc/lib/svctest"
	"svc/schema"
)

// TestEventIDDeduplicatesThroughThePipeline: the cases, HTTP in, GET
// /pixel-rollups and the raw table out, through svc dev with an 8 s event-id window.
//  1. The same event (event_id order-1, value 10) in two batches with two
//     Idempotency-Keys: both 202, stored once.
//  2. One event_id twice inside one batch: the 202 refuses the second copy (rule
//     duplicate_event_id, duplicates 1), stored once.
//  3. order-1 re-sent 4 s later with value 99: dropped; the value stays 10.
//  4. The window's edge: order-1 accepted 9 s after the stored copy (past the 8 s window)
//     is stored, and counts again.
//
// Every copy is listed by GET /rejections (rule duplicate_event_id).
func TestEventIDDeduplicatesThroughThePipeline(t *testing.T) {
	in := newInstance(t)
	in.env = append(in.env, "SVC_ROLLUP_BATCH_INTERVAL=200ms", "SVC_EVENT_ID_WINDOW=8s")
	db := in.getenv("SVC_CLICKHOUSE_DB")
	in.run("migrate")
	ws := field(t, in.run("admin", "workspace", "create", "--name", "EventIDs"), "id")
	pxOut := in.run("admin", "pixel", "create", "--workspace", ws)
	px := field(t, pxOut, "id")
	secret := field(t, in.run("admin", "key", "create", "--workspace", ws, "--env", "live", "--scopes", "events:write,pixels:read", "--burst", "1000"), "secret")
	in.start()

	at := time.Now().UTC().Add(-10 * time.Minute).Format(time.RFC3339)
	ev := func(id string, value int) string {
		return fmt.Sprintf(`{"event_id":%q,"event_name":"purchase","occurred_at":%q,"value":%d,"currency":"EUR","consent":{"measurement":true}}`, id, at, value)
	}
	post := func(key string, want string, evs ...string) {
		t.Helper()
		body := fmt.Sprintf(`{"pixel_id":%q,"events":[%s]}`, px, strings.Join(evs, ","))
		st, b := in.post(secret, "/v1/events", body, "Idempotency-Key", key)
		if st != 202 || !strings.HasPrefix(string(b), want) {
			t.Fatalf("POST /v1/events (%s): %d %s, want 202 starting %s", key, st, b, want)
		}
	}
	order1 := schema.ClientEventID([]byte("order-1"))
	// check waits until the marker batch is stored (so every batch before it has been
	// read: one pixel's batches are read in order), then compares the rollups and the
	// raw table with what should be stored.
	check := func(marker string, events int, value string, order1Rows int) {
		t.Helper()
		q := fmt.Sprintf("SELECT count(), countIf(event_id = toUUID('%s')), countIf(event_id = toUUID('%s')) FROM %s.events",
			uuid.UUID(order1), uuid.UUID(schema.ClientEventID([]byte(marker))), db)
		var raw string
		svctest.WaitFor(t, 30*time.Second, marker+" stored", func() bool {
			var err error
			raw, err = in.chQuery(q)
			return err == nil && strings.HasSuffix(raw, "\t1")
		})
		if want := fmt.Sprintf("%d\t%d\t1", events, order1Rows); raw != want {
			t.Fatalf("events table (rows, rows of order-1, of %s): %q, want %q", marker, raw, want)
		}
		var n int
		var v string
		svctest.WaitFor(t, 10*time.Second, "the rollups", func() bool {
			n, v = rollupTotals(t, in, secret, px)
			return n == events
		})
		if n != events || v != value {
			t.Fatalf("GET /pixel-rollups: events %d, value %s; want %d, %s", n, v, events, value)
		}
	}

	t1 := time.Now()
	post("k1", `{"accepted":1,"rejected":0,"duplicates":0,`, ev("order-1", 10))
	post("k2", `{"accepted":1,"rejected":0,"duplicates":0,`, ev("order-1", 10)) // another batch: the 202 cannot know
	post("k3", `{"accepted":1,"rejected":1,"duplicates":1,"rejections":[{"index":1,"field":"event_id","rule":"duplicate_event_id","value":"order-2"}]`,
		ev("order-2", 3), ev("order-2", 3))
	time.Sleep(time.Until(t1.Add(4 * time.Second)))
	post("k4", `{"accepted":1,`, ev("order-1", 99))
	post("k5", `{"accepted":1,`, ev("marker-1", 1))
	check("marker-1", 3, "14.0000", 1)

	time.Sleep(time.Until(t1.Add(9500 * time.Millisecond))) // past the 8 s window of the stored order-1
	post("k6", `{"accepted":1,`, ev("order-1", 5))
	post("k7", `{"accepted":1,`, ev("marker-2", 1))
	check("marker-2", 5, "20.0000", 2)

	// The copies are kept as rejections: the one inside a batch by the edge (its value
	// the client's event_id), the two across batches by the consumer (the id it maps to).
	var got []string
	svctest.WaitFor(t, 30*time.Second, "three duplicate_event_id rejections", func() bool {
		st, b := in.get(secret, "/v1/rejections?pixel_id="+px+"&rule=duplicate_event_id")
		if st != 200 {
			t.Fatalf("GET /v1/rejections: %d %s", st, b)
		}
		var page struct {
			Data []struct {
				Status int             `json:"status"`
				Field  string          `json:"field"`
				Value  json.RawMessage `json:"value"`
			} `json:"data"`
		}
		if err := json.Unmarshal(b, &page); err != nil {
			t.Fatal(err)
		}
		got = got[:0]
		for _, r := range page.Data {
			got = append(got, fmt.Sprintf("%d %s %s", r.Status, r.Field, r.Value))
		}
		sort.Strings(got)
		return len(got) >= 3
	})
	o1 := fmt.Sprintf("202 event_id %q", uuid.UUID(order1).String())
	if want := []string{o1, o1, `202 event_id "order-2"`}; strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("GET /rejections?rule=duplicate_event_id: %q, want %q", got, want)
	}
}

// rollupTotals sums events and value over every row of GET /v1/pixel-rollups for px.
func rollupTotals(t *testing.T, in *instance, secret, px string) (int, string) {
	t.Helper()
	st, b := in.get(secret, "/v1/pixel-rollups?pixel_id="+px)
	if st != 200 {
		t.Fatalf("GET /v1/pixel-rollups: %d %s", st, b)
	}
	var page struct {
		Data []struct {
			Events int    `json:"events"`
			Value  string `json:"value"`
		} `json:"data"`
	}
	if err := json.Unmarshal(b, &page); err != nil {
		t.Fatal(err)
	}
	n, v := 0, 0.0
	for _, r := range page.Data {
		f, _ := strconv.ParseFloat(r.Value, 64)
		n, v = n+r.Events, v+f
	}
	return n, fmt.Sprintf("%.4f", v)
}

// TestEventIDCopiesSurviveARedisFailover (make test-scale: a Redis Cluster): the
// scale-out load, whose batches repeat event ids in later batches and on two edges at
// once, runs through two edges and two consumers while the Redis master holding a
// partition's event-id claim log is killed and its replica promoted, then restarted. The
// consumers handle no record before a replica holds its claims, so no claim a stored
// event relied on is forgotten: every event_id is stored once.
func TestEventIDCopiesSurviveARedisFailover(t *testing.T) {
	seeds := os.Getenv("SVC_REDIS_CLUSTER")
	if seeds == "" {
		t.Skip("needs SVC_REDIS_CLUSTER from deploy/local/redis-cluster.sh (make test-scale)")
	}
	in := newInstance(t)
	db := in.getenv("SVC_CLICKHOUSE_DB")
	if c := os.Getenv("SVC_CLICKHOUSE_CLUSTER"); c != "" {
		t.Cleanup(func() { in.chQuery("DROP DATABASE IF EXISTS " + db + " ON CLUSTER " + c) })
	}
	brokerAddr := in.getenv("SVC_EMBEDDED_KAFKA_ADDR")
	in.env = append(in.env, "SVC_KAFKA_PARTITIONS=4", "SVC_ROLLUP_BATCH_INTERVAL=200ms", "SVC_IDEMPOTENCY_PENDING_TTL=3s")
	in.spawn(t, "broker")
	in.run("migrate")
	s := &scaleSetup{in: in}
	s.provision(t, 8)
	kafka := "SVC_KAFKA_BROKERS=" + brokerAddr
	s.edges = []*proc{in.spawn(t, "ingest", kafka), in.spawn(t, "ingest", kafka)}
	s.consumers = []*proc{in.spawn(t, "rollup", kafka), in.spawn(t, "rollup", kafka)}
	for _, p := range append(s.edges, s.consumers...) {
		p.WaitReady(t, 60*time.Second)
	}
	l := s.startLoad(t, 4)
	time.Sleep(3 * time.Second)
	master := redisMasterOf(t, strings.Split(seeds, ","), someKey(t, strings.Split(seeds, ","), "svc:eid:{"+db+":*"))
	script(t, "deploy/local/redis-cluster.sh", "kill", port(master))
	killed := l.since()
	time.Sleep(time.Second)
	if !l.waitResumed(200, 30*time.Second) {
		t.Fatalf("no 202 for 30 s after the Redis master %s was killed", master)
	}
	time.Sleep(2 * time.Second)
	script(t, "deploy/local/redis-cluster.sh", "up")
	time.Sleep(2 * time.Second)
	l.finish()
	if t.Failed() {
		return
	}
	t.Logf("Redis master %s killed at %.1fs; accepted %d events, %d of them copies of an event_id", master, killed,
		l.accepted.Load(), l.copies.Load())
	in.waitExact(t, l.stored(), 120*time.Second, func() string {
		return "consumer logs:\n" + s.consumers[0].Output() + "\n" + s.consumers[1].Output()
	})
}

// someKey returns a key matching pattern on the Redis Cluster of seeds.
func someKey(t *testing.T, seeds []string, pattern string) string {
	t.Helper()
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: seeds})
	defer rdb.Close()
	ctx := context.Background()
	var mu sync.Mutex
	found := ""
	err := rdb.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		it := m.Scan(ctx, 0, pattern, 1000).Iterator()
		if it.Next(ctx) {
			mu.Lock()
			found = it.Val()
			mu.Unlock()
		}
		return it.Err()
	})
	if err != nil || found == "" {
		t.Fatalf("no key %s on the cluster (%v)", pattern, err)
	}
	return found
}
