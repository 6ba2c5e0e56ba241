package httpserver_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"svc/lib/apikey"
	"svc/lib/httpserver"
	"svc/lib/idempotency"
	"svc/lib/limits"
	"svc/lib/process"
	"svc/schema/apitest"
	"svc/schema/workspace"
)

func TestSlotMatchesRedis(t *testing.T) {
	// Values from CLUSTER KEYSLOT on Redis 7.0.
	for key, want := range map[string]int{"foo": 12182, "{user1000}.following": 3443, "{user1000}.followers": 3443,
		"foo{}{bar}": 8363, "foo{{bar}}zap": 4015, "foo{bar}{zap}": 5061} {
		if got := apitest.Slot(key); got != want {
			t.Errorf("Slot(%q) = %d, want %d", key, got, want)
		}
	}
}

// TestGateKeysShareASlot: a take touches a key's rate-limit state (and the two keys of
// the format before); in a Redis Cluster they must hash to one slot, while keys of
// different API keys spread over the slot range (and so over every master). One key's
// idempotency records do not share that slot: they spread over the range too.
func TestGateKeysShareASlot(t *testing.T) {
	thirds, records := map[int]int{}, map[int]int{}
	id := uuid.NewString()
	for i := 0; i < 300; i++ {
		ks := limits.Keys(uuid.NewString())
		slot := apitest.Slot(ks[0])
		for _, k := range ks[1:] {
			if apitest.Slot(k) != slot {
				t.Fatalf("%q (slot %d) and %q (slot %d) are in different hash slots", ks[0], slot, k, apitest.Slot(k))
			}
		}
		thirds[slot*3/16384]++
		records[apitest.Slot(idempotency.GroupBase(idempotency.Group(id, strconv.Itoa(i))))*3/16384]++
	}
	for third := 0; third < 3; third++ {
		if thirds[third] < 50 {
			t.Errorf("API keys do not spread over the slots: %v per third of the range", thirds)
		}
		if records[third] < 50 {
			t.Errorf("one API key's records do not spread over the slots: %v per third of the range", records)
		}
	}
}

// clusterOnly skips unless SVC_REDIS_CLUSTER names a cluster (make test-scale sets it).
func clusterOnly(t *testing.T) redis.UniversalClient {
	t.Helper()
	if os.Getenv("SVC_REDIS_CLUSTER") == "" {
		t.Skip("SVC_REDIS_CLUSTER is not set (make test-scale runs this against a local cluster)")
	}
	rdb := apitest.Redis(t)
	if _, ok := rdb.(*redis.ClusterClient); !ok {
		t.Fatalf("SVC_REDIS_CLUSTER is set but the client is a %T", rdb)
	}
	return rdb
}

// TestClusterSpreadsKeysOverMasters: requests of different API keys, each with an
// Idempotency-Key, through the auto-pipelined gate of a server on a Redis Cluster. Every
// request is answered (no CROSSSLOT), a repeat is replayed, and the keys' windows land
// on every master.
func TestClusterSpreadsKeysOverMasters(t *testing.T) {
	rdb := clusterOnly(t)
	s := apitest.Start(t, testRoutes(), func(c *httpserver.Config) { c.RedisAutoPipeline = true })
	const tenants = 24
	var wg sync.WaitGroup
	ids := make([]string, tenants)
	errs := make(chan string, 2*tenants)
	for i := 0; i < tenants; i++ {
		tn := s.Tenant(t, false)
		ids[i] = tn.Key.ID.String()
		wg.Add(1)
		go func() {
			defer wg.Done()
			first := s.Do(t, "POST", "/things", tn.Secret, `{"name":"a"}`, "Idempotency-Key", "k")
			again := s.Do(t, "POST", "/things", tn.Secret, `{"name":"a"}`, "Idempotency-Key", "k")
			if first.Status != 201 || again.Header.Get("Idempotent-Replayed") != "true" || string(again.Body) != string(first.Body) {
				errs <- fmt.Sprintf("first %d %s, again %d %s", first.Status, first.Body, again.Status, again.Body)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	var mu sync.Mutex
	perMaster := map[string]int{}
	err := process.EachMaster(context.Background(), rdb, func(ctx context.Context, node *redis.Client) error {
		n := 0
		for _, id := range ids {
			found, err := node.Exists(ctx, limits.Keys(id)[0]).Result()
			if err != nil && !strings.Contains(err.Error(), "MOVED") {
				return err
			}
			if found == 1 {
				n++
			}
		}
		mu.Lock()
		perMaster[node.Options().Addr] = n
		mu.Unlock()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for addr, n := range perMaster {
		if n == 0 {
			t.Errorf("master %s holds no API key's windows: %v", addr, perMaster)
		}
		total += n
	}
	if total != tenants {
		t.Errorf("%d of %d keys' windows found: %v", total, tenants, perMaster)
	}
	t.Logf("API keys per master: %v", perMaster)
}

// TestOneKeysRecordsSpreadOverMasters: one API key's requests, each with an
// Idempotency-Key of its own, through a server on a Redis Cluster: every request is
// answered and its repeat replayed, and the key's idempotency records land on every
// master (each record on the master of its group's slot), so the busiest key is not held
// to one Redis core, while its windows (one slot) counted every request exactly.
func TestOneKeysRecordsSpreadOverMasters(t *testing.T) {
	rdb := clusterOnly(t).(*redis.ClusterClient)
	ctx := context.Background()
	s := apitest.Start(t, testRoutes(), func(c *httpserver.Config) { c.RedisAutoPipeline = true })
	w := s.Workspace(t, false)
	k, secret := s.Key(t, workspace.KeySpec{WorkspaceID: w.ID, Env: apikey.Live, Scopes: []string{"plans:read"}, Burst: 1000, Daily: 10000})
	kid := k.ID.String()
	const n = 60
	keys := make([]string, n)
	for i := range keys {
		keys[i] = "spread-" + strconv.Itoa(i)
	}
	t.Cleanup(func() { _ = idempotency.New(rdb).Forget(ctx, kid, keys...) })
	perMaster := map[string]int{}
	for i, key := range keys {
		first := s.Do(t, "POST", "/things", secret, `{"name":"a"}`, "Idempotency-Key", key)
		again := s.Do(t, "POST", "/things", secret, `{"name":"a"}`, "Idempotency-Key", key)
		if first.Status != 201 || again.Header.Get("Idempotent-Replayed") != "true" || string(again.Body) != string(first.Body) {
			t.Fatalf("request %d: first %d %s, again %d %s", i, first.Status, first.Body, again.Status, again.Body)
		}
		dir := idempotency.GroupBase(idempotency.Group(kid, key)) + "d"
		node, err := rdb.MasterForKey(ctx, dir)
		if err != nil {
			t.Fatal(err)
		}
		if found, err := node.Exists(ctx, dir).Result(); err != nil || found != 1 {
			t.Fatalf("record %d: its group's directory is not on the master of its slot (%v)", i, err)
		}
		if st, err := idempotency.New(rdb).Peek(ctx, kid, key); err != nil || st != idempotency.Done {
			t.Fatalf("record %d: state %v (%v), want done", i, st, err)
		}
		perMaster[node.Options().Addr]++
	}
	masters := 0
	_ = rdb.ForEachMaster(ctx, func(context.Context, *redis.Client) error { masters++; return nil })
	if len(perMaster) != masters {
		t.Errorf("one key's %d records are on %d of %d masters: %v", n, len(perMaster), masters, perMaster)
	}
	// The daily window (10,000 a day, draining one request per 8.64 s) spent every
	// request once: 2n and this one.
	last := s.Do(t, "GET", "/things", secret, "")
	var daily int
	if _, err := fmt.Sscanf(last.Header.Get("RateLimit")[strings.Index(last.Header.Get("RateLimit"), `"daily";r=`):], `"daily";r=%d`, &daily); err != nil {
		t.Fatalf("RateLimit %q: %v", last.Header.Get("RateLimit"), err)
	}
	if want := 10000 - 2*n - 1; daily < want || daily > want+2 {
		t.Errorf("daily remaining %d after %d requests, want %d (+2 for the drain during the test)", daily, 2*n+1, want)
	}
	t.Logf("one key's records per master: %v", perMaster)
}
