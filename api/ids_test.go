package api_test

import (
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/google/uuid"

	"svc/lib/apikey"
	"svc/lib/ids"
	"svc/lib/problem"
	"svc/schema/apitest"
	"svc/schema/workspace"
)

// kinds are every id prefix the API issues.
var kinds = []ids.Prefix{ids.Org, ids.Pixel, ids.Plan, ids.Line, ids.Campaign, ids.Study, ids.Finding,
	ids.Key, ids.Endpoint, ids.Event, ids.Erasure}

// idRoute is one place the read API takes an id from a client: the request for a given
// id value, the answer a malformed id gets, and for a 422 the errors[] entry's field.
type idRoute struct {
	kind         ids.Prefix
	method, path string // path holds %s where the id goes (in the body for a POST)
	body         string
	status       int
	code, field  string
}

// TestIDOfAnotherKindIsAnsweredAsMalformed: on every route that takes an id (path,
// query parameter, body field), an id of another kind (pln_<uuid> where a pixel id is
// expected) is answered exactly as a malformed id: 404 not_found for an id in the path,
// 422 invalid_request with an errors[] entry (field, rule "id", the value sent) for a
// parameter or a body field; never 5xx. Every answer is a 4xx, so none spends quota: a
// key with a quota of 5 makes all of them and still has its 5 daily requests.
func TestIDOfAnotherKindIsAnsweredAsMalformed(t *testing.T) {
	e := newEnv(t)
	tn := e.tenant(t, false)
	plan, _ := onePlan(t, e, tn, "kinds")
	_, secret := e.Key(t, workspace.KeySpec{WorkspaceID: tn.Workspace.ID, Env: apikey.Live, Burst: 5, Daily: 5})
	pl := ids.Format(ids.Plan, plan)
	routes := []idRoute{
		{ids.Plan, "GET", "/plans/%s", "", 404, "not_found", ""},
		{ids.Plan, "GET", "/plans/%s/lines", "", 404, "not_found", ""},
		{ids.Plan, "GET", "/plans/%s/actuals", "", 404, "not_found", ""},
		{ids.Campaign, "GET", "/campaigns/%s", "", 404, "not_found", ""},
		{ids.Campaign, "GET", "/campaigns/%s/actuals", "", 404, "not_found", ""},
		{ids.Study, "GET", "/studies/%s", "", 404, "not_found", ""},
		{ids.Finding, "GET", "/findings/%s", "", 404, "not_found", ""},
		{ids.Erasure, "GET", "/erasures/%s", "", 404, "not_found", ""},
		{ids.Pixel, "GET", "/pixels/%s", "", 404, "not_found", ""},
		{ids.Pixel, "GET", "/pixel-rollups?pixel_id=%s", "", 422, "invalid_request", "pixel_id"},
		{ids.Plan, "GET", "/campaigns?plan_id=%s", "", 422, "invalid_request", "plan_id"},
		{ids.Campaign, "GET", "/studies?campaign_id=%s", "", 422, "invalid_request", "campaign_id"},
		{ids.Study, "GET", "/findings?study_id=%s", "", 422, "invalid_request", "study_id"},
		{ids.Line, "GET", "/plans/" + pl + "/actuals?line_id=%s", "", 422, "invalid_request", "line_id"},
		{ids.Plan, "POST", "/imports/actuals", `{"rows":[{"plan_id":"%s","line_id":"lin_` + uuid.NewString() +
			`","date":"2026-09-14","currency":"EUR"}]}`, 422, "invalid_request", "rows[0].plan_id"},
		{ids.Line, "POST", "/imports/actuals", `{"rows":[{"plan_id":"` + pl +
			`","line_id":"%s","date":"2026-09-14","currency":"EUR"}]}`, 422, "invalid_request", "rows[0].line_id"},
	}
	for _, rt := range routes {
		values := []string{string(rt.kind) + "nope", "x_" + uuid.NewString()} // malformed, then unknown kinds
		for _, k := range kinds {
			if k != rt.kind {
				values = append(values, string(k)+uuid.NewString())
			}
		}
		for _, v := range values {
			rt.check(t, e, secret, v)
		}
	}
	var lim struct {
		Limits []struct {
			Name      string `json:"name"`
			Remaining int    `json:"remaining"`
		} `json:"limits"`
	}
	if r := e.get(t, secret, "/limits", &lim); r.Status != 200 {
		t.Fatalf("GET /limits after the refused requests: %d %s", r.Status, r.Body)
	}
	daily := false
	for _, l := range lim.Limits {
		if l.Name == "daily" {
			daily = true
			if l.Remaining != 4 { // this GET /limits took one
				t.Fatalf("after only 4xx answers the daily window has %d left, want 4: %+v", l.Remaining, lim)
			}
		}
	}
	if !daily {
		t.Fatalf("GET /limits names no daily window: %+v", lim)
	}
}

// check sends v where rt takes an id and checks the answer.
func (rt idRoute) check(t *testing.T, e *env, secret, v string) {
	t.Helper()
	path, body := rt.path, rt.body
	if body != "" {
		body = fmt.Sprintf(body, v)
	} else if strings.Contains(path, "?") {
		path = fmt.Sprintf(path, url.QueryEscape(v))
	} else {
		path = fmt.Sprintf(path, url.PathEscape(v))
	}
	r := e.Do(t, rt.method, path, secret, body)
	if r.Status != rt.status {
		t.Errorf("%s %s %s: %d %s, want %d %s", rt.method, path, body, r.Status, r.Body, rt.status, rt.code)
		return
	}
	m := apitest.Problem(t, r, rt.status, rt.code)
	if rt.field == "" {
		return
	}
	errs, _ := m["errors"].([]any)
	if len(errs) != 1 {
		t.Errorf("%s %s %s: errors %v, want one entry for %s", rt.method, path, body, m["errors"], rt.field)
		return
	}
	if fe := errs[0].(map[string]any); fe["field"] != rt.field || fe["rule"] != "id" || fe["value"] != v {
		t.Errorf("%s %s %s: errors[0] = %v, want field %s, rule id, value %q", rt.method, path, body, fe, rt.field, v)
	}
}

// An id parameter's errors[].value is what the answer may echo (problem.Echo): a value
// holding an '@' is withheld, a long one cut to 64 bytes and "…"; the pixel_id of
// GET /pixel-rollups (workspace.InvalidID) and the other lists' id parameters alike.
func TestIDValuesEchoedWithoutContactDetails(t *testing.T) {
	e := newEnv(t)
	tn := e.tenant(t, false)
	long := strings.Repeat("x", 100)
	for _, path := range []string{"/pixel-rollups?pixel_id=%s", "/campaigns?plan_id=%s"} {
		for v, want := range map[string]string{"ada@example.com": problem.WithheldEcho, long: long[:64] + "…"} {
			p := fmt.Sprintf(path, url.QueryEscape(v))
			m := apitest.Problem(t, e.Do(t, "GET", p, tn.Secret, ""), 422, "invalid_request")
			errs, _ := m["errors"].([]any)
			if len(errs) != 1 || errs[0].(map[string]any)["value"] != want {
				t.Errorf("GET %s: errors %v, want one entry with value %q", p, m["errors"], want)
			}
		}
	}
}
