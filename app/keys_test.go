package app

import (
	"context"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"svc/lib/apikey"
	"svc/lib/ids"
	"svc/schema/workspace"
)

var secretRE = regexp.MustCompile(`id="secret" type="text" readonly value="([^"]+)"`)

func secretOf(t *testing.T, p answer) string {
	t.Helper()
	m := secretRE.FindStringSubmatch(p.Body)
	if p.Status != 201 || m == nil {
		t.Fatalf("no secret shown: %d\n%s", p.Status, p.Body)
	}
	return m[1]
}

// The keys screens change keys through the workspace store: create (the secret shown
// once, working), rotate with an overlap, change limits, revoke; each in the audit log.
// A viewer sees without forms and is refused a change; another workspace's key is 404.
func TestKeysScreens(t *testing.T) {
	rg := newRig(t, false)
	ctx := context.Background()
	ws, other := rg.Workspace(t, false), rg.Workspace(t, false)
	px := rg.Pixel(t, ws.ID)
	adm := rg.member(t, ws, uniqueEmail("admin"), RoleAdmin)

	p := adm.post("/app/api-keys", "/app/api-keys", url.Values{"scope": {"events:write", "pixels:read"}, "burst": {"100"}, "daily": {"1000"},
		"allow": {""}, "version": {""}, "expires": {""}})
	secret := secretOf(t, p)
	k, _, err := rg.Keys.Authenticate(ctx, secret)
	if err != nil || k.WorkspaceID != ws.ID || k.Env != apikey.Live || k.Burst != 100 || k.Daily != 1000 || len(k.Scopes) != 2 {
		t.Fatalf("the new key: %+v %v", k, err)
	}
	kid := ids.Format(ids.Key, k.ID)
	curl := "curl -i -X POST " + rg.URL + "/v1/events -H &#39;Authorization: Bearer " + secret
	if !strings.Contains(p.Body, curl) || !strings.Contains(p.Body, ids.Format(ids.Pixel, px.ID)) || p.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("the curl line:\n%s", p.Body)
	}
	if p := adm.get("/app/api-keys"); !strings.Contains(p.Body, kid) || !strings.Contains(p.Body, "100 of 100 left") || strings.Contains(p.Body, secret) {
		t.Fatalf("the list:\n%s", p.Body)
	}
	// A refused form keeps its values and says why.
	if p := adm.post("/app/api-keys", "/app/api-keys", url.Values{"scope": {"events:write"}, "burst": {"0"}, "daily": {"10"}, "allow": {"nope"}}); p.Status != 422 ||
		!strings.Contains(p.Body, "burst limit") {
		t.Fatalf("a bad form: %d\n%s", p.Status, p.Body)
	}
	// A quota past what the windows' arithmetic holds exactly is refused, not stored.
	if p := adm.post("/app/api-keys", "/app/api-keys", url.Values{"scope": {"events:write"}, "burst": {"10"}, "daily": {"9223372036854775807"}}); p.Status != 422 ||
		!strings.Contains(p.Body, "daily limit") {
		t.Fatalf("a daily limit of 2^63-1: %d\n%s", p.Status, p.Body)
	}

	// Rotate: a new secret at once, the old one until its cutover.
	p = adm.post("/app/api-keys/"+kid, "/app/api-keys/"+kid+"/rotate", url.Values{"overlap": {"1h"}})
	secret2 := secretOf(t, p)
	fresh := workspace.NewStore(rg.Redis) // no cache from before the rotation
	if _, sec, err := fresh.Authenticate(ctx, secret); err != nil || sec.CutoverAt == nil {
		t.Fatalf("the old secret: %+v %v", sec, err)
	}
	if k2, _, err := rg.Keys.Authenticate(ctx, secret2); err != nil || k2.ID != k.ID {
		t.Fatalf("the new secret: %v", err)
	}
	// Limits.
	if p := adm.post("/app/api-keys/"+kid, "/app/api-keys/"+kid+"/limits", url.Values{"burst": {"5"}, "daily": {"50"}}); p.Status != 303 {
		t.Fatalf("limits: %d %s", p.Status, p.Body)
	}
	if k, _ := rg.Keys.Key(ctx, k.ID); k.Burst != 5 || k.Daily != 50 {
		t.Fatalf("limits not changed: %+v", k)
	}
	if p := adm.post("/app/api-keys/"+kid, "/app/api-keys/"+kid+"/limits", url.Values{"burst": {"1000000001"}, "daily": {"50"}}); p.Status != 422 {
		t.Fatalf("a burst over 1,000,000,000: %d", p.Status)
	}

	// A viewer sees the key, has no forms, and is refused a change.
	vw := rg.member(t, ws, uniqueEmail("viewer"), RoleViewer)
	if p := vw.get("/app/api-keys/" + kid); p.Status != 200 || strings.Contains(p.Body, "Revoke key") || strings.Contains(p.Body, "Create key") {
		t.Fatalf("a viewer's page: %d\n%s", p.Status, p.Body)
	}
	if p := vw.post("/app/api-keys", "/app/api-keys/"+kid+"/revoke", url.Values{"confirm": {"yes"}}); p.Status != 403 {
		t.Fatalf("a viewer's revoke: %d", p.Status)
	}
	// Another workspace's key, an unknown one and a malformed id: the same 404.
	ok, _ := rg.Key(t, workspace.KeySpec{WorkspaceID: other.ID, Env: apikey.Live})
	for _, id := range []string{ids.Format(ids.Key, ok.ID), ids.Format(ids.Key, ids.New()), "key_nope", ids.Format(ids.Pixel, px.ID)} {
		if p := adm.get("/app/api-keys/" + id); p.Status != 404 {
			t.Fatalf("GET key %s: %d", id, p.Status)
		}
		if p := adm.post("/app/api-keys", "/app/api-keys/"+id+"/revoke", url.Values{"confirm": {"yes"}}); p.Status != 404 {
			t.Fatalf("revoke %s: %d", id, p.Status)
		}
	}
	if k, _ := rg.Keys.Key(ctx, ok.ID); k.RevokedAt != nil {
		t.Fatal("another workspace's key was revoked")
	}
	// Revoke needs its confirmation, then takes effect.
	if p := adm.post("/app/api-keys/"+kid, "/app/api-keys/"+kid+"/revoke", url.Values{}); p.Status != 422 {
		t.Fatalf("revoke unconfirmed: %d", p.Status)
	}
	for i := 0; i < 2; i++ { // the second finds it revoked: no change, no entry in the audit log
		if p := adm.post("/app/api-keys/"+kid, "/app/api-keys/"+kid+"/revoke", url.Values{"confirm": {"yes"}}); p.Status != 303 {
			t.Fatalf("revoke %d: %d", i+1, p.Status)
		}
	}
	if k, _ := rg.Keys.Key(ctx, k.ID); k.RevokedAt == nil {
		t.Fatal("not revoked")
	}
	if p := adm.get("/app/api-keys/" + kid); !strings.Contains(p.Body, `id="key-state">revoked`) || strings.Contains(p.Body, "Rotate") {
		t.Fatalf("a revoked key's page:\n%s", p.Body)
	}
	es, err := rg.app.Audit.List(ctx, ws.ID, 50)
	if err != nil {
		t.Fatal(err)
	}
	var actions []string
	for _, e := range es {
		if e.Target == kid {
			actions = append(actions, e.Action)
			if e.Address != "127.0.0.1" || !strings.Contains(e.Who, "admin-") {
				t.Fatalf("entry %+v", e)
			}
		}
	}
	if strings.Join(actions, ",") != "key revoke,key set-limits,key rotate,key create" {
		t.Fatalf("audit: %v", actions)
	}
}
