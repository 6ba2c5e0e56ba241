package api_test

import (
	"encoding/base64"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/google/uuid"

	"svc/schema/apitest"
)

// TestNoServerErrorOnBadInput sends hostile values to every parameter (each value on
// two routes, rotating) and as every path id and import field: the answer is never 5xx.
func TestNoServerErrorOnBadInput(t *testing.T) {
	e := newEnv(t)
	tn := e.tenant(t, false)
	plan, _ := onePlan(t, e, tn, "bad")
	cur := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	values := []string{"", "'", `\`, "%00", "\x00", "' OR 1=1 --", strings.Repeat("x", 1500), "😀", "-1", "1e9",
		"99999999999999999999", "2026-02-29", "0000-01-01", "9999-12-31", uuid.NewString(), "pln_" + uuid.NewString(),
		cur(`{"l":"plan_actuals","i":"` + uuid.NewString() + `","d":"0001-01-01"}`),
		cur(`{"l":"pixel_rollups","d":"2026-01-01","n":"'\\","c":"\u0000"}`), cur(`{"l":"plans","i":"x"}`), cur("null")}
	paths := []string{"/plans", "/plans/" + plan.String(), "/plans/" + plan.String() + "/lines", "/plans/" + plan.String() + "/actuals",
		"/campaigns", "/campaigns/x/actuals", "/studies", "/findings", "/pixel-rollups?pixel_id=" + tn.PixelID(), "/account", "/me",
		"/pixels", "/pixels/" + tn.PixelID()}
	params := []string{"limit", "cursor", "offset", "status", "channel", "kind", "plan_id", "campaign_id", "study_id", "line_id",
		"metric", "from", "to", "event_name", "pixel_id", "days"}
	for pi, name := range params {
		for vi, v := range values {
			for _, p := range []string{paths[(pi+vi)%len(paths)], paths[(pi*7+vi*3+1)%len(paths)]} {
				sep := "?"
				if strings.Contains(p, "?") {
					sep = "&"
				}
				path := p + sep + name + "=" + url.QueryEscape(v)
				if r := e.Do(t, "GET", path, tn.Secret, ""); r.Status >= 500 {
					t.Fatalf("GET %s: %d %s", path, r.Status, r.Body)
				}
			}
		}
	}
	for _, v := range values[:12] {
		for _, p := range []string{"/plans/", "/campaigns/", "/studies/", "/findings/", "/pixels/", "/batches/"} {
			if r := e.Do(t, "GET", p+url.PathEscape(v), tn.Secret, ""); r.Status >= 500 {
				t.Fatalf("GET %s%q: %d %s", p, v, r.Status, r.Body)
			}
		}
		body := `{"rows":[{"plan_id":"` + plan.String() + `","line_id":` + jsonString(v) + `,"date":` + jsonString(v) +
			`,"spend":` + jsonString(v) + `,"currency":` + jsonString(v) + `}]}`
		if r := e.Do(t, "POST", "/imports/actuals", tn.Secret, body); r.Status >= 500 {
			t.Fatalf("POST %s: %d %s", body, r.Status, r.Body)
		}
	}
}

func jsonString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteString(`\` + string(r))
		case r < 0x20:
			b.WriteString(`\u00` + "0123456789abcdef"[r>>4:r>>4+1] + "0123456789abcdef"[r&15:r&15+1])
		default:
			b.WriteRune(r)
		}
	}
	return b.String() + `"`
}

// TestNoEchoOfContactsOrSecrets: whatever an endpoint quotes of its input (errors[].value,
// a 404's detail), an email or a key's secret sent in any field comes back withheld.
func TestNoEchoOfContactsOrSecrets(t *testing.T) {
	e := newEnv(t)
	tn := e.tenant(t, false)
	plan, _ := onePlan(t, e, tn, "echo")
	for _, v := range []string{"ada@example.com", tn.Secret} {
		answers := map[string][]byte{}
		for _, p := range []string{"/plans/", "/batches/", "/pixels/"} {
			answers["GET "+p] = e.Do(t, "GET", p+url.PathEscape(v), tn.Secret, "").Body
		}
		for i, body := range []string{
			`{"rows":[{"plan_id":` + jsonString(v) + `,"line_id":` + jsonString(v) + `,"date":` + jsonString(v) + `,"currency":` + jsonString(v) + `}]}`,
			`{"rows":[` + jsonString(v) + `]}`,
			`{"rows":[{"plan_id":"` + plan.String() + `","date":"2026-11-01","spend":1,"currency":` + jsonString(v+strings.Repeat("x", 5000)) + `}]}`,
		} {
			r := e.Do(t, "POST", "/imports/actuals", tn.Secret, body)
			if r.Status != 422 || len(r.Body) > 4096 {
				t.Fatalf("POST /imports/actuals #%d: %d, %d bytes", i, r.Status, len(r.Body))
			}
			answers["POST /imports/actuals #"+strconv.Itoa(i)] = r.Body
		}
		for what, body := range answers {
			if strings.Contains(string(body), v) || strings.Contains(string(body), "svc_live_") {
				t.Fatalf("%s echoes %q: %s", what, v, body)
			}
		}
	}
}

// TestDayParameterSaysItsRange: a from/to outside the days the service stores is refused
// with the range in errors[].detail, not only rule date.
func TestDayParameterSaysItsRange(t *testing.T) {
	e := newEnv(t)
	tn := e.tenant(t, false)
	for _, q := range []string{"from=1970-01-01", "to=2106-01-01", "from=2026-02-30"} {
		r := e.Do(t, "GET", "/pixel-rollups?pixel_id="+tn.PixelID()+"&"+q, tn.Secret, "")
		m := apitest.Problem(t, r, 422, "invalid_request")
		e0 := m["errors"].([]any)[0].(map[string]any)
		if e0["rule"] != "date" || !strings.Contains(e0["detail"].(string), "between 1970-01-02 and 2105-12-31") {
			t.Fatalf("%s: errors %v", q, m["errors"])
		}
	}
}

// An id holding an encoded slash or a dot segment names nothing (404): the server
// decodes and resolves them before routing, and "/pixels/..%2Fme" would otherwise be
// served as GET /me (an id a client puts in a path must never steer it elsewhere).
func TestPathIDsDoNotSteer(t *testing.T) {
	e := newEnv(t)
	tn := e.tenant(t, false)
	for _, path := range []string{"/v1/pixels/..%2Fme", "/v1/pixels/..%2fme", "/v1/batches/..%2F..%2Faccount",
		"/v1/pixels/%2e%2e/me", "/v1/pixels/../me", "/v1/plans/.%2E/account", "/v1/pixels/x%5C..%5Cme"} {
		apitest.Problem(t, e.Do(t, "GET", path, tn.Secret, ""), 404, "not_found")
	}
	if r := e.Do(t, "GET", "/v1/me", tn.Secret, ""); r.Status != 200 {
		t.Fatalf("GET /v1/me: %d", r.Status)
	}
}
