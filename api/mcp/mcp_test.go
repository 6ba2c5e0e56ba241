package mcp_test

import (
	"context"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	json "github.com/goccy/go-json"
	"github.com/google/uuid"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/shopspring/decimal"

	"svc/api"
	"svc/api/docs"
	"svc/api/mcp"
	"svc/lib/apikey"
	"svc/schema/apitest"
	"svc/schema/catalog"
	"svc/schema/chtest"
	"svc/schema/workspace"
)

// rig is the read API and the MCP endpoint on one httpserver.Server over the real Redis and a
// private ClickHouse database holding the showroom.
type rig struct {
	*apitest.Server
	showroom workspace.Workspace
	conn     driver.Conn
}

func newRig(t *testing.T) *rig {
	t.Helper()
	_, conn := chtest.NewDB(t)
	a := &api.API{Conn: conn}
	s := apitest.Start(t, append(a.Routes(), mcp.New().Routes()...), nil)
	a.Keys = s.Keys
	ctx := context.Background()
	if _, err := catalog.SeedShowroom(ctx, s.Keys, conn); err != nil {
		t.Fatal(err)
	}
	w, err := s.Keys.Workspace(ctx, catalog.ShowroomWorkspace)
	if err != nil {
		t.Fatal(err)
	}
	// Two sandbox events of the showroom's pixel at 20:00 UTC yesterday: 01:45 today in
	// Asia/Kathmandu, so its local day differs from the UTC one.
	at := time.Now().UTC().Truncate(24 * time.Hour).Add(-4 * time.Hour)
	b, err := conn.PrepareBatch(ctx, `INSERT INTO events (workspace_id, pixel_id, sandbox, event_id, event_name,
		occurred_at, event_date, value, has_value, currency, consent, has_email, email_sha256, inserted_at)`)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := b.Append(catalog.ShowroomWorkspace, catalog.ShowroomPixel, uint8(1), uuid.New(), "purchase", at,
			at.Truncate(24*time.Hour), decimal.Zero, uint8(0), "", uint8(1), uint8(0), string(make([]byte, 32)), time.Now().UTC()); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Send(); err != nil {
		t.Fatal(err)
	}
	return &rig{Server: s, showroom: w, conn: conn}
}

func (rg *rig) key(t *testing.T, scopes ...string) string {
	_, sec := rg.Key(t, workspace.KeySpec{WorkspaceID: rg.showroom.ID, Env: apikey.Sandbox, Scopes: scopes})
	return sec
}

type bearer struct{ secret string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.secret)
	return http.DefaultTransport.RoundTrip(r)
}

func (rg *rig) connect(t *testing.T, secret, version string) *sdk.ClientSession {
	t.Helper()
	tr := &sdk.StreamableClientTransport{Endpoint: rg.URL + "/mcp", HTTPClient: &http.Client{Transport: bearer{secret}, Timeout: 30 * time.Second},
		DisableStandaloneSSE: true}
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "svc-test", Version: "1"}, nil).
		Connect(context.Background(), tr, &sdk.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("connect at %s: %v", version, err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// The current protocol revision and the one before it.
var revisions = sdk.SupportedProtocolVersions()[:2]

func structured(t *testing.T, res *sdk.CallToolResult) map[string]any {
	t.Helper()
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("structured content is not an object: %s", b)
	}
	return m
}

func call(t *testing.T, cs *sdk.ClientSession, tool string, args map[string]any) *sdk.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	return res
}

func TestToolsAtTheCurrentAndPreviousRevision(t *testing.T) {
	rg := newRig(t)
	secret := rg.key(t, apikey.Scopes...)
	schemas := map[string]docs.Schema{}
	for _, tl := range mcp.Tools {
		schemas[tl.Name] = docs.Inline(docs.Operations["GET "+tl.Path].Response)
	}
	for _, rev := range revisions {
		t.Run(rev, func(t *testing.T) {
			cs := rg.connect(t, secret, rev)
			if got := cs.InitializeResult().ProtocolVersion; got != rev {
				t.Fatalf("negotiated %s, asked for %s", got, rev)
			}
			lt, err := cs.ListTools(context.Background(), nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(lt.Tools) != len(mcp.Tools) {
				t.Fatalf("%d tools listed, want %d", len(lt.Tools), len(mcp.Tools))
			}
			for _, tl := range lt.Tools {
				in, _ := json.Marshal(tl.InputSchema)
				if !strings.Contains(string(in), `"type":"object"`) || tl.OutputSchema == nil || tl.Description == "" {
					t.Errorf("tool %s: input schema %s, output schema %v", tl.Name, in, tl.OutputSchema)
				}
			}
			check := func(tool string, args map[string]any) map[string]any {
				t.Helper()
				res := call(t, cs, tool, args)
				m := structured(t, res)
				if res.IsError {
					t.Fatalf("%s: tool error: %v", tool, m)
				}
				if errs := docs.Validate(schemas[tool], m, nil); len(errs) > 0 {
					t.Errorf("%s: result does not match its output schema: %v", tool, errs)
				}
				return m
			}
			me := check("me", nil)
			if me["workspace_id_uuid"] != rg.showroom.ID.String() {
				t.Errorf("me: %v", me)
			}
			check("limits", nil)
			page := check("plans", map[string]any{"limit": 1})
			plans := page["data"].([]any)
			cur, _ := page["meta"].(map[string]any)["next_cursor"].(string)
			if len(plans) != 1 || cur == "" {
				t.Fatalf("plans page: %v", page)
			}
			next := check("plans", map[string]any{"limit": 1, "cursor": cur})
			if next["data"].([]any)[0].(map[string]any)["id"] == plans[0].(map[string]any)["id"] {
				t.Error("the cursor did not advance")
			}
			plan := plans[0].(map[string]any)["id"].(string)
			check("plan", map[string]any{"id": plan})
			check("lines", map[string]any{"id": plan})
			check("plan_actuals", map[string]any{"id": plan})
			cmps := check("campaigns", nil)["data"].([]any)
			if len(cmps) > 0 {
				c := cmps[0].(map[string]any)["id"].(string)
				check("campaign", map[string]any{"id": c})
				check("campaign_actuals", map[string]any{"id": c})
			}
			sts := check("studies", nil)["data"].([]any)
			if len(sts) > 0 {
				s := sts[0].(map[string]any)["id"].(string)
				check("study", map[string]any{"id": s})
				fs := check("findings", map[string]any{"study_id": s})["data"].([]any)
				if len(fs) > 0 {
					check("finding", map[string]any{"id": fs[0].(map[string]any)["id"].(string)})
				}
			}
			dates := func(page map[string]any, zone string) []string {
				var out []string
				for _, r := range page["data"].([]any) {
					row := r.(map[string]any)
					if row["time_zone"] != zone || row["events"] != 2.0 {
						t.Fatalf("pixel_rollups in %s: %v", zone, row)
					}
					out = append(out, row["date"].(string))
				}
				return out
			}
			utc := dates(check("pixel_rollups", map[string]any{"pixel_id": "pxl_" + catalog.ShowroomPixel.String()}), "UTC")
			local := dates(check("pixel_rollups", map[string]any{"pixel_id": "pxl_" + catalog.ShowroomPixel.String(), "time_zone": "Asia/Kathmandu"}), "Asia/Kathmandu")
			today := time.Now().UTC().Format(time.DateOnly)
			yesterday := time.Now().UTC().AddDate(0, 0, -1).Format(time.DateOnly)
			if len(utc) != 1 || utc[0] != yesterday || len(local) != 1 || local[0] != today {
				t.Fatalf("pixel_rollups dates: UTC %v (want %s), Asia/Kathmandu %v (want %s)", utc, yesterday, local, today)
			}
			bad := call(t, cs, "pixel_rollups", map[string]any{"pixel_id": "pxl_" + catalog.ShowroomPixel.String(), "time_zone": "Mars/Olympus"})
			if p := structured(t, bad); !bad.IsError || p["code"] != "invalid_request" {
				t.Fatalf("pixel_rollups with an unknown zone: %v", p)
			}
			check("erasures", map[string]any{"status": "completed"})
			px := check("pixel", map[string]any{"id": "pxl_" + catalog.ShowroomPixel.String(), "days": 2})
			if len(px["days"].([]any)) != 2 {
				t.Errorf("pixel: %v", px)
			}
			if pxs := check("pixels", map[string]any{"limit": 1})["data"].([]any); len(pxs) != 1 {
				t.Errorf("pixels: %v", pxs)
			}
			for id, code := range map[string]string{"req_nope": "invalid_request", "req_0123456789abcdef01234567": "not_found"} {
				res := call(t, cs, "batch", map[string]any{"id": id})
				if p := structured(t, res); !res.IsError || p["code"] != code {
					t.Errorf("batch %s: %v, want %s", id, p, code)
				}
			}
		})
	}
}

func TestToolErrorsCarryTheProblemDocument(t *testing.T) {
	rg := newRig(t)
	cs := rg.connect(t, rg.key(t, "pixels:read"), revisions[1])
	res := call(t, cs, "plans", nil)
	p := structured(t, res)
	if !res.IsError || p["code"] != "insufficient_scope" || p["required_scope"] != "plans:read" ||
		!strings.HasSuffix(p["doc_url"].(string), "/developers/errors/insufficient_scope") {
		t.Fatalf("plans without plans:read: error %v %v", res.IsError, p)
	}
	cs = rg.connect(t, rg.key(t, apikey.Scopes...), revisions[0])
	res = call(t, cs, "plan", map[string]any{"id": "pln_00000000-0000-4000-8000-000000000000"})
	if p := structured(t, res); !res.IsError || p["code"] != "not_found" || p["status"] != float64(404) {
		t.Fatalf("unknown plan: %v %v", res.IsError, p)
	}
	res = call(t, cs, "erasure", map[string]any{"id": "era_00000000-0000-4000-8000-000000000000"})
	if p := structured(t, res); !res.IsError || p["code"] != "not_found" {
		t.Fatalf("unknown erasure: %v %v", res.IsError, p)
	}
	for _, limit := range []any{"lots", 5000, 0} {
		res = call(t, cs, "plans", map[string]any{"limit": limit})
		p := structured(t, res)
		errs, _ := p["errors"].([]any)
		if !res.IsError || p["code"] != "invalid_request" || len(errs) == 0 || errs[0].(map[string]any)["field"] != "limit" {
			t.Fatalf("limit %v: %v %v, want invalid_request with an errors[] entry on limit", limit, res.IsError, p)
		}
	}
}

// mcpPost sends one JSON-RPC message to /mcp as a raw HTTP request.
func mcpPost(t *testing.T, rg *rig, secret, body string) apitest.Response {
	return rg.Do(t, "POST", "/mcp", secret, body, "Accept", "application/json, text/event-stream", "MCP-Protocol-Version", revisions[1])
}

var dailyRemaining = regexp.MustCompile(`"daily";r=(\d+)`)

func TestSameKeysAndLimitsAsREST(t *testing.T) {
	rg := newRig(t)
	list := `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`
	r := mcpPost(t, rg, "", list)
	apitest.Problem(t, r, 401, "unauthorized")
	r = mcpPost(t, rg, "svc_sandbox_nope", list)
	apitest.Problem(t, r, 401, "invalid_key")

	secret := rg.key(t, apikey.Scopes...)
	toolCall := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"plans","arguments":{"limit":1}}}`
	remaining := func(r apitest.Response) int {
		t.Helper()
		if r.Status != 200 {
			t.Fatalf("tools/call: %d %s", r.Status, r.Body)
		}
		m := dailyRemaining.FindStringSubmatch(r.Header.Get("RateLimit"))
		if m == nil {
			t.Fatalf("RateLimit header %q", r.Header.Get("RateLimit"))
		}
		n, _ := strconv.Atoi(m[1])
		return n
	}
	first := mcpPost(t, rg, secret, toolCall)
	var msg struct {
		Result sdk.CallToolResult `json:"result"`
	}
	if err := json.Unmarshal(first.Body, &msg); err != nil || msg.Result.IsError {
		t.Fatalf("tools/call answer: %v %s", err, first.Body)
	}
	// The HTTP request and its tool call are a request each; the response's rate-limit
	// headers count both.
	a, b := remaining(first), remaining(mcpPost(t, rg, secret, toolCall))
	if a-b != 2 {
		t.Fatalf("daily remaining %d then %d: one MCP request with a tool call must spend exactly two requests", a, b)
	}
	// A tool whose REST answer is a 4xx gives back its own request, as the REST call
	// would; the HTTP request that carried it stays spent.
	notFound := `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"plan","arguments":{"id":"pln_00000000-0000-4000-8000-000000000000"}}}`
	if c := remaining(mcpPost(t, rg, secret, notFound)); b-c != 1 {
		t.Fatalf("daily remaining %d then %d after a refused tool call", b, c)
	}
	if c := remaining(mcpPost(t, rg, secret, list)); b-c != 2 {
		t.Fatalf("daily remaining %d then %d after a refused tool call and a tools/list", b, c)
	}
}
