package mcp_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	json "github.com/goccy/go-json"

	"svc/lib/apikey"
	"svc/schema/apitest"
	"svc/schema/workspace"
)

// limitedKey is a showroom key with every scope and the given windows.
func (rg *rig) limitedKey(t *testing.T, burst, daily int) string {
	_, sec := rg.Key(t, workspace.KeySpec{WorkspaceID: rg.showroom.ID, Env: apikey.Sandbox, Burst: burst, Daily: daily})
	return sec
}

// toolCall is one JSON-RPC tools/call message.
func toolCall(id int, tool, args string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":%s}}`, id, tool, args)
}

// rpcResult is a JSON-RPC response carrying a tool result.
type rpcResult struct {
	Result *struct {
		IsError           bool           `json:"isError"`
		StructuredContent map[string]any `json:"structuredContent"`
	} `json:"result"`
}

// toolResult sends one tools/call and returns its result; the HTTP request must be 200.
func toolResult(t *testing.T, rg *rig, secret, tool, args string) (bool, map[string]any) {
	t.Helper()
	r := mcpPost(t, rg, secret, toolCall(1, tool, args))
	var m rpcResult
	if err := json.Unmarshal(r.Body, &m); r.Status != 200 || err != nil || m.Result == nil {
		t.Fatalf("%s: %d %s", tool, r.Status, r.Body)
	}
	return m.Result.IsError, m.Result.StructuredContent
}

// A JSON-RPC batch is refused whole: one HTTP request never runs more than one tool call.
// (At protocol revisions before 2025-06-18, or without MCP-Protocol-Version, the SDK
// would run every entry.)
func TestBatchesAreRefused(t *testing.T) {
	rg := newRig(t)
	secret := rg.limitedKey(t, 5, 20)
	msgs := make([]string, 50)
	for i := range msgs {
		msgs[i] = toolCall(i+1, "limits", "{}")
	}
	body := "[" + strings.Join(msgs, ",") + "]"
	for _, version := range []string{"", "2025-03-26"} {
		r := rg.Do(t, "POST", "/mcp", secret, body, "Accept", "application/json, text/event-stream", "MCP-Protocol-Version", version)
		var results []rpcResult
		_ = json.Unmarshal(r.Body, &results)
		ok := 0
		for _, res := range results {
			if res.Result != nil && !res.Result.IsError {
				ok++
			}
		}
		if ok > 5 {
			t.Fatalf("version %q: %d successful tool results for a key with burst 5", version, ok)
		}
		p := apitest.Problem(t, r, 422, "invalid_request")
		if errs, _ := p["errors"].([]any); len(errs) != 1 || errs[0].(map[string]any)["field"] != "body" {
			t.Fatalf("batch refusal: %v", p)
		}
	}
}

// Each tool call takes a request of its own from the key's windows, beside the HTTP
// request that carries it; past a window the tool answers the API's 429 problem.
func TestEachToolCallIsARequest(t *testing.T) {
	rg := newRig(t)
	secret := rg.limitedKey(t, 5, 20)
	isErr, doc := toolResult(t, rg, secret, "limits", "{}") // units 1 (POST) and 2 (tool)
	if isErr || remaining(doc, "burst") != 3 {
		t.Fatalf("limits after one tool call: want 3 of the burst left, got %v", doc)
	}
	if isErr, doc = toolResult(t, rg, secret, "limits", "{}"); isErr { // units 3 and 4
		t.Fatalf("second tool call: %v", doc)
	}
	isErr, doc = toolResult(t, rg, secret, "limits", "{}") // unit 5: the POST; the tool is refused
	if !isErr || doc["code"] != "rate_limited" || doc["status"] != float64(429) || doc["retryable"] != true {
		t.Fatalf("third tool call with the burst spent: error %v %v", isErr, doc)
	}
	apitest.Problem(t, mcpPost(t, rg, secret, toolCall(1, "limits", "{}")), 429, "rate_limited")

	secret = rg.limitedKey(t, 100, 3)
	if isErr, doc = toolResult(t, rg, secret, "me", "{}"); isErr { // units 1 and 2
		t.Fatalf("me: %v", doc)
	}
	isErr, doc = toolResult(t, rg, secret, "me", "{}") // unit 3: the POST; the tool is refused
	if !isErr || doc["code"] != "quota_exceeded" || doc["status"] != float64(429) {
		t.Fatalf("tool call with the daily quota spent: error %v %v", isErr, doc)
	}
}

// A tool call answered 4xx gives back its own request, never one another request took:
// ten calls for a missing plan leave the windows ten requests (their HTTP requests)
// lower, not full again.
func TestRefusedToolCallsRefundOnlyThemselves(t *testing.T) {
	rg := newRig(t)
	secret := rg.limitedKey(t, 100, 100)
	daily := func() int {
		t.Helper()
		r := rg.Do(t, "GET", "/limits", secret, "")
		m := dailyRemaining.FindStringSubmatch(r.Header.Get("RateLimit"))
		if r.Status != 200 || m == nil {
			t.Fatalf("GET /limits: %d %q", r.Status, r.Header.Get("RateLimit"))
		}
		n, _ := strconv.Atoi(m[1])
		return n
	}
	for i := 0; i < 5; i++ { // spent by other requests
		daily()
	}
	before := daily()
	for i := 0; i < 10; i++ {
		isErr, doc := toolResult(t, rg, secret, "plan", `{"id":"pln_00000000-0000-4000-8000-000000000000"}`)
		if !isErr || doc["code"] != "not_found" {
			t.Fatalf("missing plan: %v %v", isErr, doc)
		}
	}
	after := daily()
	if before-after != 11 {
		t.Fatalf("daily remaining %d before ten refused tool calls, %d after (and a GET): want 11 spent, got %d", before, after, before-after)
	}
	// The same ten in one batch (a revision that allowed batches) refill nothing either.
	msgs := make([]string, 10)
	for i := range msgs {
		msgs[i] = toolCall(i+1, "plan", `{"id":"pln_00000000-0000-4000-8000-000000000000"}`)
	}
	rg.Do(t, "POST", "/mcp", secret, "["+strings.Join(msgs, ",")+"]",
		"Accept", "application/json, text/event-stream", "MCP-Protocol-Version", "2025-03-26")
	if again := daily(); again >= after {
		t.Fatalf("daily remaining %d, then %d after a batch of ten refused tool calls and a GET: the windows refilled", after, again)
	}
}

// A tool's id argument is parsed as an id of the tool's kind before any path is built:
// path tricks are the 422 of a malformed id, and nothing is dispatched.
func TestToolIdsAreIds(t *testing.T) {
	rg := newRig(t)
	secret := rg.key(t, apikey.Scopes...)
	u := "00000000-0000-4000-8000-000000000000"
	tricks := map[string][]string{
		"plan": {"../../account", "../me", "..%2fme", "%2e%2e/%2e%2e/limits", "%2e%2e%2f%2e%2e%2flimits",
			"pln_" + u + "?x=", "pln_" + u + "#", "pln_" + u + "/../../me", "pln_" + u + "/lines", "cmp_" + u, "", "pln_"},
		"lines":   {"../../limits", "pln_" + u + "/../../../me"},
		"finding": {"..", "fnd_" + u + "%00"},
		"erasure": {"../erasures", "era_" + u + "?status=completed"},
	}
	before := dispatched(t, rg)
	for tool, bad := range tricks {
		for _, id := range bad {
			args, _ := json.Marshal(map[string]string{"id": id})
			isErr, doc := toolResult(t, rg, secret, tool, string(args))
			errs, _ := doc["errors"].([]any)
			if !isErr || doc["code"] != "invalid_request" || doc["status"] != float64(422) || len(errs) != 1 ||
				errs[0].(map[string]any)["field"] != "id" || errs[0].(map[string]any)["rule"] != "id" {
				t.Errorf("%s with id %q: error %v %v", tool, id, isErr, doc)
			}
		}
	}
	if after := dispatched(t, rg); after != before {
		t.Fatalf("requests other than POST /mcp went from %d to %d: a malformed id was dispatched", before, after)
	}
	// Both forms of a well-formed id are dispatched to the tool's own operation.
	for _, id := range []string{"pln_" + u, u, strings.ReplaceAll(u, "-", "")} {
		if isErr, doc := toolResult(t, rg, secret, "plan", `{"id":"`+id+`"}`); !isErr || doc["code"] != "not_found" {
			t.Fatalf("plan %s: %v %v", id, isErr, doc)
		}
	}
	if after := dispatched(t, rg); after != before+3 {
		t.Fatalf("requests other than POST /mcp went from %d to %d, want 3 more", before, after)
	}
}

// remaining is what a GET /limits body says is left of window name (-1 if absent).
func remaining(doc map[string]any, name string) int {
	ws, _ := doc["limits"].([]any)
	for _, w := range ws {
		if m, _ := w.(map[string]any); m["name"] == name {
			n, _ := m["remaining"].(float64)
			return int(n)
		}
	}
	return -1
}

// dispatched counts the requests the server answered on any route but POST /mcp (tool
// calls are served in-process through the same server, so they are counted).
func dispatched(t *testing.T, rg *rig) int {
	t.Helper()
	mfs, err := rg.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, mf := range mfs {
		if mf.GetName() != "svc_http_requests_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "route" && l.GetValue() != "POST /mcp" {
					n += int(m.GetCounter().GetValue())
				}
			}
		}
	}
	return n
}

// Tool calls are served at the version of the request that carries them, resolved as
// for any request: the version parameter before the SVC-Version header.
func TestToolCallsAtTheRequestsVersion(t *testing.T) {
	rg := newRig(t)
	secret := rg.key(t, apikey.Scopes...)
	for _, c := range []struct{ query, header, want string }{
		{"?version=2026-03-01", "next", "2026-03-01"},
		{"?version=stable", "2025-01-01", "2026-09-01"},
		{"", "2026-03-01", "2026-03-01"},
	} {
		r := rg.Do(t, "POST", "/mcp"+c.query, secret, toolCall(1, "me", "{}"), "Accept", "application/json, text/event-stream",
			"MCP-Protocol-Version", revisions[1], "SVC-Version", c.header)
		var m rpcResult
		if err := json.Unmarshal(r.Body, &m); r.Status != 200 || err != nil || m.Result == nil {
			t.Fatalf("%s with SVC-Version %s: %d %s", c.query, c.header, r.Status, r.Body)
		}
		if m.Result.IsError || m.Result.StructuredContent["version"] != c.want {
			t.Errorf("%s with SVC-Version %s: tool result %v, want version %s", c.query, c.header, m.Result.StructuredContent, c.want)
		}
	}
}

// A request the MCP transport refuses (the SDK writes those as plain text) is answered
// with a problem document like every other refusal: 422 invalid_request naming the
// header or the body at fault.
func TestTransportRefusalsAreProblems(t *testing.T) {
	rg := newRig(t)
	secret := rg.key(t, "plans:read")
	call := toolCall(1, "limits", "{}")
	for _, c := range []struct {
		name, body, field string
		headers           []string
	}{
		{"no Accept of event streams", call, "Accept", []string{"Accept", "application/json"}},
		{"another Content-Type", call, "Content-Type", []string{"Accept", "application/json, text/event-stream", "Content-Type", "text/plain"}},
		{"an unknown protocol version", call, "MCP-Protocol-Version", []string{"Accept", "application/json, text/event-stream", "MCP-Protocol-Version", "1999-01-01"}},
		{"a body that is not JSON", `{"jsonrpc":`, "body", []string{"Accept", "application/json, text/event-stream"}},
	} {
		r := rg.Do(t, "POST", "/mcp", secret, c.body, c.headers...)
		p := apitest.Problem(t, r, 422, "invalid_request")
		if errs, _ := p["errors"].([]any); len(errs) != 1 || errs[0].(map[string]any)["field"] != c.field ||
			errs[0].(map[string]any)["rule"] != "mcp_transport" {
			t.Errorf("%s: %v", c.name, p)
		}
	}
}
