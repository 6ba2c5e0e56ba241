package catalog_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"svc/schema/apitest"
	"svc/schema/catalog"
	"svc/schema/chtest"
	"svc/schema/workspace"
)

func TestSeedShowroomIsDeterministicAndReadable(t *testing.T) {
	_, conn := chtest.NewDB(t)
	ks := workspace.NewStore(apitest.Redis(t))
	ctx := context.Background()
	first, err := catalog.SeedShowroom(ctx, ks, conn)
	if err != nil {
		t.Fatal(err)
	}
	second, err := catalog.SeedShowroom(ctx, ks, conn)
	if err != nil {
		t.Fatal(err)
	}
	if first != second || first.WorkspaceID != "org_"+catalog.ShowroomWorkspace.String() {
		t.Fatalf("seed differs between runs: %+v vs %+v", first, second)
	}
	ws := catalog.ShowroomWorkspace
	plans, err := catalog.ListPlans(ctx, conn, ws, catalog.ListQuery{Limit: 100})
	if err != nil || len(plans) != 3 {
		t.Fatalf("plans %d, %v (seeding twice must not duplicate)", len(plans), err)
	}
	if !plans[0].CreatedAt.Equal(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)) {
		t.Fatalf("showroom created_at %v, want the fixed 2026-01-01", plans[0].CreatedAt)
	}
	lines, err := catalog.ListLines(ctx, conn, ws, plans[0].ID, catalog.ListQuery{Limit: 100})
	if err != nil || len(lines) != 5 {
		t.Fatalf("lines %d, %v", len(lines), err)
	}
	lp, err := catalog.LinePlans(ctx, conn, ws, []uuid.UUID{lines[0].ID, uuid.New()})
	if err != nil || len(lp) != 1 || lp[lines[0].ID] != plans[0].ID {
		t.Fatalf("LinePlans %v, %v", lp, err)
	}
	acts, err := catalog.PlanActuals(ctx, conn, ws, plans[0].ID, catalog.ActualsQuery{Limit: 1000})
	if err != nil || len(acts) == 0 {
		t.Fatalf("plan actuals %d, %v", len(acts), err)
	}
	if f, err := catalog.ListFindings(ctx, conn, ws, catalog.ListQuery{Limit: 100}); err != nil || len(f) != 5 {
		t.Fatalf("findings %d, %v", len(f), err)
	}
	if a, err := catalog.GetAccount(ctx, conn, ws); err != nil || a.Currency != "EUR" {
		t.Fatalf("account %+v, %v", a, err)
	}
	if _, err := catalog.GetPlan(ctx, conn, uuid.New(), plans[0].ID); err != catalog.ErrNotFound {
		t.Fatalf("plan read from another workspace: %v", err)
	}
}

func TestReimportKeepsCreatedAt(t *testing.T) {
	_, conn := chtest.NewDB(t)
	ctx := context.Background()
	ws := uuid.New()
	doc, err := catalog.ParseDocument([]byte(`{"studies":[{"name":"s","kind":"survey","status":"planned",
		"period_start":"2026-01-01","period_end":"2026-01-31","findings":[{"metric":"m","value":1,"unit":"count","confidence":0.5}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, errs, err := catalog.Import(ctx, conn, ws, doc); err != nil || len(errs) > 0 {
		t.Fatal(errs, err)
	}
	first, _ := catalog.ListStudies(ctx, conn, ws, catalog.ListQuery{Limit: 10})
	time.Sleep(1100 * time.Millisecond)
	doc.Studies[0].Status = "running"
	if _, errs, err := catalog.Import(ctx, conn, ws, doc); err != nil || len(errs) > 0 {
		t.Fatal(errs, err)
	}
	again, _ := catalog.ListStudies(ctx, conn, ws, catalog.ListQuery{Limit: 10})
	if len(again) != 1 || again[0].Status != "running" || !again[0].CreatedAt.Equal(first[0].CreatedAt) ||
		!again[0].UpdatedAt.After(first[0].UpdatedAt) {
		t.Fatalf("re-import: %+v, first %+v", again, first)
	}
}

func TestImportReportsEveryProblem(t *testing.T) {
	doc, err := catalog.ParseDocument([]byte(`{"plans":[{"name":"","objective":"fame","status":"live","start_date":"2026-02-01",
		"end_date":"2026-01-01","budget":"-1","currency":"eur","lines":[{"name":"x","channel":"tv","buy_type":"cpm","unit_cost":1,
		"start_date":"2026-01-01","end_date":"2026-01-02","budget":1,"status":"booked"}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	_, errs := doc.Resolve(uuid.New())
	want := map[string]string{"plans[0].name": "required", "plans[0].objective": "one_of", "plans[0].end_date": "not_before_start",
		"plans[0].budget": "money", "plans[0].currency": "currency", "plans[0].lines[0].channel": "one_of",
		"plans[0].lines[0].currency": "currency"}
	got := map[string]string{}
	for _, e := range errs {
		got[e.Field] = e.Rule
	}
	for f, r := range want {
		if got[f] != r {
			t.Errorf("%s: rule %q, want %q (all: %v)", f, got[f], r, errs)
		}
	}
	if _, err := catalog.ParseDocument([]byte(`{"plans":[{"nam":"typo"}]}`)); err == nil {
		t.Fatal("an unknown field was accepted")
	}
}
