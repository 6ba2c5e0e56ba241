package api_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"svc/api"
	"svc/schema/apitest"
	"svc/schema/chtest"
	"svc/schema/erasure"
	"svc/schema/rollups"
)

// meta.ingested_through is the lowest partition's published watermark (null until
// every partition has one), never lowered by a late publisher, and null while the
// pixel is held for an erasure's rebuild of its rollups.
func TestIngestedThroughMeta(t *testing.T) {
	ch, conn := chtest.NewDB(t)
	a := &api.API{Conn: conn, Database: ch.Database}
	s := apitest.Start(t, a.Routes(), nil)
	a.Keys = s.Keys
	e := &env{Server: s, API: a, Conn: conn}
	tn := e.tenant(t, false)
	meta := func() any {
		t.Helper()
		var pg struct {
			Meta map[string]any `json:"meta"`
		}
		if r := e.get(t, tn.Secret, "/pixel-rollups?pixel_id="+tn.PixelID(), &pg); r.Status != 200 {
			t.Fatalf("%d %s", r.Status, r.Body)
		}
		v, ok := pg.Meta["ingested_through"]
		if !ok {
			t.Fatalf("meta %v has no ingested_through", pg.Meta)
		}
		return v
	}
	if v := meta(); v != nil {
		t.Fatalf("nothing published: %v, want null", v)
	}
	ctx := context.Background()
	t0 := time.Date(2026, 9, 14, 10, 15, 2, 250e6, time.UTC)
	if err := rollups.WatermarkRaise(ctx, s.Redis, ch.Database, "events.v1@test", 2, map[int32]time.Time{0: t0.Add(time.Second)}); err != nil {
		t.Fatal(err)
	}
	if v := meta(); v != nil {
		t.Fatalf("one partition of two published: %v, want null", v)
	}
	if err := rollups.WatermarkRaise(ctx, s.Redis, ch.Database, "events.v1@test", 2, map[int32]time.Time{1: t0}); err != nil {
		t.Fatal(err)
	}
	if v := meta(); v != "2026-09-14T10:15:02.250Z" {
		t.Fatalf("ingested_through %v, want the lower partition's", v)
	}
	if err := rollups.WatermarkRaise(ctx, s.Redis, ch.Database, "events.v1@test", 2, map[int32]time.Time{1: t0.Add(-time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if v := meta(); v != "2026-09-14T10:15:02.250Z" {
		t.Fatalf("a late, lower value moved it: %v", v)
	}
	fence := erasure.NewFence(s.Redis, ch.Database)
	if _, err := fence.Hold(ctx, []uuid.UUID{tn.Pixel.ID}, time.Minute); err != nil {
		t.Fatal(err)
	}
	if v := meta(); v != nil {
		t.Fatalf("pixel held for a rebuild: %v, want null", v)
	}
	if err := fence.Release(ctx, []uuid.UUID{tn.Pixel.ID}); err != nil {
		t.Fatal(err)
	}
	if v := meta(); v != "2026-09-14T10:15:02.250Z" {
		t.Fatalf("after the hold: %v", v)
	}
}
