package docs

import (
	"fmt"
	"maps"
	"sort"
	"strconv"
	"strings"

	json "github.com/goccy/go-json"

	"svc/lib/apikey"
	"svc/lib/httpserver"
	"svc/lib/limits"
	"svc/lib/problem"
)

// Key returns the table key of a route: "METHOD /path".
func Key(r httpserver.Route) string { return r.Method + " " + r.Path }

// Codes returns every problem code an operation can answer with: those the route's
// conventions add (authentication, version, scope, limits, body ceiling, idempotency),
// those of its own entry, and internal_error. Sorted by status, then code.
func Codes(r httpserver.Route, op Op) []problem.Code {
	set := map[problem.Code]bool{problem.InternalError: true}
	if !r.Public {
		for _, c := range []problem.Code{problem.Unauthorized, problem.InvalidKey, problem.KeyRevoked, problem.KeyExpired,
			problem.IPNotAllowed, problem.UnsupportedVersion, problem.RateLimited, problem.QuotaExceeded, problem.ServiceUnavailable} {
			set[c] = true
		}
		if r.Scope != "" {
			set[problem.InsufficientScope] = true
		}
	}
	if r.Method == "POST" || r.Method == "PUT" || r.Method == "PATCH" {
		set[problem.PayloadTooLarge] = true
	}
	if r.Idempotent {
		set[problem.IdempotencyKeyReuse], set[problem.IdempotencyKeyInUse], set[problem.InvalidRequest] = true, true, true
	}
	for _, c := range op.Codes {
		set[c] = true
	}
	out := make([]problem.Code, 0, len(set))
	for c := range set {
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool {
		si, sj := problem.Table[out[i]].Status, problem.Table[out[j]].Status
		if si != sj {
			return si < sj
		}
		return out[i] < out[j]
	})
	return out
}

// ProblemExample returns the problem document a request would get for code, as a
// decoded JSON value.
func ProblemExample(docsURL string, code problem.Code) map[string]any {
	return roundTrip(exampleProblem(docsURL, code)).(map[string]any)
}

// exampleProblem is the example problem document of code, fields in document order.
func exampleProblem(docsURL string, code problem.Code) *problem.Problem {
	p := problem.New(code, "%s", problem.Table[code].Condition)
	switch code {
	case problem.InsufficientScope:
		p.RequiredScope, p.GrantedScopes = "plans:read", []string{"events:write"}
	case problem.KeyExpired:
		p.ExpiredAt = "2026-09-01T00:00:00Z"
	case problem.IPNotAllowed:
		p.ClientIP = "203.0.113.7"
	case problem.InvalidRequest:
		p.Errors = []problem.FieldError{{Field: "events[0].occurred_at", Rule: "iso8601_utc", Value: "yesterday", Pointer: "/events/0/occurred_at"}}
	}
	p.Finish(docsURL, "req_8f14e45fceea167a5a36dedd")
	return p
}

// roundTrip returns v as encoding/json decodes it (maps, []any, float64).
func roundTrip(v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		panic(err)
	}
	return out
}

// RateLimit is an operation's x-rateLimit: the windows of a default key it spends from
// (nil for public operations, which spend nothing).
func RateLimit(r httpserver.Route) map[string]any {
	if r.Public {
		return nil
	}
	b, d := limits.Windows(apikey.DefaultBurst, apikey.DefaultDaily)
	return map[string]any{
		"scope": "key",
		"cost":  1,
		"windows": []any{
			map[string]any{"name": b.Name, "quota": b.Quota, "window_seconds": b.Seconds, "seconds": b.Seconds},
			map[string]any{"name": d.Name, "quota": d.Quota, "window_seconds": d.Seconds, "seconds": d.Seconds},
		},
		"policy": limits.Policy(b, d),
		"note":   "Windows of a default key, counted per key across all operations; an administrator can raise them per key. GET /limits and the RateLimit-* headers give the calling key's own.",
	}
}

var rateHeaders = []string{"RateLimit-Policy", "RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset", "RateLimit", "Request-Id"}

func headerComponents() map[string]any {
	h := func(desc string, s Schema) map[string]any { return map[string]any{"description": desc, "schema": s} }
	return map[string]any{
		"RateLimit-Policy":    h(`Both windows: "burst";q=<quota>;w=<seconds>, "daily";q=<quota>;w=<seconds>.`, Schema{"type": "string"}),
		"RateLimit-Limit":     h("Ceiling of the window closest to being spent.", Schema{"type": "integer"}),
		"RateLimit-Remaining": h("What is left in that window.", Schema{"type": "integer"}),
		"RateLimit-Reset":     h("Seconds until that window refills.", Schema{"type": "integer"}),
		"RateLimit":           h(`IETF draft form: "burst";r=<remaining>;t=<reset>, "daily";r=…;t=….`, Schema{"type": "string"}),
		"Request-Id":          h("The request id (req_…), also request_id in problem documents.", Schema{"type": "string"}),
		"SVC-Version":         h("The API version used for the request.", Schema{"type": "string"}),
		"Retry-After":         h("Seconds to wait before retrying (429, 503, idempotency_key_in_use).", Schema{"type": "integer"}),
		"Idempotent-Replayed": h("true when the response is the stored first response of this Idempotency-Key.", Schema{"type": "string"}),
		"Deprecation":         h("On offset-paged responses: @<unix time> of the deprecation.", Schema{"type": "string"}),
		"Sunset":              h("On offset-paged responses: HTTP-date after which offset paging may stop.", Schema{"type": "string"}),
	}
}

// OpenAPI builds the OpenAPI 3.1 document of routes as served at publicURL. Every route
// is described; one without an entry in Operations gets its route's summary only (a
// test keeps that from happening).
func OpenAPI(routes []httpserver.Route, publicURL string) map[string]any {
	docsURL := publicURL + "/developers"
	paths := map[string]any{}
	sorted := append([]httpserver.Route(nil), routes...)
	sort.Slice(sorted, func(i, j int) bool { return Key(sorted[i]) < Key(sorted[j]) })
	tags := map[string]bool{}
	for _, r := range sorted {
		op := Operations[Key(r)]
		item, _ := paths[r.Path].(map[string]any)
		if item == nil {
			item = map[string]any{}
			paths[r.Path] = item
		}
		item[strings.ToLower(r.Method)] = operation(r, op, docsURL)
		if op.Tag != "" {
			tags[op.Tag] = true
		}
	}
	var tagList []any
	for _, t := range []string{"Events", "Rollups", "Plans", "Campaigns", "Studies", "Account", "Privacy", "Webhooks", "Discovery", "Operations"} {
		if tags[t] {
			tagList = append(tagList, map[string]any{"name": t})
		}
	}
	schemas := map[string]any{}
	for n, s := range components() {
		schemas[n] = s
	}
	return map[string]any{
		"openapi":           "3.1.0",
		"jsonSchemaDialect": "https://spec.openapis.org/oas/3.1/dialect/base",
		"info": map[string]any{
			"title":   "svc API",
			"version": "v1 (" + httpserver.Stable + ")",
			"summary": "Server-side events in, daily pixel rollups, media plans and actuals out.",
			"description": "Workspace-scoped HTTP API over JSON. Every call carries Authorization: Bearer <API key>. " +
				"Failures are RFC 9457 problem documents (application/problem+json). Every response carries RateLimit-Policy, " +
				"RateLimit-Limit, RateLimit-Remaining and RateLimit-Reset. Paths also answer under /v1 of the public URL. " +
				"Discovery: " + publicURL + "/.well-known/svc. Docs: " + docsURL + ".",
		},
		"servers":      []any{map[string]any{"url": publicURL + "/v1", "description": "v1 (private beta)"}, map[string]any{"url": publicURL, "description": "the same operations without the /v1 segment"}},
		"externalDocs": map[string]any{"url": docsURL, "description": "Developer pages"},
		"tags":         tagList,
		"paths":        paths,
		"components": map[string]any{
			"schemas": schemas,
			"headers": headerComponents(),
			"securitySchemes": map[string]any{"bearer": map[string]any{
				"type": "http", "scheme": "bearer",
				"description": "A workspace API key: svc_live_… or svc_sandbox_… (a sandbox key sees only showroom data). Scopes: " + strings.Join(apikey.Scopes, ", ") + ".",
			}},
		},
	}
}

func operation(r httpserver.Route, op Op, docsURL string) map[string]any {
	summary := r.Summary
	if summary == "" {
		summary = op.Description
	}
	o := map[string]any{
		"operationId": operationID(r),
		"summary":     summary,
		"description": op.Description,
	}
	if op.Tag != "" {
		o["tags"] = []any{op.Tag}
	}
	var ps []any
	for _, p := range op.Params {
		m := map[string]any{"name": p.Name, "in": p.In, "description": p.Desc, "required": p.Required || p.In == "path", "schema": p.Schema}
		if p.Example != nil {
			m["example"] = p.Example
		}
		if p.Schema["deprecated"] == true {
			m["deprecated"] = true // where tools read it: the Parameter Object
		}
		ps = append(ps, m)
	}
	if !r.Public {
		ps = append(ps,
			map[string]any{"name": "version", "in": "query", "description": "API version: a served date (GET /versions), stable or next. Wins over SVC-Version and the key's pin.", "schema": Schema{"type": "string"}},
			map[string]any{"name": "SVC-Version", "in": "header", "description": "API version, as the version parameter.", "schema": Schema{"type": "string"}})
	}
	if r.Idempotent {
		ps = append(ps, map[string]any{"name": "Idempotency-Key", "in": "header", "description": "One unique key per logical request, reused on every retry of it: a repeat returns the first response and does nothing twice.", "schema": Schema{"type": "string", "maxLength": 255}})
	}
	if r.DryRunParam != "" {
		ps = append(ps, map[string]any{"name": r.DryRunParam, "in": "query", "description": "true: a dry run. Every check of a real request runs " +
			"(key, scope, limits, the Idempotency-Key's shape, the body, the pixel, each event's rules) and the answer is 200 with the body a " +
			"202 would carry; nothing is stored or produced and an Idempotency-Key is not reserved. It spends one request of the key's windows " +
			"like any request (a 4xx spends none).", "schema": Schema{"type": "boolean", "default": false}})
	}
	if len(ps) > 0 {
		o["parameters"] = ps
	}
	if op.Body != "" {
		content := map[string]any{"schema": ref(op.Body)}
		if op.BodyExample != nil {
			content["example"] = op.BodyExample
		}
		if len(op.BodyExamples) > 0 {
			exs := map[string]any{}
			for _, e := range op.BodyExamples {
				exs[e.Name] = map[string]any{"summary": e.Summary, "value": e.Value}
			}
			content["examples"] = exs
		}
		o["requestBody"] = map[string]any{"required": true, "content": map[string]any{"application/json": content}}
	}
	if r.Public {
		o["security"] = []any{}
	} else {
		scopes := []any{}
		if r.Scope != "" {
			scopes = append(scopes, r.Scope)
		}
		o["security"] = []any{map[string]any{"bearer": scopes}}
		o["x-required-scope"] = nullableScope(r.Scope)
		o["x-rateLimit"] = RateLimit(r)
	}
	if r.Idempotent {
		o["x-idempotent"] = true
	}
	o["responses"] = responses(r, op, docsURL)
	return o
}

func nullableScope(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func responses(r httpserver.Route, op Op, docsURL string) map[string]any {
	status := op.Status
	if status == 0 {
		status = 200
	}
	ct := op.ContentType
	if ct == "" {
		ct = "application/json"
	}
	success := map[string]any{"description": successDescription(status)}
	media := map[string]any{}
	switch {
	case op.Response != nil:
		media["schema"] = op.Response
	case strings.HasPrefix(ct, "text/"):
		media["schema"] = Schema{"type": "string"}
	}
	if op.Example != nil {
		media["example"] = op.Example
	}
	success["content"] = map[string]any{ct: media}
	headers := map[string]any{"Request-Id": map[string]any{"$ref": "#/components/headers/Request-Id"}}
	if !r.Public {
		for _, h := range append(rateHeaders, "SVC-Version") {
			headers[h] = map[string]any{"$ref": "#/components/headers/" + h}
		}
	}
	if r.Idempotent {
		headers["Idempotent-Replayed"] = map[string]any{"$ref": "#/components/headers/Idempotent-Replayed"}
	}
	success["headers"] = headers
	out := map[string]any{strconv.Itoa(status): success}
	if r.DryRunParam != "" && status != 200 {
		dry := maps.Clone(success)
		dry["description"] = "Dry run (" + r.DryRunParam + "=true): the body the " + strconv.Itoa(status) + " would carry; nothing was stored."
		out["200"] = dry
	}

	byStatus := map[int][]problem.Code{}
	for _, c := range Codes(r, op) {
		st := problem.Table[c].Status
		byStatus[st] = append(byStatus[st], c)
	}
	for st, codes := range byStatus {
		var names []string
		examples := map[string]any{}
		enum := []any{}
		for _, c := range codes {
			names = append(names, string(c))
			enum = append(enum, string(c))
			examples[string(c)] = map[string]any{"summary": problem.Table[c].Title, "value": ProblemExample(docsURL, c)}
		}
		resp := map[string]any{
			"description": "Problem: " + strings.Join(names, ", ") + ". See " + docsURL + "/errors/<code>.",
			"content": map[string]any{"application/problem+json": map[string]any{
				"schema":   Schema{"allOf": []any{ref("Problem"), Schema{"properties": Schema{"code": Schema{"enum": enum}}}}},
				"examples": examples,
			}},
		}
		h := map[string]any{"Request-Id": map[string]any{"$ref": "#/components/headers/Request-Id"}}
		if st == 429 || st == 503 || st == 409 {
			h["Retry-After"] = map[string]any{"$ref": "#/components/headers/Retry-After"}
		}
		if !r.Public {
			for _, n := range rateHeaders {
				h[n] = map[string]any{"$ref": "#/components/headers/" + n}
			}
		}
		resp["headers"] = h
		out[strconv.Itoa(st)] = resp
	}
	return out
}

func successDescription(status int) string {
	switch status {
	case 202:
		return "Accepted."
	case 201:
		return "Created."
	}
	return "OK."
}

// operationID is a stable camel-case id: "GET /plans/{id}/lines" → getPlansIdLines.
func operationID(r httpserver.Route) string {
	var b strings.Builder
	b.WriteString(strings.ToLower(r.Method))
	up := true
	for _, c := range r.Path {
		switch {
		case c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9':
			if up && c >= 'a' && c <= 'z' {
				c -= 'a' - 'A'
			}
			b.WriteRune(c)
			up = false
		default:
			up = true
		}
	}
	return b.String()
}

// Examples walks doc and returns every example with the schema it must satisfy: request
// and response examples of each operation, each problem example, and parameter
// examples. Used by the tests that keep the document honest.
func Examples(doc map[string]any) []Example {
	var out []Example
	paths := doc["paths"].(map[string]any)
	for path, item := range paths {
		for method, o := range item.(map[string]any) {
			op := o.(map[string]any)
			where := strings.ToUpper(method) + " " + path
			if rb, ok := op["requestBody"].(map[string]any); ok {
				for ct, m := range rb["content"].(map[string]any) {
					mm := m.(map[string]any)
					if ex, ok := mm["example"]; ok {
						out = append(out, Example{Where: where + " request " + ct, Schema: mm["schema"].(Schema), Value: ex})
					}
					if exs, ok := mm["examples"].(map[string]any); ok {
						for name, e := range exs {
							out = append(out, Example{Where: where + " request " + ct + " example " + name, Schema: mm["schema"].(Schema), Value: e.(map[string]any)["value"]})
						}
					}
				}
			}
			for st, resp := range op["responses"].(map[string]any) {
				content, _ := resp.(map[string]any)["content"].(map[string]any)
				for ct, m := range content {
					mm := m.(map[string]any)
					s, _ := mm["schema"].(Schema)
					if ex, ok := mm["example"]; ok && s != nil {
						out = append(out, Example{Where: fmt.Sprintf("%s response %s %s", where, st, ct), Schema: s, Value: ex})
					}
					if exs, ok := mm["examples"].(map[string]any); ok {
						for name, e := range exs {
							out = append(out, Example{Where: fmt.Sprintf("%s response %s %s example %s", where, st, ct, name), Schema: s, Value: e.(map[string]any)["value"]})
						}
					}
				}
			}
			ps, _ := op["parameters"].([]any)
			for _, p := range ps {
				pm := p.(map[string]any)
				if ex, ok := pm["example"]; ok {
					out = append(out, Example{Where: where + " parameter " + pm["name"].(string), Schema: pm["schema"].(Schema), Value: ex})
				}
			}
		}
	}
	return out
}

// Example is one example of the document and the schema it must satisfy.
type Example struct {
	Where  string
	Schema Schema
	Value  any
}
