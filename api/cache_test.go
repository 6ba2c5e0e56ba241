package api_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"svc/api"
	"svc/schema/apitest"
	"svc/schema/workspace"
)

func TestPageCache(t *testing.T) {
	e := newEnv(t)
	e.API.Cache = api.NewCache(400*time.Millisecond, 1<<20)
	tn, other := e.tenant(t, false), e.tenant(t, false)
	day := time.Now().UTC().Truncate(24*time.Hour).AddDate(0, 0, -3)
	insertEvents(t, e, []event{{ws: tn.Workspace.ID, pixel: tn.Pixel.ID, name: "view", day: day}})
	path := "/pixel-rollups?pixel_id=" + tn.PixelID()
	events := func() float64 { return onlyRow(t, e, tn.Secret, path)["events"].(float64) }
	if n := events(); n != 1 {
		t.Fatalf("events %v", n)
	}
	insertEvents(t, e, []event{{ws: tn.Workspace.ID, pixel: tn.Pixel.ID, name: "view", day: day}})
	if n := events(); n != 1 {
		t.Fatalf("within the TTL the page is the cached one: events %v", n)
	}
	time.Sleep(450 * time.Millisecond)
	if n := events(); n != 2 {
		t.Fatalf("after the TTL: events %v", n)
	}

	// Concurrent identical requests all get the page.
	var wg sync.WaitGroup
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if r := e.Do(t, "GET", path, tn.Secret, ""); r.Status != 200 {
				t.Errorf("%d %s", r.Status, r.Body)
			}
		}()
	}
	wg.Wait()

	// An import drops its workspace's pages: the writer reads its own write.
	plan, lines := onePlan(t, e, tn, "cached")
	acts := "/plans/" + plan.String() + "/actuals"
	for _, imp := range []int{5, 6} {
		if r := e.Do(t, "POST", "/imports/actuals", tn.Secret, `{"rows":[`+row(plan, lines[0], "2026-03-01", imp, "1")+`]}`); r.Status != 200 {
			t.Fatalf("%d %s", r.Status, r.Body)
		}
		if got := e.walk(t, tn.Secret, acts, 10); len(got) != 1 || got[0]["impressions"] != float64(imp) {
			t.Fatalf("after import %d: %v", imp, got)
		}
	}
	// The same URI from another workspace's key is never served from the cache.
	apitest.Problem(t, e.Do(t, "GET", acts+"?limit=10", other.Secret, ""), 404, "not_found")
	apitest.Problem(t, e.Do(t, "GET", path, other.Secret, ""), 404, "not_found")
	apitest.Problem(t, e.Do(t, "GET", "/campaigns/"+uuid.NewString()+"/actuals", tn.Secret, ""), 404, "not_found")
}

// A pixel's zone changed by another process applies to GET /pixel-rollups within a
// second, through the process's view of the zone and the page cache (default TTL).
func TestZoneChangeAppliesWithinASecond(t *testing.T) {
	e := newEnv(t)
	e.API.Cache = api.NewCache(250*time.Millisecond, 1<<20) // SVC_API_CACHE_TTL's default
	tn := e.tenant(t, false)
	day := time.Now().UTC().Truncate(24*time.Hour).AddDate(0, 0, -3)
	insertEvents(t, e, []event{{ws: tn.Workspace.ID, pixel: tn.Pixel.ID, name: "view", day: day}})
	other := workspace.NewStore(e.Keys.Redis()) // another process's store
	path := "/pixel-rollups?pixel_id=" + tn.PixelID()
	zoneOf := func() string { return onlyRow(t, e, tn.Secret, path)["time_zone"].(string) }
	for i, zone := range []string{"Asia/Kathmandu", "America/St_Johns", "Australia/Eucla", "UTC"} {
		// Keep the caches warm up to the change, at a phase that moves each round.
		for until := time.Now().Add(time.Duration(300+i*170) * time.Millisecond); time.Now().Before(until); {
			zoneOf()
			time.Sleep(20 * time.Millisecond)
		}
		if _, err := other.SetPixelTimeZone(context.Background(), tn.Pixel.ID, zone); err != nil {
			t.Fatal(err)
		}
		changed := time.Now()
		for zoneOf() != zone {
			if time.Since(changed) > time.Second {
				t.Fatalf("zone %s not applied a second after the change", zone)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// onlyRow is the one row of the list GET path answers for secret (200, one row).
func onlyRow(t *testing.T, e *env, secret, path string) map[string]any {
	t.Helper()
	var p listPage
	if r := e.get(t, secret, path, &p); r.Status != 200 || len(p.Data) != 1 {
		t.Fatalf("%d %s", r.Status, r.Body)
	}
	return p.Data[0]
}
