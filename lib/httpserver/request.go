package httpserver

import (
	"context"
	"net/netip"
	"strconv"

	json "github.com/goccy/go-json"
	"github.com/valyala/fasthttp"

	"svc/lib/apikey"
	"svc/lib/idempotency"
	"svc/lib/limits"
)

// Request is one call in flight. It lives only as long as the handler runs: like the
// fasthttp.RequestCtx it wraps, it must not be kept or used from another goroutine after
// the handler returns.
type Request struct {
	Ctx *fasthttp.RequestCtx
	// ID is the request id (req_…), also sent as the Request-Id header.
	ID string
	// Key is the authenticated key; nil on public routes.
	Key *apikey.Key
	// Version is the API version in use (a dated version).
	Version string
	// Limits is the rate-limit decision of this request (nil on public routes).
	Limits *limits.Decision

	route    *compiled
	params   []param
	srv      *Server
	pending  func() (idempotency.Stored, bool)
	idem     *idemState  // the Idempotency-Key request's state (nil without one)
	charged  bool        // the gate spent one request of the key's windows
	dryRun   bool        // the route's DryRunParam is "true" (DryRun)
	body     *[]byte     // the pooled buffer holding the body read by readBody (nil if none)
	bodyHeld int         // bytes of the body budget charged for it
	budget   *bodyBudget // the budget charged (nil if none)
}

// SetPending tells the server that a failed (5xx) answer is ambiguous: the work may
// still complete. For an Idempotency-Key request the reservation is then kept, and wait
// (run in the background, after the response) decides it: true stores the response it
// returns as the key's result; false releases the key for a retry. Until then a retry
// gets idempotency_key_in_use, so no retry can double the work.
func (r *Request) SetPending(wait func() (idempotency.Stored, bool)) { r.pending = wait }

// Idempotent reports whether the request carries an Idempotency-Key on a route that
// honours it.
func (r *Request) Idempotent() bool {
	return r.route.Idempotent && len(r.Ctx.Request.Header.Peek("Idempotency-Key")) > 0
}

// DryRun reports whether the request asked for a dry run (Route.DryRunParam): the
// handler runs its checks and answers, but stores and produces nothing.
func (r *Request) DryRun() bool { return r.dryRun }

// Context returns a context for calls to stores made on behalf of this request. It is
// not the fasthttp.RequestCtx (whose Done channel races with server shutdown); stores
// bound their own calls with timeouts, and shutdown waits for handlers to finish.
func (r *Request) Context() context.Context { return context.Background() }

// RoutePath is the path pattern of the request's route ("/app/invite/{token}"): what
// a log line names, since a path's parameters may be secrets (a sign-in link's token).
func (r *Request) RoutePath() string { return r.route.Path }

// Param returns the path parameter name ("" if absent).
func (r *Request) Param(name string) string {
	for _, p := range r.params {
		if p.name == name {
			return p.value
		}
	}
	return ""
}

// Query returns the query parameter name ("" if absent).
func (r *Request) Query(name string) string {
	return string(r.Ctx.QueryArgs().Peek(name))
}

// Body returns the request body. The slice belongs to fasthttp and is valid only
// during the handler.
func (r *Request) Body() []byte { return r.Ctx.PostBody() }

// ReleaseBody gives the body's buffer and its bytes of the in-flight budget
// (SVC_MAX_INFLIGHT_BODY_BYTES) back before the answer is written, for a hook that will
// wait before it: Body is empty afterwards.
func (r *Request) ReleaseBody() { r.srv.releaseBody(r) }

// ClientIP is the client's address as the allow-lists see it: the peer, or behind a
// trusted proxy (SVC_TRUSTED_PROXIES) the address it forwarded (auth.go).
func (r *Request) ClientIP() netip.Addr { return r.srv.clientIP(r.Ctx) }

// Server returns the server handling the request (config, stores).
func (r *Request) Server() *Server { return r.srv }

// JSON writes v as the JSON response with status.
func (r *Request) JSON(status int, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	r.Ctx.SetStatusCode(status)
	r.Ctx.SetContentType("application/json")
	r.Ctx.SetBody(b)
	return nil
}

// Raw writes body with status and content type as given.
func (r *Request) Raw(status int, contentType string, body []byte) {
	r.Ctx.SetStatusCode(status)
	r.Ctx.SetContentType(contentType)
	r.Ctx.SetBody(body)
}

// HTML writes an HTML page with status (an application's pages: Route.Page).
func (r *Request) HTML(status int, page []byte) {
	r.Raw(status, "text/html; charset=utf-8", page)
}

// SeeOther redirects to location (a path of this server) with 303 See Other: the answer
// to a form posted to a page route, and to a page that needs a sign-in first.
func (r *Request) SeeOther(location string) {
	r.Ctx.Response.Header.Set("Location", location)
	r.Ctx.SetStatusCode(303)
	r.Ctx.Response.ResetBody()
}

// List is the envelope of every list response.
type List[T any] struct {
	Data []T      `json:"data"`
	Meta ListMeta `json:"meta"`
}

// ListMeta carries the cursor of the next page; NextCursor is null on the last page.
type ListMeta struct {
	NextCursor *string `json:"next_cursor"`
	// Offset paging (deprecated) reports where the next page starts.
	NextOffset *int `json:"next_offset,omitempty"`
	// Extra holds a list's own members of meta, written after these (GET /rejections'
	// counts). Their names must not be the ones above.
	Extra map[string]any `json:"-"`
}

// MarshalJSON writes the members above, then Extra's (sorted by name).
func (m ListMeta) MarshalJSON() ([]byte, error) {
	type plain ListMeta // the members without this method
	b, err := json.Marshal(plain(m))
	if err != nil || len(m.Extra) == 0 {
		return b, err
	}
	x, err := json.Marshal(m.Extra)
	if err != nil {
		return nil, err
	}
	return append(append(b[:len(b)-1], ','), x[1:]...), nil
}

// Itoa is strconv.Itoa, for handlers building headers.
func Itoa(n int) string { return strconv.Itoa(n) }
