package api_test

import (
	"testing"

	"svc/api"
	"svc/lib/apikey"
	"svc/lib/httpserver"
	"svc/schema/apitest"
	"svc/schema/workspace"
)

func TestMeLimitsVersions(t *testing.T) {
	e := newEnv(t)
	w := e.Workspace(t, false)
	k, sec := e.Key(t, workspace.KeySpec{WorkspaceID: w.ID, Env: apikey.Live, Scopes: []string{"events:write"},
		Version: "2026-03-01", Allow: []string{"127.0.0.0/8"}, Burst: 50, Daily: 5000})

	var me api.Me
	if r := e.get(t, sec, "/v1/me", &me); r.Status != 200 {
		t.Fatalf("/me %d %s", r.Status, r.Body)
	}
	if me.ID != "key_"+k.ID.String() || me.IDUUID != k.ID.String() || me.Environment != "live" || me.Status != "active" ||
		me.WorkspaceID != "org_"+w.ID.String() || me.WorkspaceIDUUID != w.ID.String() || me.WorkspaceName != w.Name ||
		len(me.Scopes) != 1 || me.PinnedVersion == nil || *me.PinnedVersion != "2026-03-01" || me.Version != "2026-03-01" ||
		len(me.Allow) != 1 || me.Allow[0] != "127.0.0.0/8" || me.ExpiresAt != nil || len(me.Limits) != 2 {
		t.Fatalf("/me = %+v", me)
	}

	var lim api.Limits
	if r := e.get(t, sec, "/limits", &lim); r.Status != 200 {
		t.Fatalf("/limits %d %s", r.Status, r.Body)
	}
	b, d := lim.Windows[0], lim.Windows[1]
	if b.Name != "burst" || b.Quota != 50 || b.WindowSeconds != 60 || b.Scope != "key" || b.Remaining != 48 ||
		d.Name != "daily" || d.Quota != 5000 || d.WindowSeconds != 86400 || d.Remaining != 4998 || d.Scope != "key" ||
		lim.Policy != `"burst";q=50;w=60, "daily";q=5000;w=86400` {
		t.Fatalf("/limits = %+v (two requests spent so far)", lim)
	}

	var v api.Versions
	if r := e.get(t, sec, "/versions?version=next", &v); r.Status != 200 {
		t.Fatalf("/versions %d %s", r.Status, r.Body)
	}
	if len(v.Data) != len(httpserver.Served) || v.Aliases["stable"] != httpserver.Stable || v.Aliases["next"] != httpserver.Next ||
		v.Current != httpserver.Next {
		t.Fatalf("/versions = %+v", v)
	}
	for i, d := range v.Data { // each served version as GET /versions documents it
		if d != httpserver.Served[i] || d.Version == "" || d.Released == "" || (d.Status != "stable" && d.Status != "deprecated" && d.Status != "preview") {
			t.Fatalf("/versions data[%d] = %+v, want %+v", i, d, httpserver.Served[i])
		}
	}
	apitest.Problem(t, e.Do(t, "GET", "/me", "", ""), 401, "unauthorized")
	apitest.Problem(t, e.Do(t, "GET", "/limits", "svc_live_nope", ""), 401, "invalid_key")
}

func TestScopesAreEnforced(t *testing.T) {
	e := newEnv(t)
	w := e.Workspace(t, false)
	_, sec := e.Key(t, workspace.KeySpec{WorkspaceID: w.ID, Env: apikey.Live, Scopes: []string{"events:write"}})
	for _, c := range []struct{ method, path, scope string }{
		{"GET", "/account", "account:read"},
		{"GET", "/plans", "plans:read"},
		{"GET", "/plans/pln_00000000-0000-0000-0000-000000000001", "plans:read"},
		{"GET", "/plans/x/lines", "plans:read"},
		{"GET", "/plans/x/actuals", "plans:read"},
		{"GET", "/campaigns", "campaigns:read"},
		{"GET", "/campaigns/x", "campaigns:read"},
		{"GET", "/campaigns/x/actuals", "campaigns:read"},
		{"GET", "/studies", "studies:read"},
		{"GET", "/studies/x", "studies:read"},
		{"GET", "/findings", "studies:read"},
		{"GET", "/findings/x", "studies:read"},
		{"GET", "/pixel-rollups?pixel_id=x", "pixels:read"},
		{"POST", "/imports/actuals", "actuals:write"},
	} {
		body := ""
		if c.method == "POST" {
			body = `{"rows":[]}`
		}
		p := apitest.Problem(t, e.Do(t, c.method, c.path, sec, body), 403, "insufficient_scope")
		if p["required_scope"] != c.scope {
			t.Errorf("%s %s: required_scope %v, want %s", c.method, c.path, p["required_scope"], c.scope)
		}
	}
	for _, path := range []string{"/me", "/limits", "/versions"} {
		if r := e.Do(t, "GET", path, sec, ""); r.Status != 200 {
			t.Errorf("%s needs only a valid key: %d %s", path, r.Status, r.Body)
		}
	}
}
