package api_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/shopspring/decimal"

	"svc/lib/paging"
	"svc/schema/apitest"
)

// event is one raw event for the events table (the rollup view aggregates it).
type event struct {
	ws, pixel uuid.UUID
	sandbox   bool
	name      string
	day       time.Time
	value     string
	currency  string
	consent   bool
	email     string
}

// insertEvents writes events into the events table as `svc rollup` would.
func insertEvents(t testing.TB, e *env, evs []event) {
	t.Helper()
	ctx := context.Background()
	b, err := e.Conn.PrepareBatch(ctx, `INSERT INTO events (workspace_id, pixel_id, sandbox, event_id, event_name,
		occurred_at, event_date, value, has_value, currency, consent, has_email, email_sha256, inserted_at)`)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC().Truncate(time.Second)
	for _, ev := range evs {
		var sb, c, he, hv uint8
		if ev.sandbox {
			sb = 1
		}
		if ev.consent {
			c = 1
		}
		var h [32]byte
		if ev.email != "" {
			h, he = sha256.Sum256([]byte(ev.email)), 1
		}
		v := decimal.Zero
		if ev.value != "" {
			v, hv = decimal.RequireFromString(ev.value), 1
		}
		if err := b.Append(ev.ws, ev.pixel, sb, uuid.New(), ev.name, ev.day.Add(time.Hour), ev.day, v, hv, ev.currency, c, he,
			string(h[:]), now); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Send(); err != nil {
		t.Fatal(err)
	}
}

func TestPixelRollups(t *testing.T) {
	e := newEnv(t)
	tn, other, show := e.tenant(t, false), e.tenant(t, false), e.tenant(t, true)
	today := time.Now().UTC().Truncate(24 * time.Hour)
	old := today.AddDate(0, 0, -10)
	var evs []event
	for d := range 3 {
		day := old.AddDate(0, 0, d)
		for i := range 4 {
			evs = append(evs, event{ws: tn.Workspace.ID, pixel: tn.Pixel.ID, name: "purchase", day: day, value: "10.25",
				currency: "EUR", consent: i%2 == 0, email: []string{"a@x.io", "b@x.io"}[i%2]})
		}
		evs = append(evs, event{ws: tn.Workspace.ID, pixel: tn.Pixel.ID, name: "page_view", day: day})
	}
	evs = append(evs,
		event{ws: tn.Workspace.ID, pixel: tn.Pixel.ID, name: "page_view", day: today},
		event{ws: other.Workspace.ID, pixel: other.Pixel.ID, name: "purchase", day: old},
		event{ws: show.Workspace.ID, pixel: show.Pixel.ID, sandbox: true, name: "purchase", day: old})
	insertEvents(t, e, evs)
	base := "/pixel-rollups?pixel_id=" + tn.PixelID()

	all := e.walk(t, tn.Secret, base, 1000)
	if len(all) != 7 {
		t.Fatalf("%d rows, want 7: %v", len(all), all)
	}
	first := all[1] // old day, purchase (page_view sorts first)
	if first["event_name"] != "purchase" || first["events"] != float64(4) || first["consented_events"] != float64(2) ||
		first["value"] != "41.0000" || first["unique_people"] != float64(1) || first["currency"] != "EUR" ||
		first["status"] != "final" || first["pixel_id"] != tn.PixelID() || first["pixel_id_uuid"] != tn.Pixel.ID.String() ||
		first["date"] != old.Format(time.DateOnly) {
		t.Fatalf("first purchase row: %v", first)
	}
	if last := all[6]; last["status"] != "open" || last["date"] != today.Format(time.DateOnly) {
		t.Fatalf("today's row: %v", last)
	}

	// Cursor paging is stable while events arrive: each row that existed is read once.
	var seen []map[string]any
	var p listPage
	e.get(t, tn.Secret, base+"&limit=2", &p)
	seen = append(seen, p.Data...)
	insertEvents(t, e, []event{{ws: tn.Workspace.ID, pixel: tn.Pixel.ID, name: "purchase", day: old, currency: "EUR"},
		{ws: tn.Workspace.ID, pixel: tn.Pixel.ID, name: "signup", day: today}})
	for p.Meta.NextCursor != nil {
		c := *p.Meta.NextCursor
		p = listPage{}
		e.get(t, tn.Secret, base+"&limit=2&cursor="+url.QueryEscape(c), &p)
		seen = append(seen, p.Data...)
	}
	keys := map[string]int{}
	for _, r := range seen {
		keys[r["date"].(string)+"/"+r["event_name"].(string)+"/"+r["currency"].(string)]++
	}
	for _, r := range all {
		if k := r["date"].(string) + "/" + r["event_name"].(string) + "/" + r["currency"].(string); keys[k] != 1 {
			t.Fatalf("row %s read %d times while events arrived", k, keys[k])
		}
	}

	// Offset paging still works, deprecated.
	r := e.get(t, tn.Secret, base+"&offset=2&limit=2", &p)
	if r.Status != 200 || len(p.Data) != 2 || p.Meta.NextOffset == nil || *p.Meta.NextOffset != 4 ||
		r.Header.Get("Deprecation") != "@1788220800" || r.Header.Get("Sunset") != "Wed, 01 Sep 2027 00:00:00 GMT" ||
		r.Header.Get("Link") != "<"+e.URL+"/developers/versioning#offset-pagination>; rel=\"deprecation\"" {
		t.Fatalf("offset page: %d %v %+v", r.Status, r.Header, p.Meta)
	}
	dep, _ := time.Parse(time.RFC1123, r.Header.Get("Sunset"))
	if dep.Unix() < 1788220800 {
		t.Fatal("Sunset is earlier than Deprecation")
	}
	if r := e.get(t, tn.Secret, base+"&limit=2", nil); r.Status != 200 || r.Header.Get("Deprecation") != "" || r.Header.Get("Sunset") != "" {
		t.Fatalf("a cursor page: %d, Deprecation %q, Sunset %q (want 200 and neither)", r.Status, r.Header.Get("Deprecation"), r.Header.Get("Sunset"))
	}

	// Filters.
	if got := e.walk(t, tn.Secret, base+"&event_name=purchase&from="+old.AddDate(0, 0, 1).Format(time.DateOnly)+
		"&to="+old.AddDate(0, 0, 1).Format(time.DateOnly), 10); len(got) != 1 {
		t.Fatalf("filtered: %v", got)
	}
	// The sandbox key reads its showroom pixel's sandbox rows; nobody reads another's pixel.
	if got := e.walk(t, show.Secret, "/pixel-rollups?pixel_id="+show.Pixel.ID.String(), 10); len(got) != 1 {
		t.Fatalf("showroom rows: %v", got)
	}
	apitest.Problem(t, e.Do(t, "GET", "/pixel-rollups?pixel_id="+other.PixelID(), tn.Secret, ""), 404, "not_found")
	apitest.Problem(t, e.Do(t, "GET", "/pixel-rollups?pixel_id="+tn.PixelID(), show.Secret, ""), 404, "not_found")
	apitest.Problem(t, e.Do(t, "GET", "/pixel-rollups?pixel_id=pxl_zz", tn.Secret, ""), 422, "invalid_request")
	apitest.Problem(t, e.Do(t, "GET", "/pixel-rollups?pixel_id="+uuid.NewString(), tn.Secret, ""), 404, "not_found")
}

// TestBadQueriesAre422 covers the paging and filter parameters of every list.
func TestBadQueriesAre422(t *testing.T) {
	e := newEnv(t)
	tn := e.tenant(t, false)
	plan, _ := onePlan(t, e, tn, "q")
	var p listPage
	e.get(t, tn.Secret, "/plans/"+plan.String()+"/lines?limit=1", &p)
	if p.Meta.NextCursor == nil {
		t.Fatal("two lines, limit 1: no next cursor")
	}
	linesCursor := url.QueryEscape(*p.Meta.NextCursor)
	px := "/pixel-rollups?pixel_id=" + tn.PixelID()
	for _, c := range []struct{ path, field string }{
		{"/pixel-rollups", "pixel_id"},
		{px + "&from=2026-02-30", "from"},
		{px + "&from=2026-02-02&to=2026-02-01", "to"},
		{px + "&limit=0", "limit"},
		{px + "&limit=1001", "limit"},
		{px + "&limit=ten", "limit"},
		{px + "&cursor=%%%", "cursor"},
		{px + "&cursor=" + linesCursor, "cursor"},
		{px + "&offset=-1", "offset"},
		{px + "&time_zone=Nowhere/Zone", "time_zone"},
		{px + "&offset=1&cursor=" + linesCursor, "cursor"},
		{"/plans?status=sold", "status"},
		{"/plans?channel=tv", "channel"},
		{"/plans?limit=-5", "limit"},
		{"/plans/" + plan.String() + "/lines?cursor=bm9wZQ", "cursor"},
		{"/plans/" + plan.String() + "/actuals?line_id=nope", "line_id"},
		{"/plans/" + plan.String() + "/actuals?from=yesterday", "from"},
		{"/campaigns?plan_id=cmp_" + uuid.NewString(), "plan_id"},
		{"/studies?kind=poll", "kind"},
		{"/findings?study_id=1", "study_id"},
		{"/campaigns/" + uuid.NewString() + "?limit=0", ""}, // a single object ignores paging: 404
	} {
		r := e.Do(t, "GET", c.path, tn.Secret, "")
		if c.field == "" {
			apitest.Problem(t, r, 404, "not_found")
			continue
		}
		pr := apitest.Problem(t, r, 422, "invalid_request")
		found := false
		for _, x := range pr["errors"].([]any) {
			found = found || x.(map[string]any)["field"] == c.field
		}
		if !found {
			t.Errorf("%s: errors %v lack %s", c.path, pr["errors"], c.field)
		}
	}
	if got := e.walk(t, tn.Secret, "/plans?status=live&channel=search", 5); len(got) != 0 {
		t.Fatalf("filtered plans: %v", got)
	}
	if got := e.walk(t, tn.Secret, "/plans?status=live", 5); len(got) != 1 {
		t.Fatalf("live plans: %v", got)
	}
}

// At the largest page, a pixel with exactly that many rows gets them in one page whose
// next_cursor is null: the last page says so at every limit.
func TestPixelRollupsLastPageAtTheLargestLimit(t *testing.T) {
	e := newEnv(t)
	tn := e.tenant(t, false)
	day := time.Now().UTC().Truncate(24*time.Hour).AddDate(0, 0, -3)
	evs := make([]event, paging.MaxLimit)
	for i := range evs {
		evs[i] = event{ws: tn.Workspace.ID, pixel: tn.Pixel.ID, name: fmt.Sprintf("e%04d", i), day: day}
	}
	insertEvents(t, e, evs)
	var pg struct {
		Data []map[string]any `json:"data"`
		Meta struct {
			NextCursor *string `json:"next_cursor"`
		} `json:"meta"`
	}
	if r := e.get(t, tn.Secret, "/pixel-rollups?limit=1000&pixel_id="+tn.PixelID(), &pg); r.Status != 200 {
		t.Fatalf("%d %s", r.Status, r.Body)
	}
	if len(pg.Data) != paging.MaxLimit || pg.Meta.NextCursor != nil {
		t.Fatalf("%d rows, next_cursor %v: want %d and null", len(pg.Data), pg.Meta.NextCursor, paging.MaxLimit)
	}
}
