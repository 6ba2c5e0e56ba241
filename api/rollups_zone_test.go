package api_test

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/shopspring/decimal"

	"svc/schema/apitest"
)

// insertInstants writes one purchase per instant for tn's pixel (EUR 1, consented,
// person emails[i]), straight into the events table as `svc rollup` would.
func insertInstants(t *testing.T, e *env, tn tenant, at []time.Time, emails []string) {
	t.Helper()
	ctx := context.Background()
	b, err := e.Conn.PrepareBatch(ctx, `INSERT INTO events (workspace_id, pixel_id, sandbox, event_id, event_name,
		occurred_at, event_date, value, has_value, currency, consent, has_email, email_sha256, inserted_at)`)
	if err != nil {
		t.Fatal(err)
	}
	for i, ts := range at {
		h := [32]byte{byte(len(emails[i])), emails[i][0]}
		if err := b.Append(tn.Workspace.ID, tn.Pixel.ID, uint8(0), uuid.New(), "purchase", ts, ts.UTC().Truncate(24*time.Hour),
			decimal.NewFromInt(1), uint8(1), "EUR", uint8(1), uint8(1), string(h[:]), time.Now().UTC()); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Send(); err != nil {
		t.Fatal(err)
	}
}

// days returns date → [events, unique_people] and the time_zone of every row.
func days(rows []map[string]any) (map[string][2]float64, map[string]bool) {
	out, zones := map[string][2]float64{}, map[string]bool{}
	for _, r := range rows {
		out[r["date"].(string)] = [2]float64{r["events"].(float64), r["unique_people"].(float64)}
		zones[r["time_zone"].(string)] = true
	}
	return out, zones
}

// TestPixelRollupsTimeZones: a +05:45 pixel's events straddling local midnight land on
// two local days (one UTC day); the pixel's zone overrides the workspace's, which
// applies to its other pixels; time_zone overrides both for one request.
func TestPixelRollupsTimeZones(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	tn := e.tenant(t, false)
	if _, err := e.Keys.SetPixelTimeZone(ctx, tn.Pixel.ID, "Asia/Kathmandu"); err != nil {
		t.Fatal(err)
	}
	// Kathmandu's midnight of 2026-03-08 is 2026-03-07 18:15 UTC.
	mid := time.Date(2026, 3, 7, 18, 15, 0, 0, time.UTC)
	insertInstants(t, e, tn, []time.Time{mid.Add(-time.Hour), mid.Add(-time.Second), mid, mid.Add(3 * time.Hour)},
		[]string{"a", "b", "c", "c"})
	base := "/pixel-rollups?pixel_id=" + tn.PixelID()

	got, zones := days(e.walk(t, tn.Secret, base, 10))
	if len(got) != 2 || got["2026-03-07"] != [2]float64{2, 2} || got["2026-03-08"] != [2]float64{2, 1} || !zones["Asia/Kathmandu"] || len(zones) != 1 {
		t.Fatalf("Kathmandu days: %v %v", got, zones)
	}
	got, zones = days(e.walk(t, tn.Secret, base+"&time_zone=UTC", 10))
	if len(got) != 1 || got["2026-03-07"] != [2]float64{4, 3} || !zones["UTC"] {
		t.Fatalf("UTC days: %v %v", got, zones)
	}
	got, _ = days(e.walk(t, tn.Secret, base+"&time_zone=Asia/Kathmandu&from=2026-03-08&to=2026-03-08", 10))
	if len(got) != 1 || got["2026-03-08"][0] != 2 {
		t.Fatalf("one Kathmandu day: %v", got)
	}

	// The workspace's zone applies to a pixel without its own; the pixel's wins.
	if _, err := e.Keys.SetWorkspaceTimeZone(ctx, tn.Workspace.ID, "America/New_York"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Keys.SetPixelTimeZone(ctx, tn.Pixel.ID, ""); err != nil {
		t.Fatal(err)
	}
	got, zones = days(e.walk(t, tn.Secret, base, 10))
	if len(got) != 1 || got["2026-03-07"][0] != 4 || !zones["America/New_York"] {
		t.Fatalf("New York days: %v %v", got, zones)
	}

	// "an unknown zone is `422 invalid_request` with `errors[]` (`field` `time_zone`, `rule`
	// `iana_time_zone`)" (CHANGELOG.md; rollups.md: "errors[] naming time_zone").
	for _, bad := range []string{"Mars/Olympus", "Local", "+05:45", "UTC' OR 1=1 --", strings.Repeat("A", 300)} {
		pr := apitest.Problem(t, e.Do(t, "GET", base+"&time_zone="+url.QueryEscape(bad), tn.Secret, ""), 422, "invalid_request")
		if errs := pr["errors"].([]any); len(errs) != 1 || errs[0].(map[string]any)["field"] != "time_zone" ||
			errs[0].(map[string]any)["rule"] != "iana_time_zone" {
			t.Fatalf("time_zone=%q: %v, want one error time_zone/iana_time_zone", bad, pr)
		}
	}
}

// TestPixelRollupsCursorKeepsItsZone: the pages of one listing stay in the zone of its
// first page when the pixel's zone changes midway, and neither skip nor repeat a row.
func TestPixelRollupsCursorKeepsItsZone(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	tn := e.tenant(t, false)
	if _, err := e.Keys.SetPixelTimeZone(ctx, tn.Pixel.ID, "Asia/Kolkata"); err != nil {
		t.Fatal(err)
	}
	start := time.Date(2026, 10, 1, 12, 0, 0, 0, time.UTC)
	var at []time.Time
	var who []string
	for d := range 6 {
		at = append(at, start.AddDate(0, 0, d))
		who = append(who, "p")
	}
	insertInstants(t, e, tn, at, who)
	base := "/pixel-rollups?pixel_id=" + tn.PixelID() + "&limit=2"
	var p listPage
	e.get(t, tn.Secret, base, &p)
	rows := p.Data
	if _, err := e.Keys.SetPixelTimeZone(ctx, tn.Pixel.ID, "Pacific/Kiritimati"); err != nil { // +14: every date moves
		t.Fatal(err)
	}
	cursor := *p.Meta.NextCursor
	// "a cursor keeps its listing's zone (another `time_zone` with it is 422, rule
	// `cursor_time_zone`)" (CHANGELOG.md; rollups.md: "a `time_zone` that differs from the
	// cursor's is `422 invalid_request`"): the error names the time_zone parameter.
	pr := apitest.Problem(t, e.Do(t, "GET", base+"&time_zone=UTC&cursor="+url.QueryEscape(cursor), tn.Secret, ""), 422, "invalid_request")
	if errs := pr["errors"].([]any); len(errs) != 1 || errs[0].(map[string]any)["field"] != "time_zone" ||
		errs[0].(map[string]any)["rule"] != "cursor_time_zone" {
		t.Fatalf("time_zone=UTC with an Asia/Kolkata cursor: %v, want one error time_zone/cursor_time_zone", pr)
	}
	if r := e.Do(t, "GET", base+"&time_zone=Asia/Kolkata&cursor="+url.QueryEscape(cursor), tn.Secret, ""); r.Status != 200 {
		t.Fatalf("time_zone naming the cursor's own zone: %d %s", r.Status, r.Body)
	}
	for {
		p = listPage{}
		e.get(t, tn.Secret, base+"&cursor="+url.QueryEscape(cursor), &p)
		rows = append(rows, p.Data...)
		if p.Meta.NextCursor == nil {
			break
		}
		cursor = *p.Meta.NextCursor
	}
	got, zones := days(rows)
	if len(rows) != 6 || len(got) != 6 || len(zones) != 1 || !zones["Asia/Kolkata"] || got["2026-10-01"][0] != 1 || got["2026-10-06"][0] != 1 {
		t.Fatalf("pages across a zone change: %v", rows)
	}
	// A new listing uses the new zone.
	if _, zones := days(e.walk(t, tn.Secret, "/pixel-rollups?pixel_id="+tn.PixelID(), 10)); !zones["Pacific/Kiritimati"] {
		t.Fatalf("new listing: %v", zones)
	}
}
