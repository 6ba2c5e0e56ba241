package httpserver_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"svc/lib/httpserver"
	"svc/lib/idempotency"
	"svc/lib/limits"
	"svc/lib/process"
	"svc/schema/apitest"
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

// TestGateKeysShareASlot: the gate script touches a key's two rate-limit windows and
// its idempotency table; in a Redis Cluster they must hash to one slot, while keys of
// different API keys spread over the slot range (and so over every master).
func TestGateKeysShareASlot(t *testing.T) {
	thirds := map[int]int{}
	for i := 0; i < 300; i++ {
		id := uuid.NewString()
		ks := append(limits.Keys(id), idempotency.DirKey(id))
		slot := apitest.Slot(ks[0])
		for _, k := range ks[1:] {
			if apitest.Slot(k) != slot {
				t.Fatalf("%q (slot %d) and %q (slot %d) are in different hash slots", ks[0], slot, k, apitest.Slot(k))
			}
		}
		thirds[slot*3/16384]++
	}
	for third := 0; third < 3; third++ {
		if thirds[third] < 50 {
			t.Errorf("API keys do not spread over the slots: %v per third of the range", thirds)
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
// request is answered (no CROSSSLOT), a repeat is replayed, and the keys' windows and
// records land on every master.
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
			ks := append(limits.Keys(id), idempotency.DirKey(id))
			found, err := node.Exists(ctx, ks...).Result()
			if err != nil && !strings.Contains(err.Error(), "MOVED") {
				return err
			}
			if found == int64(len(ks)) {
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
			t.Errorf("master %s holds no API key's windows and records: %v", addr, perMaster)
		}
		total += n
	}
	if total != tenants {
		t.Errorf("%d of %d keys found whole on one master: %v", total, tenants, perMaster)
	}
	t.Logf("API keys per master: %v", perMaster)
}
