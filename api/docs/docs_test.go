package docs_test

import (
	"fmt"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"

	json "github.com/goccy/go-json"

	"svc/api"
	"svc/api/docs"
	"svc/api/mcp"
	"svc/ingest"
	"svc/lib/apikey"
	"svc/lib/httpserver"
	"svc/lib/problem"
	"svc/schema/apitest"
	"svc/schema/workspace"
	"svc/webhooks"
)

// devRoutes is the route set `svc dev` serves (main.go's devMain): health, the ingest
// edge, the webhooks receiver, the read API, the docs and the MCP endpoint. Only the
// routes' declarations are used; their handlers are never called here.
func devRoutes() []httpserver.Route {
	var rs []httpserver.Route
	rs = append(rs, httpserver.HealthRoutes()...)
	rs = append(rs, (&ingest.Edge{}).Routes()...)
	rs = append(rs, (&webhooks.Inbound{}).Route())
	rs = append(rs, (&api.API{}).Routes()...)
	rs = append(rs, docs.Routes()...)
	rs = append(rs, mcp.New().Routes()...)
	return rs
}

func TestOpenAPICoversExactlyTheServedRoutes(t *testing.T) {
	routes := devRoutes()
	served := map[string]bool{}
	for _, r := range routes {
		k := docs.Key(r)
		if served[k] {
			t.Errorf("%s is served twice", k)
		}
		served[k] = true
		if _, ok := docs.Operations[k]; !ok {
			t.Errorf("served route %s has no entry in docs.Operations", k)
		}
	}
	doc := docs.OpenAPI(routes, "https://httpserver.example.com")
	named := map[string]bool{}
	for path, item := range doc["paths"].(map[string]any) {
		for m := range item.(map[string]any) {
			named[strings.ToUpper(m)+" "+path] = true
		}
	}
	for k := range served {
		if !named[k] {
			t.Errorf("served route %s is missing from the OpenAPI document", k)
		}
	}
	for k := range named {
		if !served[k] {
			t.Errorf("the OpenAPI document names %s, which is not served", k)
		}
	}
	var stale []string
	for k := range docs.Operations {
		if !served[k] {
			stale = append(stale, k)
		}
	}
	sort.Strings(stale)
	if len(stale) > 0 {
		t.Errorf("docs.Operations documents routes nothing serves: %v", stale)
	}
}

func TestEveryOperationDeclaresScopeLimitsAndProblems(t *testing.T) {
	doc := docs.OpenAPI(devRoutes(), "https://httpserver.example.com")
	opIDs := map[string]bool{}
	for path, item := range doc["paths"].(map[string]any) {
		for m, o := range item.(map[string]any) {
			op := o.(map[string]any)
			where := strings.ToUpper(m) + " " + path
			declared := map[string]bool{}
			ps, _ := op["parameters"].([]any)
			for _, p := range ps {
				if pm := p.(map[string]any); pm["in"] == "path" {
					declared[pm["name"].(string)] = true
				}
			}
			for _, m := range pathParam.FindAllStringSubmatch(path, -1) {
				if !declared[m[1]] {
					t.Errorf("%s: path parameter %s is not declared", where, m[1])
				}
				delete(declared, m[1])
			}
			if len(declared) > 0 {
				t.Errorf("%s: path parameters %v are not in the path", where, declared)
			}
			if id, _ := op["operationId"].(string); id == "" || opIDs[id] {
				t.Errorf("%s: operationId %q missing or not unique", where, id)
			} else {
				opIDs[id] = true
			}
			sec := op["security"].([]any)
			if len(sec) == 0 {
				if op["x-rateLimit"] != nil {
					t.Errorf("%s: public operation with x-rateLimit", where)
				}
				continue
			}
			rl, ok := op["x-rateLimit"].(map[string]any)
			if !ok {
				t.Errorf("%s: no x-rateLimit", where)
				continue
			}
			if errs := docs.Validate(docs.Schema{"$ref": "#/components/schemas/RateLimit"}, roundTrip(t, rl), docs.Components()); len(errs) > 0 {
				t.Errorf("%s: x-rateLimit: %v", where, errs)
			}
			resp := op["responses"].(map[string]any)
			for _, st := range []string{"401", "403", "429", "500"} {
				if _, ok := resp[st]; !ok {
					t.Errorf("%s: no %s problem response", where, st)
				}
			}
		}
	}
}

func roundTrip(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestExamplesMatchTheirSchemas(t *testing.T) {
	doc := docs.OpenAPI(devRoutes(), "https://httpserver.example.com")
	exs := docs.Examples(doc)
	if len(exs) < 50 {
		t.Fatalf("only %d examples found", len(exs))
	}
	comps := docs.Components()
	for _, ex := range exs {
		if errs := docs.Validate(ex.Schema, roundTrip(t, ex.Value), comps); len(errs) > 0 {
			t.Errorf("%s: %v", ex.Where, errs)
		}
	}
	// The validator itself rejects what it should.
	bad := map[string]any{"pixel_id": 7, "events": []any{}}
	if errs := docs.Validate(docs.Schema{"$ref": "#/components/schemas/Batch"}, roundTrip(t, bad), comps); len(errs) < 2 {
		t.Errorf("a bad batch passed the schema: %v", errs)
	}
	// An inbound message with the other type's shape does not pass.
	swapped := map[string]any{"type": "campaign.actuals", "data": map[string]any{"campaign_id": "cmp_9e3f4a5b-6c7d-4e8f-a01b-2c3d4e5f6071",
		"currency": "EUR", "days": []any{map[string]any{"date": "2026-09-14"}}}}
	if errs := docs.Validate(docs.Schema{"$ref": "#/components/schemas/InboundMessage"}, roundTrip(t, swapped), comps); len(errs) == 0 {
		t.Error("a campaign.actuals message with actuals.reported's shape passed the schema")
	}
}

func TestDocumentIsJSONAndStable(t *testing.T) {
	a, errA := json.Marshal(docs.OpenAPI(devRoutes(), "https://x"))
	b, errB := json.Marshal(docs.OpenAPI(devRoutes(), "https://x"))
	if errA != nil || errB != nil || len(a) == 0 || !json.Valid(a) {
		t.Fatalf("the document is not JSON: %v %v (%d bytes)", errA, errB, len(a))
	}
	if string(a) != string(b) {
		t.Fatal("two builds of the document differ")
	}
}

// startDocs serves the docs routes plus a scoped and an unscoped non-public route.
func startDocs(t *testing.T) *apitest.Server {
	cl, err := os.ReadFile("../../CHANGELOG.md")
	if err != nil {
		t.Fatal(err)
	}
	docs.UseChangelog(cl)
	extra := []httpserver.Route{{Method: "GET", Path: "/plans", Scope: "plans:read", Summary: "Plans.",
		Handle: func(r *httpserver.Request) error {
			return r.JSON(200, map[string]any{"data": []any{}, "meta": map[string]any{"next_cursor": nil}})
		}}}
	return apitest.Start(t, append(docs.Routes(), extra...), nil)
}

func TestEveryCodeHasItsPageAtTheProblemsURL(t *testing.T) {
	s := startDocs(t)
	// A real problem document names its page.
	r := s.Do(t, "GET", "/v1/plans", "", "")
	p := apitest.Problem(t, r, 401, "unauthorized")
	page := p["type"].(string)
	if page != docs.ErrorPageURL(s.URL, problem.Unauthorized) {
		t.Fatalf("type %s, want %s", page, docs.ErrorPageURL(s.URL, problem.Unauthorized))
	}
	for _, c := range problem.Codes() {
		pr := problem.New(c, "x")
		pr.Finish(s.API.Config.DocsURL(), "req_x")
		if pr.Type != docs.ErrorPageURL(s.URL, c) || pr.DocURL != pr.Type {
			t.Errorf("%s: problem names %s, page is at %s", c, pr.Type, docs.ErrorPageURL(s.URL, c))
		}
		got := s.Do(t, "GET", strings.TrimPrefix(pr.Type, s.URL), "", "")
		if got.Status != 200 || !strings.HasPrefix(got.Header.Get("Content-Type"), "text/html") {
			t.Errorf("%s: GET %s: %d %s", c, pr.Type, got.Status, got.Header.Get("Content-Type"))
			continue
		}
		e := problem.Table[c]
		for _, want := range []string{string(c), e.Title} {
			if !strings.Contains(string(got.Body), htmlEscape(want)) {
				t.Errorf("%s: page lacks %q", c, want)
			}
		}
		if strings.Contains(string(got.Body), "raw HTML omitted") {
			t.Errorf("%s: page text was taken for HTML", c)
		}
		md := s.Do(t, "GET", "/developers/md/errors/"+string(c)+".md", "", "")
		if md.Status != 200 || !strings.HasPrefix(md.Header.Get("Content-Type"), "text/markdown") {
			t.Errorf("%s: markdown mirror: %d", c, md.Status)
		}
		if !strings.Contains(strings.ReplaceAll(string(md.Body), `\<`, "<"), e.SuggestedAction) {
			t.Errorf("%s: mirror lacks the suggested action", c)
		}
	}
	if r := s.Do(t, "GET", "/developers/errors/no_such_code", "", ""); r.Status != 404 {
		t.Errorf("unknown code page: %d", r.Status)
	}
}

func htmlEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;", "'", "&#39;").Replace(s)
}

var pathParam = regexp.MustCompile(`\{([^}]+)\}`)

var scriptTag = regexp.MustCompile(`(?i)<script`)

func TestPagesAndTheirMarkdownMirror(t *testing.T) {
	s := startDocs(t)
	for _, pg := range docs.Pages {
		path := "/developers/" + pg.Name
		if pg.Name == "index" {
			path = "/developers"
		}
		h := s.Do(t, "GET", path, "", "")
		if h.Status != 200 || !strings.HasPrefix(h.Header.Get("Content-Type"), "text/html") {
			t.Errorf("%s: %d %s", path, h.Status, h.Header.Get("Content-Type"))
			continue
		}
		if scriptTag.Match(h.Body) || strings.Contains(string(h.Body), "raw HTML omitted") {
			t.Errorf("%s uses JavaScript", path)
		}
		if h.Header.Get("RateLimit-Policy") == "" || h.Header.Get("Request-Id") == "" {
			t.Errorf("%s: missing common headers", path)
		}
		md := s.Do(t, "GET", "/developers/md/"+pg.Name+".md", "", "")
		if md.Status != 200 || !strings.HasPrefix(md.Header.Get("Content-Type"), "text/markdown") {
			t.Errorf("mirror of %s: %d", pg.Name, md.Status)
		}
		if regexp.MustCompile(`\{\{[A-Z]+\}\}`).Match(md.Body) {
			t.Errorf("mirror of %s has an unfilled placeholder", pg.Name)
		}
	}
	page := func(name string) string { return string(s.Do(t, "GET", "/developers/md/"+name+".md", "", "").Body) }
	if ev := page("events"); !strings.Contains(ev, "b5fc85e55755f9e0d030a10ab4429b6b2944855f9a0d60077fe832becbc41d72") || !strings.Contains(ev, "ada@example.com") {
		t.Error("events page lacks the SHA-256 test vector")
	}
	if wh := page("webhooks"); !strings.Contains(wh, "SVC-Signature: t=") || !strings.Contains(wh, "hmac.Equal") || !strings.Contains(wh, "300") {
		t.Error("webhooks page lacks the scheme or the verification code")
	}
	if gs := page("getting-started"); !strings.Contains(gs, "curl") || !strings.Contains(gs, "/events") || !strings.Contains(gs, "Idempotency-Key") {
		t.Error("getting started lacks the curl walk-through")
	}
	for _, c := range problem.Codes() {
		if !strings.Contains(page("errors"), "/developers/errors/"+string(c)) {
			t.Errorf("errors page does not link %s", c)
		}
	}
	if r := s.Do(t, "GET", "/developers/md/nothing.md", "", ""); r.Status != 404 {
		t.Errorf("unknown page mirror: %d", r.Status)
	}
}

// TestMirrorIndex: /developers/md/ (and /developers/md) answers the mirror's index,
// which links every page and every error page, each of which resolves.
func TestMirrorIndex(t *testing.T) {
	s := startDocs(t)
	for _, path := range []string{"/developers/md/", "/developers/md"} {
		r := s.Do(t, "GET", path, "", "")
		if r.Status != 200 || !strings.HasPrefix(r.Header.Get("Content-Type"), "text/markdown") {
			t.Fatalf("GET %s: %d %s", path, r.Status, r.Header.Get("Content-Type"))
		}
	}
	idx := string(s.Do(t, "GET", "/developers/md/", "", "").Body)
	links := regexp.MustCompile(`\]\((`+regexp.QuoteMeta(s.URL)+`/developers/md/[^)]+)\)`).FindAllStringSubmatch(idx, -1)
	if want := len(docs.Pages) + len(problem.Codes()); len(links) != want {
		t.Fatalf("the index links %d pages, want %d:\n%s", len(links), want, idx)
	}
	for _, l := range links {
		if r := s.Do(t, "GET", strings.TrimPrefix(l[1], s.URL), "", ""); r.Status != 200 {
			t.Errorf("index link %s: %d", l[1], r.Status)
		}
	}
	if r := s.Do(t, "GET", "/developers/", "", ""); r.Status != 200 || !strings.HasPrefix(r.Header.Get("Content-Type"), "text/html") {
		t.Errorf("GET /developers/: %d", r.Status)
	}
}

// The spec's list of additive changes (Versioning, rule 5), each of which the changelog
// must carry as added and unversioned.
var specAdditive = []string{
	"Prefixed public ids", "Cursor paging on daily pixel rollups", "`doc_url`, `retryable` and `errors[]` on problem responses",
	"`RateLimit-Policy` header and the daily quota window", "`GET /limits`", "`x-rateLimit`", "Discovery document",
	"Inbound webhook processing of delivered performance", "Cursor pagination (`meta.next_cursor`) on list endpoints",
	"`POST /imports/actuals`", "Outbound and inbound webhooks with HMAC-SHA256 signatures", "`POST /events`",
}

func TestChangelogPage(t *testing.T) {
	s := startDocs(t)
	md := string(s.Do(t, "GET", "/developers/md/changelog.md", "", "").Body)
	added := strings.Index(md, "## Added, unversioned")
	if added < 0 {
		t.Fatal("changelog has no 'Added, unversioned' section")
	}
	section := md[added:]
	for _, item := range specAdditive {
		if !strings.Contains(section, item) {
			t.Errorf("changelog lacks the additive change %q under Added, unversioned", item)
		}
	}
	for _, c := range problem.Codes() {
		if problem.Table[c].Added && !strings.Contains(section, "`"+string(c)+"`") {
			t.Errorf("added code %s is not in the changelog", c)
		}
	}
	for _, want := range []string{"Offset pagination", "deprecated", "2026-09-01", "2027-09-01", "Deprecation", "Sunset"} {
		if !strings.Contains(md, want) {
			t.Errorf("changelog lacks %q (offset-paging deprecation)", want)
		}
	}
	h := s.Do(t, "GET", "/developers/changelog", "", "")
	if h.Status != 200 || !strings.Contains(string(h.Body), "Added, unversioned") {
		t.Errorf("changelog HTML: %d", h.Status)
	}
}

// TestDiscoveryNeedsAKeyAndDescribesIt: the discovery document answers 401 without a
// key, and with one carries that key's own windows (after this request, which spent
// one), policy and granted scopes besides the service-wide facts.
func TestDiscoveryNeedsAKeyAndDescribesIt(t *testing.T) {
	s := startDocs(t)
	apitest.Problem(t, s.Do(t, "GET", "/.well-known/svc", "", ""), 401, "unauthorized")
	tn := s.Tenant(t, false)
	k, sec := s.Key(t, workspace.KeySpec{WorkspaceID: tn.Workspace.ID, Env: apikey.Live, Burst: 77, Daily: 7777,
		Scopes: []string{"pixels:read"}})
	r := s.Do(t, "GET", "/v1/.well-known/svc", sec, "")
	if r.Status != 200 {
		t.Fatalf("discovery with a key: %d %s", r.Status, r.Body)
	}
	d := r.JSON(t)
	lim := d["limits"].(map[string]any)
	if lim["policy"] != `"burst";q=77;w=60, "daily";q=7777;w=86400` || lim["policy"] != r.Header.Get("RateLimit-Policy") {
		t.Errorf("limits.policy %v (header %q)", lim["policy"], r.Header.Get("RateLimit-Policy"))
	}
	w := lim["windows"].([]any)
	if b := w[0].(map[string]any); b["name"] != "burst" || b["quota"] != float64(77) || b["remaining"] != float64(76) {
		t.Errorf("burst window %v, want quota 77 with 76 left", b)
	}
	if lim["default_policy"] != `"burst";q=120;w=60, "daily";q=10000;w=86400` {
		t.Errorf("default_policy %v", lim["default_policy"])
	}
	// One name for one thing: a window's length is window_seconds, as in GET /limits;
	// seconds stays beside it for the clients that read it.
	for _, list := range []string{"windows", "default_windows"} {
		for i, v := range lim[list].([]any) {
			win, want := v.(map[string]any), []float64{60, 86400}[i]
			if win["window_seconds"] != want || win["seconds"] != want {
				t.Errorf("limits.%s[%d]: window_seconds %v, seconds %v; want both %v", list, i, win["window_seconds"], win["seconds"], want)
			}
		}
	}
	key := d["key"].(map[string]any)
	if key["id"] != "key_"+k.ID.String() || key["environment"] != "live" || fmt.Sprint(key["granted_scopes"]) != "[pixels:read]" {
		t.Errorf("key %v", key)
	}
	if d["base_url"] != s.URL+"/v1" || len(d["scopes"].([]any)) != len(apikey.Scopes) {
		t.Errorf("service-wide facts: base_url %v, scopes %v", d["base_url"], d["scopes"])
	}
}

func TestDiscoveryLinksResolve(t *testing.T) {
	s := startDocs(t)
	tn := s.Tenant(t, false)
	r := s.Do(t, "GET", "/.well-known/svc", tn.Secret, "")
	if r.Status != 200 || r.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("discovery: %d %s", r.Status, r.Header.Get("Content-Type"))
	}
	d := r.JSON(t)
	comps := docs.Components()
	if errs := docs.Validate(docs.Schema{"$ref": "#/components/schemas/Discovery"}, roundTrip(t, d), comps); len(errs) > 0 {
		t.Fatalf("discovery document: %v", errs)
	}
	if d["base_url"] != s.URL+"/v1" || d["openapi"] != s.URL+"/openapi.json" {
		t.Errorf("base_url %v openapi %v", d["base_url"], d["openapi"])
	}
	if d["mcp"].(map[string]any)["endpoint"] != s.URL+"/mcp" {
		t.Errorf("mcp endpoint %v", d["mcp"])
	}
	if len(d["scopes"].([]any)) != 8 {
		t.Errorf("scopes: %v", d["scopes"])
	}
	links := []string{d["openapi"].(string), d["api_catalog"].(string)}
	for _, v := range d["docs"].(map[string]any) {
		if u := v.(string); !strings.Contains(u, "{") {
			links = append(links, u)
		}
	}
	for _, u := range links {
		if got := s.Do(t, "GET", strings.TrimPrefix(u, s.URL), "", ""); got.Status != 200 {
			t.Errorf("discovery links %s: %d", u, got.Status)
		}
	}
	oa := s.Do(t, "GET", "/openapi.json", "", "")
	var doc map[string]any
	if err := json.Unmarshal(oa.Body, &doc); err != nil || doc["openapi"] != "3.1.0" {
		t.Fatalf("openapi.json: %v %v", err, doc["openapi"])
	}
	if _, ok := doc["paths"].(map[string]any)["/plans"]; !ok {
		t.Error("openapi.json does not describe the server's own /plans route")
	}
	c := s.Do(t, "GET", "/.well-known/api-catalog", "", "")
	if !strings.HasPrefix(c.Header.Get("Content-Type"), "application/linkset+json") {
		t.Fatalf("api-catalog content type %q", c.Header.Get("Content-Type"))
	}
	ls := c.JSON(t)["linkset"].([]any)
	api := ls[1].(map[string]any)
	if api["service-desc"].([]any)[0].(map[string]any)["href"] != s.URL+"/openapi.json" {
		t.Errorf("api-catalog service-desc: %v", api["service-desc"])
	}
	if h := s.Do(t, "HEAD", "/.well-known/api-catalog", "", ""); h.Status != 200 {
		t.Errorf("HEAD api-catalog: %d", h.Status)
	}
}

// Offset paging is deprecated (versioning.md, rollups.md): every operation that takes
// offset marks the parameter itself deprecated, where OpenAPI tools read it.
func TestOffsetParameterDeprecated(t *testing.T) {
	doc := docs.OpenAPI(devRoutes(), "https://httpserver.example.com")
	n := 0
	for path, item := range doc["paths"].(map[string]any) {
		for m, o := range item.(map[string]any) {
			ps, _ := o.(map[string]any)["parameters"].([]any)
			for _, p := range ps {
				if pm := p.(map[string]any); pm["name"] == "offset" {
					n++
					if pm["deprecated"] != true {
						t.Errorf("%s %s: offset is not marked deprecated: %v", strings.ToUpper(m), path, pm)
					}
				}
			}
		}
	}
	if n == 0 {
		t.Fatal("no operation takes offset")
	}
}
