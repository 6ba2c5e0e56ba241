package httpserver

import (
	"bytes"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"svc/lib/problem"
)

// Handler serves one operation. It writes its response through Request's helpers and
// returns nil, or returns an error: a *problem.Problem is written as it is, anything
// else becomes 500 internal_error (logged with the request id, never shown).
type Handler func(r *Request) error

// Route declares one operation. The Server applies, in order: routing, authentication,
// version, scope, limits, idempotency, then Handle.
type Route struct {
	Method string
	// Path is the path under the base URL, with {name} for a parameter segment:
	// "/plans/{id}". Every path also answers under /v1.
	Path string
	// Scope the key must hold; "" means any valid key.
	Scope string
	// Public routes need no key and spend no quota (health, documentation, signed
	// webhooks that authenticate themselves).
	Public bool
	// Page routes are an application's HTML pages (the /app screens, which authenticate
	// their own sessions): public, answered without rate-limit headers, and no API
	// operation, so Server.Routes (OpenAPI, discovery) leaves them out. Their handlers
	// answer every outcome themselves (Request.HTML, Request.SeeOther).
	Page bool
	// Idempotent routes honour the Idempotency-Key header.
	Idempotent bool
	// TakeoverAfter, when positive, lets an identical repeat take over a reservation of
	// an Idempotency-Key that is still pending this long after it was made (its process
	// died, or its outcome is still unknown), instead of getting idempotency_key_in_use
	// until the reservation lapses (Config.IdempotencyPendingTTL). A route may set it
	// only if running the request twice has the effect of running it once, and its
	// first run answers its client within it (see package idempotency).
	TakeoverAfter time.Duration
	// MaxBody overrides Config.MaxBodyBytes downwards for this route (0: the default).
	// A body announced over it is refused (413) before any of it is read. A GET route
	// (and so HEAD) takes no body at all: any announced body is refused the same way.
	MaxBody int
	// DryRunParam names a query parameter ("validate_only") that, set to "true", makes
	// the request a dry run (Request.DryRun): every check runs and one request of the
	// key's windows is spent as usual, but an Idempotency-Key is only checked for its
	// shape, never reserved or answered from, and no answer is stored. Any value other
	// than "true" or "false" is 422 invalid_request (rule boolean), before the gate.
	DryRunParam string
	// Refused, when set, is told of each refusal the server itself answers for this
	// route once the key is known and the body read: the limits' 429s, the
	// Idempotency-Key's 409s and its 422 (too long). It runs on the request's goroutine
	// before the answer is written, so what it spends delays the answer: the edge hands
	// a record to its producer, and holds its brake's 429s there on purpose, their body
	// released first (Request.ReleaseBody; ingest/brake.go). Called for a dry run too
	// (Request.DryRun: the hook records nothing of it, but paces it as any request); not
	// for a 5xx.
	Refused func(r *Request, p *problem.Problem)
	// Admit, when set, runs after the key, version, scope and body checks and before the
	// limits: a problem it returns is the answer (no limit spent; Refused is told of it
	// as of the limits' refusals). It must be cheap and must not block: the edge brakes
	// with it a key whose batches are all refused (ingest/brake.go).
	Admit func(r *Request) *problem.Problem
	// Summary is a one-line description (OpenAPI and developer pages).
	Summary string
	Handle  Handler
}

type compiled struct {
	Route
	segs  []string // "" marks a parameter segment
	names []string
}

// takesBody reports whether the route reads a request body: a GET route (which also
// serves HEAD) takes none.
func (c *compiled) takesBody() bool {
	return c.Method != fasthttp.MethodGet && c.Method != fasthttp.MethodHead
}

// router matches paths to routes: static paths by map, parameterised ones by segments.
type router struct {
	static  map[string][]*compiled
	dynamic []*compiled
	all     []*compiled
}

func newRouter(routes []Route) *router {
	rt := &router{static: map[string][]*compiled{}}
	for _, r := range routes {
		c := &compiled{Route: r}
		c.Public = c.Public || c.Page
		for _, s := range strings.Split(strings.Trim(r.Path, "/"), "/") {
			if strings.HasPrefix(s, "{") && strings.HasSuffix(s, "}") {
				c.segs = append(c.segs, "")
				c.names = append(c.names, s[1:len(s)-1])
			} else {
				c.segs = append(c.segs, s)
			}
		}
		if len(c.names) == 0 {
			rt.static[r.Path] = append(rt.static[r.Path], c)
		} else {
			rt.dynamic = append(rt.dynamic, c)
		}
		rt.all = append(rt.all, c)
	}
	return rt
}

// steersPath reports whether a request's path as sent holds an encoded slash or
// backslash, or a dot segment ("." or "..", also percent-encoded). fasthttp decodes and
// resolves them before routing, so "/pixels/..%2Fme" would be served as "/me": an id
// taken from elsewhere and put in a path (a client's, an MCP tool's) must name an object
// of its route or nothing (404), never steer the request to another operation.
func steersPath(raw []byte) bool {
	if bytes.IndexByte(raw, '%') < 0 && bytes.IndexByte(raw, '.') < 0 {
		return false
	}
	lower := bytes.ToLower(raw)
	if bytes.Contains(lower, []byte("%2f")) || bytes.Contains(lower, []byte("%5c")) {
		return true
	}
	for _, seg := range bytes.Split(lower, []byte("/")) {
		seg = bytes.ReplaceAll(seg, []byte("%2e"), []byte("."))
		if string(seg) == "." || string(seg) == ".." {
			return true
		}
	}
	return false
}

// stripVersion removes a leading /v1 segment.
func stripVersion(path string) string {
	if path == "/v1" {
		return "/"
	}
	if strings.HasPrefix(path, "/v1/") {
		return path[3:]
	}
	return path
}

// match returns the route for method and path, its parameters (into params, unless
// nil), and the methods the path serves (for 405) when only the method is wrong. A trailing slash is ignored, for
// static paths as for parameterised ones ("/developers/md/" is "/developers/md").
func (rt *router) match(method, path string, params *[]param) (*compiled, []string) {
	if cands, ok := rt.static[path]; ok {
		return pick(cands, method)
	}
	if trimmed := strings.TrimRight(path, "/"); trimmed != path && trimmed != "" {
		if cands, ok := rt.static[trimmed]; ok {
			return pick(cands, method)
		}
	}
	segs := strings.Split(strings.Trim(path, "/"), "/")
	var cands []*compiled
	for _, c := range rt.dynamic {
		if segsMatch(c.segs, segs) {
			cands = append(cands, c)
		}
	}
	c, allow := pick(cands, method)
	if c != nil && params != nil {
		j := 0
		for i, s := range c.segs {
			if s == "" {
				*params = append(*params, param{c.names[j], segs[i]})
				j++
			}
		}
	}
	return c, allow
}

func segsMatch(pattern, segs []string) bool {
	if len(pattern) != len(segs) {
		return false
	}
	for i, p := range pattern {
		if p != "" && p != segs[i] || p == "" && segs[i] == "" {
			return false
		}
	}
	return true
}

func pick(cands []*compiled, method string) (*compiled, []string) {
	var allow []string
	for _, c := range cands {
		if c.Method == method || method == fasthttp.MethodHead && c.Method == fasthttp.MethodGet {
			return c, nil
		}
		allow = append(allow, c.Method)
		if c.Method == fasthttp.MethodGet {
			allow = append(allow, fasthttp.MethodHead) // served as the GET without its body
		}
	}
	return nil, allow
}

type param struct{ name, value string }
