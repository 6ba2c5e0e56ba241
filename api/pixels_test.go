package api_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"svc/lib/apikey"
	"svc/lib/svctest"
	"svc/schema/apitest"
	"svc/schema/workspace"
)

// A pixel's health through the whole pipeline: GET /pixels/{id} gives its name, zone,
// per local day the events accepted (as the rollups count them), rejected by rule and
// dropped as copies (by the edge in a batch, by the consumer across batches), received
// as their sum, the last accepted event's time, the partition its batches go to (the
// one GET /batches saw) and the pipeline's lag for it; GET /pixels lists the workspace's
// pixels, a page at a time, each once.
func TestPixelHealthThroughThePipeline(t *testing.T) {
	p := newPipelineOf(t, 100, true)
	tn := p.tenant(t, false)
	ctx := context.Background()
	const zone = "Asia/Kolkata" // +05:30: local days are not whole UTC hours
	if _, err := p.Keys.SetPixelTimeZone(ctx, tn.Pixel.ID, zone); err != nil {
		t.Fatal(err)
	}
	loc, _ := time.LoadLocation(zone)
	now := time.Now().UTC()
	old := now.Add(-26 * time.Hour)
	if r := p.Do(t, "POST", "/events", tn.Secret, batch(tn.PixelID(), ev("lead", `,"event_id":"first"`), evAt("lead", old, ``))); r.Status != 202 {
		t.Fatalf("%d %s", r.Status, r.Body)
	}
	r := p.Do(t, "POST", "/events", tn.Secret, batch(tn.PixelID(),
		ev("purchase", `,"event_id":"again"`), ev("purchase", `,"event_id":"again"`),
		ev("purchase", `,"value":1,"currency":"EURO"`), ev("lead", `,"value":1`), ev("lead", `,"event_id":"first"`)))
	if r.Status != 202 {
		t.Fatalf("%d %s", r.Status, r.Body)
	}
	reqID := r.JSON(t)["request_id"].(string)
	accepted := map[string]float64{}
	for _, at := range []time.Time{now.Add(-time.Minute), old, now.Add(-time.Minute)} {
		accepted[at.In(loc).Format(time.DateOnly)]++
	}
	today := now.In(loc).Format(time.DateOnly)
	var got map[string]any
	path := "/pixels/" + tn.PixelID() + "?days=3"
	svctest.WaitFor(t, 20*time.Second, "GET "+path+" counting everything", func() bool {
		got = nil
		if r := p.get(t, tn.Secret, path, &got); r.Status != 200 {
			t.Fatalf("GET %s: %d %s", path, r.Status, r.Body)
		}
		days := got["days"].([]any)
		last := days[len(days)-1].(map[string]any)
		return last["accepted"] == accepted[today] && last["duplicates"] == 2.0 && last["rejected"] == 2.0 && got["lag_seconds"] != nil
	})
	days := got["days"].([]any)
	if len(days) != 3 || got["name"] != tn.Pixel.Name || got["time_zone"] != zone || got["id"] != tn.PixelID() {
		t.Fatalf("GET %s: %v", path, got)
	}
	for i, d := range days {
		d := d.(map[string]any)
		date := now.In(loc).AddDate(0, 0, i-2).Format(time.DateOnly)
		want := map[string]any{"date": date, "accepted": accepted[date], "rejected": 0.0, "duplicates": 0.0, "received": accepted[date], "rejected_by_rule": map[string]any{}}
		if date == today {
			want["rejected"], want["duplicates"], want["received"] = 2.0, 2.0, accepted[date]+4
			want["rejected_by_rule"] = map[string]any{"iso4217": 1.0, "required_with_value": 1.0}
		}
		for k, v := range want {
			if fmt.Sprint(d[k]) != fmt.Sprint(v) {
				t.Errorf("day %d %s: %v, want %v (%v)", i, k, d[k], v, d)
			}
		}
	}
	last, err := time.Parse(time.RFC3339, fmt.Sprint(got["last_accepted_at"]))
	if err != nil || last.Before(now.Add(-2*time.Second)) || time.Since(last) > time.Minute {
		t.Errorf("last_accepted_at %v, want about %v", got["last_accepted_at"], now)
	}
	if lag := got["lag_seconds"].(float64); lag > 30 || got["ingested_through"] == nil {
		t.Errorf("lag_seconds %v, ingested_through %v", lag, got["ingested_through"])
	}
	var b map[string]any
	svctest.WaitFor(t, 20*time.Second, "GET /batches/"+reqID, func() bool {
		b = nil
		return p.get(t, tn.Secret, "/batches/"+reqID, &b).Status == 200 && b["kafka_partition"] != nil
	})
	if got["kafka_partition"] != b["kafka_partition"] {
		t.Errorf("kafka_partition %v, the batch's %v", got["kafka_partition"], b["kafka_partition"])
	}

	// The list: both pixels of the workspace, one a page, each once; none of another's.
	second := p.Pixel(t, tn.Workspace.ID)
	other := p.tenant(t, false)
	seen := map[string]map[string]any{}
	for _, d := range p.walk(t, tn.Secret, "/pixels?days=2", 1) {
		if seen[d["id"].(string)] != nil {
			t.Fatalf("pixel %s twice", d["id"])
		}
		seen[d["id"].(string)] = d
	}
	if len(seen) != 2 || seen[tn.PixelID()] == nil || seen["pxl_"+second.ID.String()] == nil {
		t.Fatalf("listed %v", seen)
	}
	if d := seen["pxl_"+second.ID.String()]; d["name"] != second.Name || len(d["days"].([]any)) != 2 || d["last_accepted_at"] != nil ||
		d["days"].([]any)[1].(map[string]any)["received"] != 0.0 {
		t.Errorf("the idle pixel: %v", d)
	}
	if d := seen[tn.PixelID()]["days"].([]any)[1].(map[string]any); d["received"] != accepted[today]+4 {
		t.Errorf("the list's today: %v", d)
	}
	apitest.Problem(t, p.Do(t, "GET", "/pixels/"+tn.PixelID(), other.Secret, ""), 404, "not_found")
	if all := p.walk(t, other.Secret, "/pixels", 10); len(all) != 1 || all[0]["id"] != other.PixelID() {
		t.Errorf("another workspace's list: %v", all)
	} else if days := all[0]["days"].([]any); len(days) != 7 { // the documented default (pipeline.md)
		t.Errorf("GET /pixels without days: %d days, want 7", len(days))
	}
}

// Bad parameters of GET /pixels and /pixels/{id}: 422 for days and cursor, 404 for an
// id that names no pixel of the workspace, 403 without pixels:read.
func TestPixelsBadInput(t *testing.T) {
	e := newEnv(t)
	tn := e.tenant(t, false)
	one := "/pixels/" + tn.PixelID()
	for path, field := range map[string]string{one + "?days=0": "days", one + "?days=32": "days", "/pixels?days=x": "days",
		"/pixels?cursor=abc": "cursor", "/pixels?limit=0": "limit"} {
		pr := apitest.Problem(t, e.Do(t, "GET", path, tn.Secret, ""), 422, "invalid_request")
		if errs, _ := pr["errors"].([]any); len(errs) == 0 || errs[0].(map[string]any)["field"] != field {
			t.Fatalf("%s: %v, want an error on %s", path, pr, field)
		}
	}
	for _, id := range []string{"pln_" + tn.Pixel.ID.String(), "x", strings.Repeat("0", 32), "pxl_" + tn.Key.ID.String()} {
		apitest.Problem(t, e.Do(t, "GET", "/pixels/"+id, tn.Secret, ""), 404, "not_found")
	}
	var one31 map[string]any
	if r := e.get(t, tn.Secret, one+"?days=31", &one31); r.Status != 200 || len(one31["days"].([]any)) != 31 || one31["kafka_partition"] != nil {
		t.Fatalf("days=31: %d %v", r.Status, one31)
	}
	_, noScope := e.Key(t, workspace.KeySpec{WorkspaceID: tn.Workspace.ID, Env: apikey.Live, Scopes: []string{"events:write"}})
	apitest.Problem(t, e.Do(t, "GET", "/pixels", noScope, ""), 403, "insufficient_scope")
	apitest.Problem(t, e.Do(t, "GET", one, noScope, ""), 403, "insufficient_scope")
}
