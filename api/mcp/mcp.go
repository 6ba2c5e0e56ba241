// Package mcp serves the Model Context Protocol endpoint, POST /mcp, with the official
// go-sdk over streamable HTTP (stateless, JSON responses), adapted to fasthttp.
//
// The endpoint is an ordinary authenticated route: the httpserver.Server checks the bearer
// key, version and rate limits of every MCP HTTP request, so unauthenticated or
// throttled clients get the usual problem documents. Each tool then answers by
// dispatching an in-process GET through the same httpserver.Server for the matching REST
// operation, with the caller's Authorization header: scopes, workspace isolation and
// problem codes are exactly the REST ones. Every tool call is a request of its own
// (httpserver.Server.Dispatch): it takes one unit of the key's windows beside the unit of the
// HTTP request that carries it, and past a window it answers the API's 429 problem as a
// tool error. One HTTP request carries one JSON-RPC message: batches are refused.
package mcp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"

	json "github.com/goccy/go-json"
	"github.com/modelcontextprotocol/go-sdk/auth"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttpadaptor"

	"svc/api/docs"
	"svc/lib/httpserver"
	"svc/lib/ids"
	"svc/lib/limits"
	"svc/lib/problem"
)

// Tool maps one MCP tool to a REST GET operation.
type Tool struct {
	Name        string
	Title       string
	Description string
	// Path is the REST path, with {id} for the one path parameter of item tools.
	Path string
}

// Tools are the read side as MCP tools. Input schemas come from the operation's
// parameters and output schemas from its response, both in docs.Operations.
var Tools = []Tool{
	{"me", "The calling key", "The calling API key: its id, workspace, environment, scopes and expiry.", "/me"},
	{"limits", "Rate limits", "The burst and daily windows of the calling key and what remains.", "/limits"},
	{"plans", "Media plans", "Media plans of the workspace (cursor paging: pass meta.next_cursor as cursor).", "/plans"},
	{"plan", "One media plan", "One media plan by id (pln_… or UUID).", "/plans/{id}"},
	{"lines", "Line items of a plan", "Line items of a media plan.", "/plans/{id}/lines"},
	{"plan_actuals", "Plan actuals", "Delivered performance of a plan per line item and day.", "/plans/{id}/actuals"},
	{"campaigns", "Campaigns", "Campaigns of the workspace.", "/campaigns"},
	{"campaign", "One campaign", "One campaign by id (cmp_… or UUID).", "/campaigns/{id}"},
	{"campaign_actuals", "Campaign actuals", "Delivered performance of a campaign per day.", "/campaigns/{id}/actuals"},
	{"studies", "Studies", "Measurement studies of the workspace.", "/studies"},
	{"study", "One study", "One study by id (std_… or UUID).", "/studies/{id}"},
	{"findings", "Findings", "Findings of studies; filter with study_id.", "/findings"},
	{"finding", "One finding", "One finding by id (fnd_… or UUID).", "/findings/{id}"},
	{"pixel_rollups", "Daily pixel rollups", "Daily rollups of a pixel's events per local day, event name and currency; time_zone (an IANA name such as America/New_York) picks the zone of the days, default the pixel's reporting zone.", "/pixel-rollups"},
	{"pixels", "Pixels and their health", "The workspace's pixels (cursor paging), each with its name, reporting zone and, per local day (days, default 7, at most 31), events received, accepted, rejected by rule and dropped as duplicates, the last accepted event's time and the pipeline's lag for it.", "/pixels"},
	{"pixel", "One pixel and its health", "One pixel by id (pxl_… or UUID): name, reporting zone, per local day (days) events received, accepted, rejected by rule and duplicates, last accepted event, the pipeline's lag.", "/pixels/{id}"},
	{"batch", "The life of one batch", "What became of one POST /events request, by its request_id (req_…): when it was received, events accepted (stored), rejected by rule and dropped as duplicates, the Kafka partition and offset it was written at, when ClickHouse stored it, and the local days of the pixel's zone it counted in.", "/batches/{id}"},
	{"rejections", "Rejected events of a pixel", "A pixel's rejected events and refused batches, newest first: request_id, time, field, rule and value received (identity values withheld); filter with since and rule; meta.rejections and meta.not_stored count them exactly.", "/rejections"},
	// Erasure records (identities:erase), read-only: the status and proof of erasures
	// a customer's backend requested. Requesting one is deliberately not a tool: it is
	// irreversible, and belongs to the customer's own compliance process (POST /erasures).
	{"erasures", "Erasure requests", "Erasure requests of the workspace, newest first, with their status and proof (events affected, days rebuilt).", "/erasures"},
	{"erasure", "One erasure request", "One erasure request by id (era_… or UUID): status, events affected, days whose rollups were rebuilt.", "/erasures/{id}"},
}

// idKinds is the id kind of each collection whose item a tool path names (/plans/{id}…).
var idKinds = map[string]ids.Prefix{"/plans/": ids.Plan, "/campaigns/": ids.Campaign,
	"/studies/": ids.Study, "/findings/": ids.Finding, "/erasures/": ids.Erasure, "/batches/": ids.Request, "/pixels/": ids.Pixel}

// idKind is the kind of the tool's {id} ("" when its path has none).
func (t Tool) idKind() ids.Prefix {
	i := strings.Index(t.Path, "{id}")
	if i < 0 {
		return ""
	}
	k, ok := idKinds[t.Path[:i]]
	if !ok {
		panic("mcp: no id kind for tool path " + t.Path) // a programming error, caught by every test
	}
	return k
}

// Path is where the endpoint is served.
const Path = docs.MCPPath

// Endpoint is the MCP endpoint: one go-sdk server with every tool, behind the
// streamable HTTP handler.
type Endpoint struct {
	server  *sdk.Server
	handler fasthttp.RequestHandler
}

// New returns the endpoint.
func New() *Endpoint {
	e := &Endpoint{server: sdk.NewServer(&sdk.Implementation{Name: "svc", Title: "svc API", Version: httpserver.Stable}, &sdk.ServerOptions{
		Instructions: "Read-only tools over the svc API (media plans, campaigns, studies, findings, actuals, daily pixel rollups, pixels and their health, the life of a batch, rejections, erasure records). " +
			"They use the caller's API key, its scopes and its rate limits; a failing tool returns the API's problem document.",
	})}
	for _, t := range Tools {
		t.idKind()
		e.server.AddTool(t.sdkTool(), t.handle)
	}
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return e.server }, &sdk.StreamableHTTPOptions{
		Stateless: true, JSONResponse: true,
		// The key in the Authorization header authenticates every request (no cookies,
		// no ambient credentials), so DNS rebinding gains an attacker nothing.
		DisableLocalhostProtection: true,
	})
	// The httpserver.Server has authenticated the request; the verifier only carries the
	// call (stored on the fasthttp context) to the tool handlers.
	verify := func(ctx context.Context, _ string, _ *http.Request) (*auth.TokenInfo, error) {
		c, ok := ctx.Value(callKey).(*call)
		if !ok {
			return nil, auth.ErrInvalidToken
		}
		return &auth.TokenInfo{UserID: c.keyID, Scopes: c.scopes, Extra: map[string]any{callKey: c}}, nil
	}
	wrapped := auth.RequireBearerToken(verify, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(h)
	e.handler = fasthttpadaptor.NewFastHTTPHandler(wrapped)
	return e
}

// Route returns POST /mcp: authenticated (any valid key), rate-limited like any call.
func (e *Endpoint) Route() httpserver.Route {
	return httpserver.Route{Method: "POST", Path: Path,
		Summary: "Model Context Protocol endpoint (streamable HTTP): the read side as tools.", Handle: e.handle}
}

// Routes returns the endpoint's routes.
func (e *Endpoint) Routes() []httpserver.Route { return []httpserver.Route{e.Route()} }

const callKey = "svc.mcp.call"

// call is what tool handlers need of the MCP HTTP request they serve. It is built
// before the request is handed to the SDK and is only used while the outer handler
// waits for it (the adaptor returns when the JSON response is complete).
type call struct {
	srv     *httpserver.Server
	outer   *httpserver.Request
	keyID   string
	scopes  []string
	auth    []byte
	version []byte
	xff     [][]byte // every X-Forwarded-For line, in order
	remote  net.Addr

	mu   sync.Mutex
	last *limits.Decision // the windows after the latest tool call (nil before one)
}

func (e *Endpoint) handle(r *httpserver.Request) error {
	if p := oneMessage(r.Body()); p != nil {
		return p
	}
	h := &r.Ctx.Request.Header
	c := &call{srv: r.Server(), outer: r, keyID: r.Key.ID.String(), scopes: r.Key.Scopes,
		auth:    append([]byte(nil), h.Peek("Authorization")...),
		version: append([]byte(nil), h.Peek("SVC-Version")...),
		remote:  r.Ctx.RemoteAddr()}
	for _, v := range h.PeekAll("X-Forwarded-For") {
		c.xff = append(c.xff, append([]byte(nil), v...))
	}
	if r.Version != "" { // resolved as for any request: the parameter, the header, the key's pin
		c.version = []byte(r.Version)
	} else if v := r.Query("version"); v != "" {
		c.version = []byte(v)
	}
	r.Ctx.SetUserValue(callKey, c)
	defer r.Ctx.SetUserValue(callKey, nil)
	e.handler(r.Ctx)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.last != nil {
		r.Limits = c.last // the response's rate-limit headers count the tool call too
	}
	if p := transportRefusal(&r.Ctx.Response); p != nil {
		return p
	}
	return nil
}

// transportRefusal is the problem document of a refusal the SDK's transport wrote as
// plain text (a 4xx: no Accept of JSON and event streams, another Content-Type, an
// unknown MCP-Protocol-Version, a body that is not JSON): 422 invalid_request, its text
// in the detail and the header or body it is about in errors[]; nil for any other answer.
func transportRefusal(resp *fasthttp.Response) *problem.Problem {
	st := resp.StatusCode()
	if st < 400 || st >= 500 || bytes.HasPrefix(resp.Header.ContentType(), []byte("application/json")) {
		return nil
	}
	text := strings.TrimSpace(string(resp.Body()))
	if len(text) > 200 {
		text = text[:200]
	}
	field := "body"
	switch low := strings.ToLower(text); {
	case st == fasthttp.StatusUnsupportedMediaType || strings.Contains(low, "content-type"):
		field = "Content-Type"
	case strings.Contains(low, "accept"):
		field = "Accept"
	case strings.Contains(low, "protocol version"):
		field = "MCP-Protocol-Version"
	}
	return problem.Invalid("The MCP transport refused the request: "+text,
		problem.FieldError{Field: field, Rule: "mcp_transport", Value: nil})
}

// oneMessage refuses a body that is not one JSON-RPC message (a JSON object): a JSON-RPC
// batch (an array) in particular. The 2025-06-18 revision of the streamable HTTP
// transport removed batching; the SDK still runs batches for older revisions, so they
// are refused here for all, and one HTTP request carries at most one tool call.
func oneMessage(body []byte) *problem.Problem {
	b := bytes.TrimLeft(body, " \t\r\n")
	if len(b) > 0 && b[0] == '{' {
		return nil
	}
	detail := "The body must be one JSON-RPC message, a JSON object."
	if len(b) > 0 && b[0] == '[' {
		detail = "JSON-RPC batches are not accepted: send one message per request."
	}
	return problem.Invalid(detail, problem.FieldError{Field: "body", Rule: "json_object", Value: nil, Pointer: ""})
}

// get dispatches GET path?query through the httpserver.Server as the caller and returns the
// response's status, content type and body (copied).
func (c *call) get(path string, q url.Values) (int, string, []byte) {
	var req fasthttp.Request
	req.Header.SetMethod(fasthttp.MethodGet)
	uri := path
	if len(q) > 0 {
		uri += "?" + q.Encode()
	}
	req.SetRequestURI(uri)
	req.Header.SetBytesV("Authorization", c.auth)
	if len(c.version) > 0 {
		req.Header.SetBytesV("SVC-Version", c.version)
	}
	for _, v := range c.xff {
		req.Header.AddBytesV("X-Forwarded-For", v)
	}
	var ctx fasthttp.RequestCtx
	ctx.Init(&req, c.remote, nil)
	if dec := c.srv.Dispatch(&ctx); dec != nil {
		c.mu.Lock()
		c.last = dec
		c.mu.Unlock()
	}
	return ctx.Response.StatusCode(), string(ctx.Response.Header.ContentType()), append([]byte(nil), ctx.Response.Body()...)
}

func (t Tool) op() docs.Op { return docs.Operations["GET "+t.Path] }

// inputSchema is the operation's path and query parameters as a JSON object schema.
func (t Tool) inputSchema() docs.Schema {
	props := docs.Schema{}
	required := []string{}
	for _, p := range t.op().Params {
		if p.In != "path" && p.In != "query" || p.Name == "offset" {
			continue // offset paging is deprecated: tools page by cursor only
		}
		s := docs.Schema{}
		for k, v := range p.Schema {
			s[k] = v
		}
		s["description"] = p.Desc
		props[p.Name] = s
		if p.Required || p.In == "path" {
			required = append(required, p.Name)
		}
	}
	return docs.Schema{"type": "object", "properties": props, "required": required, "additionalProperties": false}
}

func (t Tool) outputSchema() docs.Schema {
	if s := t.op().Response; s != nil {
		return docs.Inline(s)
	}
	return docs.Schema{"type": "object"}
}

func (t Tool) sdkTool() *sdk.Tool {
	return &sdk.Tool{Name: t.Name, Title: t.Title, Description: t.Description + " (REST: GET " + t.Path + ")",
		InputSchema: t.inputSchema(), OutputSchema: t.outputSchema(),
		Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: ptr(false)}}
}

func ptr[T any](v T) *T { return &v }

func (t Tool) handle(_ context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
	var c *call
	if ti := req.Extra; ti != nil && ti.TokenInfo != nil {
		c, _ = ti.TokenInfo.Extra[callKey].(*call)
	}
	if c == nil {
		return nil, errors.New("tool called outside an authenticated MCP request")
	}
	args := map[string]any{}
	if raw := req.Params.Arguments; len(raw) > 0 && string(raw) != "null" {
		if err := json.Unmarshal(raw, &args); err != nil {
			return c.invalidArgs("arguments are not a JSON object.", problem.FieldError{Field: "arguments", Rule: "json_object",
				Pointer: "/", Detail: err.Error()}), nil
		}
	}
	if errs := docs.Validate(t.inputSchema(), roundTrip(args), nil); len(errs) > 0 {
		return c.invalidArgs("arguments do not match the input schema: "+strings.Join(errs, "; "), schemaErrors(errs)...), nil
	}
	path, q, p := t.request(args)
	if p != nil {
		return c.toolError(p), nil
	}
	status, ct, body := c.get(path, q)
	var doc map[string]any
	if err := json.Unmarshal(body, &doc); err != nil {
		return nil, fmt.Errorf("GET %s answered %d with a body that is not a JSON object", t.Path, status)
	}
	res := &sdk.CallToolResult{StructuredContent: doc, Content: []sdk.Content{&sdk.TextContent{Text: string(body)}}}
	if status >= 400 || strings.HasPrefix(ct, "application/problem+json") {
		res.IsError = true
	}
	return res, nil
}

// request is the path and query of the tool's operation for args (which passed the
// input schema). The id argument is parsed as an id of the tool's kind and written in
// its canonical form, so the path is always the tool's own operation; an id that is not
// one is the invalid_request problem of a malformed id, and nothing is dispatched.
func (t Tool) request(args map[string]any) (string, url.Values, *problem.Problem) {
	path, q := t.Path, url.Values{}
	kind := t.idKind()
	for k, v := range args {
		s := scalar(v)
		if k != "id" || kind == "" {
			q.Set(k, s)
			continue
		}
		if kind == ids.Request { // not a UUID kind
			if !ids.ValidRequestID(s) {
				return "", nil, problem.Invalid("id is not a request id (req_ and 24 hex digits).",
					problem.FieldError{Field: "id", Rule: "id", Value: s, Pointer: "/id", Detail: "tool argument id"})
			}
			path = strings.Replace(path, "{id}", s, 1)
			continue
		}
		u, err := ids.Parse(kind, s)
		if err != nil {
			return "", nil, problem.Invalid(fmt.Sprintf("id is not a %s<uuid> id or a raw UUID.", kind),
				problem.FieldError{Field: "id", Rule: "id", Value: s, Pointer: "/id", Detail: "tool argument id"})
		}
		path = strings.Replace(path, "{id}", ids.Format(kind, u), 1)
	}
	if strings.Contains(path, "{") {
		return "", nil, problem.Invalid("The id argument is required.",
			problem.FieldError{Field: "id", Rule: "required", Value: nil, Pointer: "/id", Detail: "tool argument id"})
	}
	return path, q, nil
}

// invalidArgs is a tool error for arguments that fail the input schema: the
// invalid_request problem document a REST call with such parameters would get, one
// errors[] entry per argument at fault.
func (c *call) invalidArgs(detail string, errs ...problem.FieldError) *sdk.CallToolResult {
	return c.toolError(problem.Invalid(detail, errs...))
}

// schemaErrors turns the input schema's faults ("<pointer>: <what>", docs.Validate) into
// errors[] entries: the argument named by the pointer, rule schema, the fault as detail.
func schemaErrors(faults []string) []problem.FieldError {
	out := make([]problem.FieldError, 0, len(faults))
	for _, f := range faults {
		at, what, _ := strings.Cut(f, ": ")
		field := strings.TrimPrefix(at, "/")
		if field == "" {
			field = "arguments"
		}
		out = append(out, problem.FieldError{Field: field, Rule: "schema", Pointer: at, Detail: what})
	}
	return out
}

// toolError is a tool error carrying p, finished as the MCP request's problem document.
func (c *call) toolError(p *problem.Problem) *sdk.CallToolResult {
	p.Finish(c.srv.Config.DocsURL(), c.outer.ID)
	b, _ := json.Marshal(p)
	var doc map[string]any
	_ = json.Unmarshal(b, &doc)
	return &sdk.CallToolResult{IsError: true, StructuredContent: doc, Content: []sdk.Content{&sdk.TextContent{Text: string(b)}}}
}

func scalar(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	case bool:
		return strconv.FormatBool(x)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

func roundTrip(v any) any {
	b, _ := json.Marshal(v)
	var out any
	_ = json.Unmarshal(b, &out)
	return out
}
