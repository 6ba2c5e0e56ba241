package api_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/shopspring/decimal"

	"svc/lib/apikey"
	"svc/lib/limits"
	"svc/schema"
	"svc/schema/catalog"
	"svc/schema/rollups"
	"svc/schema/workspace"
)

// latencies reports the p50 and p99 of samples as benchmark metrics.
func latencies(b *testing.B, samples []time.Duration) {
	if len(samples) == 0 {
		return
	}
	slices.Sort(samples)
	b.ReportMetric(float64(samples[len(samples)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(samples[len(samples)*99/100].Microseconds())/1000, "p99-ms")
}

// BenchmarkPixelRollups90Days: GET /pixel-rollups for one pixel over 90 days (5 event
// names a day, 450 rows in one page), through the HTTP stack ("http") and the query
// alone ("query").
func BenchmarkPixelRollups90Days(b *testing.B) {
	e := newEnv(b)
	tn := e.tenant(b, false)
	start := time.Now().UTC().Truncate(24*time.Hour).AddDate(0, 0, -90)
	var evs []event
	for d := range 90 {
		for n := range 5 {
			for i := range 10 {
				evs = append(evs, event{ws: tn.Workspace.ID, pixel: tn.Pixel.ID, name: fmt.Sprintf("event_%d", n),
					day: start.AddDate(0, 0, d), value: "9.99", currency: "EUR", consent: i%3 != 0, email: fmt.Sprintf("p%d@x.io", i)})
			}
		}
	}
	insertEvents(b, e, evs)
	path := fmt.Sprintf("/pixel-rollups?pixel_id=%s&from=%s&to=%s&limit=1000", tn.PixelID(),
		start.Format(time.DateOnly), start.AddDate(0, 0, 89).Format(time.DateOnly))
	b.Run("http", func(b *testing.B) {
		samples := make([]time.Duration, 0, b.N)
		for b.Loop() {
			t0 := time.Now()
			if r := e.Do(b, "GET", path, tn.Secret, ""); r.Status != 200 {
				b.Fatalf("%d %s", r.Status, r.Body)
			}
			samples = append(samples, time.Since(t0))
		}
		latencies(b, samples)
	})
	b.Run("query", func(b *testing.B) {
		q := rollups.DailyQuery{Workspace: schema.UUID(tn.Workspace.ID), Pixel: schema.UUID(tn.Pixel.ID), From: start,
			To: start.AddDate(0, 0, 89), Limit: 1000}
		for b.Loop() {
			rows, err := rollups.QueryDaily(context.Background(), e.Conn, q)
			if err != nil || len(rows) != 450 {
				b.Fatalf("%d rows, %v", len(rows), err)
			}
		}
	})
}

// BenchmarkPlanActuals500Lines30Days: GET /plans/{id}/actuals for a plan of 500 line
// items with 30 delivered days each (15,000 rows): the first page of 1,000 rows through
// HTTP ("http_page"), every page walked ("http_walk", 15 requests), and the query alone.
func BenchmarkPlanActuals500Lines30Days(b *testing.B) {
	e := newEnv(b)
	w := e.Workspace(b, false)
	_, sec := e.Key(b, workspace.KeySpec{WorkspaceID: w.ID, Env: apikey.Live, Burst: 1 << 20, Daily: limits.MaxQuota})
	plan := uuid.New()
	ctx := context.Background()
	batch := catalog.Batch{Plans: []catalog.Plan{{ID: plan, Name: "bench", Objective: "conversion", Status: "live",
		StartDate: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), EndDate: time.Date(2026, 1, 30, 0, 0, 0, 0, time.UTC),
		Budget: decimal.NewFromInt(1e6), Currency: "EUR"}}}
	for l := range 500 {
		line := catalog.Line{ID: uuid.New(), PlanID: plan, Name: fmt.Sprint("line ", l), Channel: "search", BuyType: "cpc",
			Currency: "EUR", Status: "live"}
		batch.Lines = append(batch.Lines, line)
		for d := range 30 {
			batch.PlanActuals = append(batch.PlanActuals, catalog.PlanActual{PlanID: plan, LineID: line.ID,
				Date: time.Date(2026, 1, 1+d, 0, 0, 0, 0, time.UTC), Metrics: catalog.Metrics{Impressions: uint64(1000 + d),
					Clicks: 10, Spend: decimal.New(1234, -2), Currency: "EUR", Conversions: 1}})
		}
	}
	if _, _, err := catalog.Write(ctx, e.Conn, w.ID, batch); err != nil {
		b.Fatal(err)
	}
	path := "/plans/" + plan.String() + "/actuals"
	b.Run("http_page", func(b *testing.B) {
		samples := make([]time.Duration, 0, b.N)
		for b.Loop() {
			t0 := time.Now()
			if r := e.Do(b, "GET", path+"?limit=1000", sec, ""); r.Status != 200 {
				b.Fatalf("%d %s", r.Status, r.Body)
			}
			samples = append(samples, time.Since(t0))
		}
		latencies(b, samples)
	})
	b.Run("http_walk", func(b *testing.B) {
		for b.Loop() {
			if got := e.walk(b, sec, path, 1000); len(got) != 15000 {
				b.Fatalf("%d rows", len(got))
			}
		}
	})
	b.Run("query", func(b *testing.B) {
		for b.Loop() {
			rows, err := catalog.PlanActuals(ctx, e.Conn, w.ID, plan, catalog.ActualsQuery{Limit: 1000})
			if err != nil || len(rows) != 1000 {
				b.Fatalf("%d rows, %v", len(rows), err)
			}
		}
	})
}
