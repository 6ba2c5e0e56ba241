package api_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/shopspring/decimal"

	"svc/schema/apitest"
	"svc/schema/catalog"
)

// randomDoc returns a random catalog: plans with lines and delivered days, campaigns
// (some executing a plan), studies (some about a campaign) with findings.
func randomDoc(rng *rand.Rand, tag string) catalog.Document {
	var d catalog.Document
	for i := range 1 + rng.IntN(4) {
		p := catalog.PlanDoc{Name: fmt.Sprintf("%s plan %d", tag, i), Objective: "conversion", Status: "live",
			StartDate: "2026-01-01", EndDate: "2026-03-31", Budget: decimal.NewFromInt(int64(1000 + rng.IntN(9000))), Currency: "EUR",
			Channels: []string{"search"}}
		for j := range 1 + rng.IntN(3) {
			l := catalog.LineDoc{Name: fmt.Sprintf("line %d", j), Channel: "search", BuyType: "cpc", UnitCost: decimal.NewFromInt(1),
				StartDate: "2026-01-01", EndDate: "2026-03-31", Budget: decimal.NewFromInt(100), Status: "booked"}
			for k := range rng.IntN(4) {
				l.Actuals = append(l.Actuals, catalog.DayDoc{Date: fmt.Sprintf("2026-01-%02d", k+1), Impressions: uint64(rng.IntN(1000)),
					Spend: decimal.New(int64(rng.IntN(10000)), -2)})
			}
			p.Lines = append(p.Lines, l)
		}
		d.Plans = append(d.Plans, p)
	}
	for i := range 1 + rng.IntN(3) {
		c := catalog.CampaignDoc{Name: fmt.Sprintf("%s campaign %d", tag, i), Objective: "awareness", Status: "active",
			StartDate: "2026-01-01", EndDate: "2026-02-01", Budget: decimal.NewFromInt(500), Currency: "USD"}
		for k := range rng.IntN(3) {
			c.Actuals = append(c.Actuals, catalog.DayDoc{Date: fmt.Sprintf("2026-01-%02d", k+1), Clicks: uint64(k)})
		}
		d.Campaigns = append(d.Campaigns, c)
	}
	for i := range 1 + rng.IntN(3) {
		s := catalog.StudyDoc{Name: fmt.Sprintf("%s study %d", tag, i), Kind: "brand_lift", Status: "completed",
			PeriodStart: "2026-01-01", PeriodEnd: "2026-01-31"}
		for k := range rng.IntN(4) {
			s.Findings = append(s.Findings, catalog.FindingDoc{Metric: fmt.Sprintf("metric_%d", k), Value: rng.Float64(),
				Unit: "points", Confidence: 0.9, CILower: -1, CIUpper: 2})
		}
		d.Studies = append(d.Studies, s)
	}
	return d
}

// objects are the public ids a workspace owns, by path. A list path maps to every
// record key it must return (see recordKey).
type objects struct {
	org    string
	pixel  string
	single []string            // single objects: /plans/pln_…, …; 404 for other keys
	top    map[string][]string // /plans, /campaigns, …: walked by the owner only
	sub    map[string][]string // /plans/{id}/lines, …: 404 for other keys
	filter map[string][]string // /findings?study_id=…: empty for other keys
}

func collect(e *env, t *testing.T, tn tenant, rng *rand.Rand, tag string) objects {
	doc := randomDoc(rng, tag)
	// Link some campaigns to plans and some studies to campaigns of the same document.
	ws := tn.Workspace.ID
	for i := range doc.Campaigns {
		if i%2 == 0 {
			doc.Campaigns[i].PlanID = "pln_" + catalog.DerivedID("pln_", ws, doc.Plans[0].Name).String()
		}
	}
	for i := range doc.Studies {
		if i%2 == 1 {
			doc.Studies[i].CampaignID = catalog.DerivedID("cmp_", ws, doc.Campaigns[0].Name).String()
		}
	}
	b := e.importDoc(t, tn, doc)
	o := objects{org: "org_" + ws.String(), pixel: tn.PixelID(),
		top: map[string][]string{"/plans": {}, "/campaigns": {}, "/studies": {}, "/findings": {}},
		sub: map[string][]string{}, filter: map[string][]string{}}
	id := func(p string, u uuid.UUID) string {
		if rng.IntN(2) == 0 {
			return u.String() // raw UUIDs are accepted as well
		}
		return p + u.String()
	}
	for _, p := range b.Plans {
		o.single = append(o.single, "/plans/"+id("pln_", p.ID))
		o.top["/plans"] = append(o.top["/plans"], "pln_"+p.ID.String())
		lines := "/plans/" + id("pln_", p.ID) + "/lines"
		acts := "/plans/" + id("pln_", p.ID) + "/actuals"
		o.sub[lines], o.sub[acts] = []string{}, []string{}
		for _, l := range b.Lines {
			if l.PlanID == p.ID {
				o.sub[lines] = append(o.sub[lines], "lin_"+l.ID.String())
			}
		}
		for _, a := range b.PlanActuals {
			if a.PlanID == p.ID {
				o.sub[acts] = append(o.sub[acts], "lin_"+a.LineID.String()+"/"+a.Date.Format(time.DateOnly))
			}
		}
	}
	for _, c := range b.Campaigns {
		o.single = append(o.single, "/campaigns/"+id("cmp_", c.ID))
		o.top["/campaigns"] = append(o.top["/campaigns"], "cmp_"+c.ID.String())
		acts := "/campaigns/" + id("cmp_", c.ID) + "/actuals"
		o.sub[acts] = []string{}
		for _, a := range b.CampaignActuals {
			if a.CampaignID == c.ID {
				o.sub[acts] = append(o.sub[acts], "cmp_"+c.ID.String()+"/"+a.Date.Format(time.DateOnly))
			}
		}
	}
	for _, s := range b.Studies {
		o.single = append(o.single, "/studies/"+id("std_", s.ID))
		o.top["/studies"] = append(o.top["/studies"], "std_"+s.ID.String())
		byStudy := "/findings?study_id=" + id("std_", s.ID)
		o.filter[byStudy] = []string{}
		for _, f := range b.Findings {
			if f.StudyID == s.ID {
				o.filter[byStudy] = append(o.filter[byStudy], "fnd_"+f.ID.String())
			}
		}
	}
	for _, f := range b.Findings {
		o.single = append(o.single, "/findings/"+id("fnd_", f.ID))
		o.top["/findings"] = append(o.top["/findings"], "fnd_"+f.ID.String())
	}
	return o
}

// recordKey names a list record: its id, or for actuals its line or campaign and day.
func recordKey(m map[string]any) string {
	if d, ok := m["date"].(string); ok {
		if l, ok := m["line_id"].(string); ok {
			return l + "/" + d
		}
		return m["campaign_id"].(string) + "/" + d
	}
	id, _ := m["id"].(string)
	if u, _ := m["id_uuid"].(string); len(id) < 36 || u != id[len(id)-36:] {
		return "bad id_uuid twin: " + id
	}
	return id
}

// TestNoKeyReadsAnotherWorkspace is the isolation property: random objects across two
// live workspaces and a showroom; for every endpoint and every key, a key reads exactly
// its own workspace's objects: 404 not_found on another's single objects (and on
// malformed ids), absent from lists, and every list walked by cursor returns each of
// its own objects once.
func TestNoKeyReadsAnotherWorkspace(t *testing.T) {
	e := newEnv(t)
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	tenants := []tenant{e.tenant(t, false), e.tenant(t, false), e.tenant(t, true)}
	objs := make([]objects, len(tenants))
	for i, tn := range tenants {
		objs[i] = collect(e, t, tn, rng, fmt.Sprint("ws", i))
	}
	for ki, key := range tenants {
		for oi, o := range objs {
			own := ki == oi
			for _, path := range o.single {
				r := e.Do(t, "GET", path, key.Secret, "")
				if own && r.Status != 200 {
					t.Fatalf("key %d GET own %s: %d %s", ki, path, r.Status, r.Body)
				}
				if !own {
					apitest.Problem(t, r, 404, "not_found")
				}
			}
			for path, want := range o.sub {
				if !own {
					apitest.Problem(t, e.Do(t, "GET", path, key.Secret, ""), 404, "not_found")
					continue
				}
				checkSame(t, fmt.Sprintf("key %d %s", ki, path), e.walk(t, key.Secret, path, 1+rng.IntN(3)), want)
			}
			for path, want := range o.filter {
				if !own {
					want = nil
				}
				checkSame(t, fmt.Sprintf("key %d %s", ki, path), e.walk(t, key.Secret, path, 1+rng.IntN(3)), want)
			}
			for path, want := range o.top {
				if own { // exactly the own objects, each once: nothing of another workspace
					checkSame(t, fmt.Sprintf("key %d %s", ki, path), e.walk(t, key.Secret, path, 1+rng.IntN(3)), want)
				}
			}
			r := e.Do(t, "GET", "/pixel-rollups?pixel_id="+o.pixel, key.Secret, "")
			if own && r.Status != 200 {
				t.Fatalf("own pixel: %d %s", r.Status, r.Body)
			} else if !own {
				apitest.Problem(t, r, 404, "not_found")
			}
		}
		var acc map[string]any
		if e.get(t, key.Secret, "/account", &acc); acc["id"] != objs[ki].org {
			t.Fatalf("key %d /account = %v, want %s", ki, acc["id"], objs[ki].org)
		}
		for _, bad := range []string{"/plans/nope", "/plans/" + uuid.NewString(), "/campaigns/pln_" + uuid.NewString(),
			"/studies/std_", "/findings/fnd_" + uuid.NewString() + "x", "/plans/%20/lines"} {
			apitest.Problem(t, e.Do(t, "GET", bad, key.Secret, ""), 404, "not_found")
		}
	}
}

// checkSame fails unless got holds each id of want exactly once and nothing else.
func checkSame(t *testing.T, what string, got []map[string]any, want []string) {
	t.Helper()
	seen := map[string]int{}
	for _, m := range got {
		seen[recordKey(m)]++
	}
	for k, n := range seen {
		if n != 1 || !slices.Contains(want, k) {
			t.Fatalf("%s: %s returned %d times (want %v)", what, k, n, want)
		}
	}
	if len(seen) != len(want) {
		t.Fatalf("%s: %d records, want %d: %v", what, len(seen), len(want), want)
	}
}
