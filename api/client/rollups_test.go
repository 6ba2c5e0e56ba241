package client_test

import (
	"context"
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/shopspring/decimal"

	"svc/api/client"
	"svc/schema/rollups"
)

// Walking GET /pixel-rollups with the client's List and no limit:
//   - rollups.md and decisions.md: "limit 1–1000, default 100": a pixel with 101 rollup
//     rows is read in a page of 100, then a page of 1;
//   - api/client/README.md: "Meta is the last page's meta (a list's own members, such
//     as … GET /pixel-rollups' ingested_through)": after each page, Meta() holds that
//     page's meta.ingested_through (rollups.md: "Every answer carries
//     meta.ingested_through"), nil before the first page.
func TestPixelRollupsWalkReadsPagesOf100WithIngestedThroughInMeta(t *testing.T) {
	rg := newReadRig(t, false)
	tn := rg.Tenant(t, false)
	ctx := context.Background()
	// 101 events of one day, each of its own name: 101 rollup rows (day, name, currency).
	at := time.Now().UTC().Truncate(24 * time.Hour).Add(-12 * time.Hour)
	b, err := rg.conn.PrepareBatch(ctx, `INSERT INTO events (workspace_id, pixel_id, sandbox, event_id, event_name,
		occurred_at, event_date, value, has_value, currency, consent, has_email, email_sha256, inserted_at)`)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 101 {
		if err := b.Append(tn.Workspace.ID, tn.Pixel.ID, uint8(0), uuid.New(), fmt.Sprintf("ev_%03d", i), at,
			at.Truncate(24*time.Hour), decimal.Zero, uint8(0), "", uint8(1), uint8(0), string(make([]byte, 32)), time.Now().UTC()); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Send(); err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 9, 14, 10, 15, 2, 250e6, time.UTC)
	raise := func(at time.Time) {
		t.Helper()
		if err := rollups.WatermarkRaise(ctx, rg.Redis, rg.ch.Database, "events.v1@test", 1, map[int32]time.Time{0: at}); err != nil {
			t.Fatal(err)
		}
	}
	raise(t0)
	rc := &recorder{}
	c := rg.client(tn.Secret, rc)
	it := client.List[client.Object](c, "/pixel-rollups", url.Values{"pixel_id": {tn.PixelID()}})
	if it.Meta() != nil {
		t.Fatalf("Meta() %v before the first page, want nil", it.Meta())
	}
	var names []any
	for range 100 {
		if !it.Next(ctx) {
			t.Fatalf("the walk ended after %d rows (%v)", len(names), it.Err())
		}
		names = append(names, it.Item()["event_name"])
	}
	if n := len(rc.log()); n != 1 {
		t.Fatalf("%d requests for the first 100 rows, want one page of 100 (the default limit)", n)
	}
	if m := it.Meta(); m["ingested_through"] != "2026-09-14T10:15:02.250Z" || m["next_cursor"] == nil {
		t.Fatalf("Meta() after the first page: %v, want ingested_through 2026-09-14T10:15:02.250Z and a next_cursor", m)
	}
	// The second page's meta replaces the first's.
	raise(t0.Add(time.Second))
	if !it.Next(ctx) {
		t.Fatalf("no 101st row (%v)", it.Err())
	}
	names = append(names, it.Item()["event_name"])
	if n := len(rc.log()); n != 2 {
		t.Fatalf("%d requests for 101 rows, want two pages", n)
	}
	if m := it.Meta(); m["ingested_through"] != "2026-09-14T10:15:03.250Z" || m["next_cursor"] != nil {
		t.Fatalf("Meta() after the last page: %v, want its ingested_through 2026-09-14T10:15:03.250Z and no next_cursor", m)
	}
	if it.Next(ctx) || it.Err() != nil || len(rc.log()) != 2 {
		t.Fatalf("the walk goes on past the last page (%v, %d requests)", it.Err(), len(rc.log()))
	}
	if names[0] != "ev_000" || names[99] != "ev_099" || names[100] != "ev_100" {
		t.Fatalf("rows %v… %v, want ev_000 … ev_099, ev_100", names[0], names[99:])
	}
}
