package httpserver

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"svc/lib/apikey"
	"svc/lib/idempotency"
	"svc/lib/ids"
	"svc/lib/limits"
	"svc/lib/problem"
)

// Deps are the stores every HTTP role shares.
type Deps struct {
	Keys    apikey.Authenticator // finds the key of a bearer secret
	Limits  *limits.Limiter
	Idem    *idempotency.Store
	Metrics *Metrics
	Log     *slog.Logger
	// OneServer says Limits and Idem talk to one Redis server, not a cluster: the gate
	// then reserves an Idempotency-Key and takes from the key's windows in one call
	// (keys of different hash slots in one function), instead of two round trips.
	OneServer bool
}

// Server applies the API's conventions to a set of routes: request ids, routing (404,
// 405), authentication, versions, scopes, rate limits, idempotency, problem documents,
// panics, metrics. Every HTTP role (and `svc dev`, with all routes at once) uses it.
type Server struct {
	Config Config
	Deps   Deps
	rt     *router
	// noKey is what a response declares before a key is known: the default key's
	// windows with nothing spent.
	noKey limits.Decision
	now   func() time.Time
	// crossSlot: Redis refused reserve_gate's keys of several hash slots (a cluster
	// behind one address); the gate makes its two calls since, each of one slot
	// (oneServer, refusedAcrossSlots).
	crossSlot atomic.Bool
	gates     *gateBatcher // the gates of concurrent requests on one Redis server
	slotGates sync.Map     // hash slot -> *gateBatcher: the windows' calls on a cluster
	bodies    *bodyBudget  // bodies read once a key was checked
	public    *bodyBudget  // bodies read before any key (public routes)
	bodyBufs  sync.Pool    // *[]byte of at most maxPooledBody: reused body buffers
}

// NewServer returns a Server for routes.
func NewServer(cfg Config, deps Deps, routes []Route) *Server {
	s := &Server{Config: cfg, Deps: deps, rt: newRouter(routes),
		noKey: limits.Full(limits.Windows(apikey.DefaultBurst, apikey.DefaultDaily)), now: time.Now,
		bodies: &bodyBudget{limit: int64(cfg.MaxInflightBodyBytes), what: "request bodies"},
		public: &bodyBudget{limit: int64(cfg.MaxInflightPublicBodyBytes), what: "request bodies without a key"}}
	s.gates = s.newGateBatcher()
	for _, c := range s.rt.all {
		if c.Public && s.bodyLimit(c) > cfg.MaxInflightPublicBodyBytes {
			s.log().Warn("a public route's body ceiling is over SVC_MAX_INFLIGHT_PUBLIC_BODY_BYTES: its largest bodies get 503",
				"route", c.Method+" "+c.Path, "ceiling", s.bodyLimit(c), "budget", cfg.MaxInflightPublicBodyBytes)
		}
	}
	return s
}

// newGateBatcher returns a batcher of reserve_gate calls through the limiter's client.
func (s *Server) newGateBatcher() *gateBatcher {
	table := []any{0, 0, 0} // no records' tables: every request takes from its windows only
	if s.Deps.Idem != nil {
		table = s.Deps.Idem.Buckets().Args() // the store's timing, fixed once it serves
	}
	return &gateBatcher{inFlight: cmp.Or(s.Config.GateCallsInFlight, math.MaxInt), run: func(batch []*gateCall) error {
		s.Deps.Metrics.GateBatch.Observe(float64(len(batch)))
		return runReserveGate(context.Background(), s.Deps.Limits.Redis(), batch, s.now(), table)
	}}
}

// Routes returns the API's routes served (OpenAPI and documentation use it): every
// route but an application's pages.
func (s *Server) Routes() []Route {
	out := make([]Route, 0, len(s.rt.all))
	for _, c := range s.rt.all {
		if !c.Page {
			out = append(out, c.Route)
		}
	}
	return out
}

// HTTPServer returns a fasthttp server with the configured limits and timeouts.
// Request bodies are streamed (body.go): fasthttp reads the headers and at most one body
// byte (MaxRequestBodySize 1 is the size of that pre-read, not a cap), and Handle reads
// the body only once the route and the key allow it. A body announced over its route's
// ceiling (MaxBodyBytes, a route's MaxBody, none for a GET route) is answered 413
// payload_too_large without reading any of it.
func (s *Server) HTTPServer() *fasthttp.Server {
	return &fasthttp.Server{
		Handler:                       s.Handle,
		ErrorHandler:                  s.serverError,
		HeaderReceived:                s.headerReceived,
		StreamRequestBody:             true,
		MaxRequestBodySize:            1,
		DisablePreParseMultipartForm:  true,
		Name:                          "svc",
		ReadBufferSize:                readBufferSize,
		ReadTimeout:                   s.Config.ReadTimeout,
		WriteTimeout:                  s.Config.WriteTimeout,
		IdleTimeout:                   s.Config.IdleTimeout,
		NoDefaultServerHeader:         true,
		NoDefaultDate:                 false,
		DisableHeaderNamesNormalizing: false,
		ReduceMemoryUsage:             false,
		CloseOnShutdown:               true,
		ConnState:                     s.countConn,
		Logger:                        connLogger{s.log()}, // never logs request bytes (they hold secrets)
	}
}

// log is the server's logger (Deps.Log, else the process default).
func (s *Server) log() *slog.Logger {
	if s.Deps.Log != nil {
		return s.Deps.Log
	}
	return slog.Default()
}

// countConn keeps svc_http_open_connections.
func (s *Server) countConn(_ net.Conn, st fasthttp.ConnState) {
	if s.Deps.Metrics == nil {
		return
	}
	switch st {
	case fasthttp.StateNew:
		s.Deps.Metrics.Conns.Inc()
	case fasthttp.StateClosed, fasthttp.StateHijacked:
		s.Deps.Metrics.Conns.Dec()
	}
}

// Serve serves ln (at most Config.MaxConnsPerIP connections from one client address)
// until ctx is done, then stops accepting, drains in-flight requests (up to
// ShutdownTimeout) and returns.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	hs := s.HTTPServer()
	errc := make(chan error, 1)
	ln = s.limitConnsPerIP(ln)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), s.Config.ShutdownTimeout)
	defer cancel()
	return hs.ShutdownWithContext(sctx)
}

// serverError answers failures fasthttp detects before a handler runs. A request it
// cannot read is 422 invalid_request with an errors[] entry naming the part to fix.
func (s *Server) serverError(ctx *fasthttp.RequestCtx, err error) {
	var p *problem.Problem
	if errors.Is(err, fasthttp.ErrBodyTooLarge) {
		p = problem.New(problem.PayloadTooLarge, "The body is larger than %d bytes.", s.Config.MaxBodyBytes)
	} else if isTimeout(err) {
		if !partialRequest(err) {
			// A connection that sent nothing within the read timeout is closed without an
			// answer: one would be a response to no request.
			_ = ctx.Conn().Close()
			return
		}
		// Part of a request came, not its end: most often lines ended by a bare LF, which
		// fasthttp does not take as the headers' end. The client waited the read timeout;
		// it is told why instead of meeting a closed connection.
		p = problem.Invalid("The request was not complete within the read timeout: its headers did not end.",
			problem.FieldError{Field: "request", Rule: "http_syntax", Value: nil,
				Detail: fmt.Sprintf("Send the request line and headers within %s, each line ended by CRLF (\\r\\n) and the headers by an empty line (CRLF CRLF).", s.Config.ReadTimeout)})
	} else {
		p = malformedProblem(err)
	}
	ctx.Response.SetConnectionClose()
	s.writeProblem(ctx, ids.RequestID(), nil, p)
}

// partialRequest reports whether err, fasthttp's reading error, came after some bytes
// of a request: fasthttp then adds how many it buffered ("buffer size=N, contents: …",
// never echoed), and nothing when none came.
func partialRequest(err error) bool {
	_, after, ok := strings.Cut(err.Error(), "buffer size=")
	return ok && !strings.HasPrefix(after, "0,")
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// Handle is the fasthttp handler.
func (s *Server) Handle(ctx *fasthttp.RequestCtx) { s.handle(ctx) }

// Dispatch serves ctx, a request a handler builds and runs in-process (the MCP
// endpoint's tool calls), exactly as Handle serves a client's: authenticated, versioned,
// scoped, and counted on its own, taking one unit of its key's windows through the gate
// (given back only if it is answered 4xx). It returns that request's rate-limit
// decision, the windows as they stand after it (nil when no key was known).
func (s *Server) Dispatch(ctx *fasthttp.RequestCtx) *limits.Decision { return s.handle(ctx).Limits }

// handle serves ctx and returns its request, finished.
func (s *Server) handle(ctx *fasthttp.RequestCtx) (r *Request) {
	start := time.Now()
	ctx.Response.Header.DisableNormalizing() // send RateLimit-Policy, not Ratelimit-Policy
	r = &Request{Ctx: ctx, ID: ids.RequestID(), srv: s}
	routeName := "unmatched"
	defer func() {
		if v := recover(); v != nil {
			s.Deps.Log.Error("panic", "request_id", r.ID, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
			ctx.Response.Reset()
			s.writeProblem(ctx, r.ID, r.Limits, problem.New(problem.InternalError, "An unexpected failure; request_id identifies it."))
		}
		s.releaseBody(r)
		if unreadBody(ctx) {
			ctx.SetConnectionClose()
		}
		s.observe(ctx, routeName, start)
	}()
	path := stripVersion(string(ctx.Path()))
	c, allow := s.rt.match(string(ctx.Method()), path, &r.params)
	if c != nil && c.Page && path != string(ctx.Path()) {
		c, allow = nil, nil // an application's pages are not API operations: no /v1 alias
	}
	if c != nil && steersPath(ctx.URI().PathOriginal()) {
		c, allow = nil, nil // an id holding a slash or a dot segment names no operation's object
	}
	if c != nil {
		routeName = c.Method + " " + c.Path
	}
	if p := framingConflict(ctx); p != nil {
		s.writeProblem(ctx, r.ID, nil, p)
		return
	}
	if announcedBody(ctx) > s.Config.MaxBodyBytes {
		ctx.SetConnectionClose()
		s.writeProblem(ctx, r.ID, nil, problem.New(problem.PayloadTooLarge, "The body is larger than %d bytes.", s.Config.MaxBodyBytes))
		return
	}
	if c == nil {
		if len(allow) > 0 {
			p := problem.New(problem.MethodNotAllowed, "%s does not serve %s.", path, ctx.Method())
			p.Allow = allow
			s.writeProblem(ctx, r.ID, nil, p)
			return
		}
		p := problem.New(problem.NotFound, "No operation at %s.", path)
		p.SuggestedAction = "Check the path: the discovery document, GET /.well-known/svc, lists every operation."
		s.writeProblem(ctx, r.ID, nil, p)
		return
	}
	r.route = c
	s.serve(r)
	return r
}

// serve runs the conventions in order, then the handler. The body is read after the
// checks that need only the headers (a public route's handler authenticates itself, so
// its body is read first, from the budget of bodies without a key).
func (s *Server) serve(r *Request) {
	c := r.route
	if c.Public {
		p := s.bodyRefused(r)
		if p == nil {
			p = encodingRefused(r)
		}
		if p == nil {
			p = s.readBody(r, s.bodyLimit(c), s.public)
		}
		if p != nil {
			s.writeProblem(r.Ctx, r.ID, nil, p)
			return
		}
		s.finish(r, c.Handle(r))
		return
	}
	k, p := s.authenticate(r)
	if p != nil {
		s.refuse(r, k, p)
		return
	}
	r.Key = k
	if p := s.version(r); p != nil {
		s.refuse(r, k, p)
		return
	}
	if c.Scope != "" && !r.Key.HasScope(c.Scope) {
		p := problem.New(problem.InsufficientScope, "%s %s needs the scope %s.", c.Method, c.Path, c.Scope)
		p.RequiredScope, p.GrantedScopes = c.Scope, r.Key.Scopes
		s.refuse(r, k, p)
		return
	}
	if p := s.dryRunParam(r); p != nil {
		s.refuse(r, k, p)
		return
	}
	if p := s.bodyRefused(r); p != nil {
		s.refuse(r, k, p)
		return
	}
	if p := encodingRefused(r); p != nil {
		s.refuse(r, k, p)
		return
	}
	if p := s.readBody(r, s.bodyLimit(c), s.bodies); p != nil {
		s.refuse(r, k, p)
		return
	}
	if c.Admit != nil {
		if p := c.Admit(r); p != nil {
			r.Limits = s.peek(r, r.Key) // the key's own windows, nothing spent
			s.refused(r, p)
			s.writeProblem(r.Ctx, r.ID, r.Limits, p)
			return
		}
	}
	if p := s.gate(r); p != nil {
		s.refused(r, p)
		s.writeProblem(r.Ctx, r.ID, r.Limits, p)
		return
	}
	if r.idem != nil {
		s.idempotent(r)
		return
	}
	err := c.Handle(r)
	s.finish(r, err)
	s.refundIfRejected(r)
}

// refused tells the route's Refused hook of a 4xx the server answers itself.
func (s *Server) refused(r *Request, p *problem.Problem) {
	if r.route.Refused == nil {
		return
	}
	if st := problem.Table[p.Code].Status; st >= 400 && st < 500 {
		r.route.Refused(r, p)
	}
}

// DryRunQuery is the query parameter of a dry run (Route.DryRunParam): a write operation
// without one refuses it (422, rule dry_run_unsupported), so that a request meant as a
// dry run never changes anything for real.
const DryRunQuery = "validate_only"

// dryRunParam reads the route's dry-run parameter (Route.DryRunParam) into r.dryRun:
// "true" or "false" (or absent); anything else is 422. A write route without a dry run
// refuses DryRunQuery.
func (s *Server) dryRunParam(r *Request) *problem.Problem {
	name := r.route.DryRunParam
	if name == "" && r.route.Method != "GET" && r.Ctx.QueryArgs().Has(DryRunQuery) {
		return problem.Invalid(fmt.Sprintf("%s %s has no dry run: it would run for real, so %s is refused.", r.route.Method, r.route.Path, DryRunQuery),
			problem.QueryParam(DryRunQuery, "dry_run_unsupported", nil))
	}
	if name == "" || !r.Ctx.QueryArgs().Has(name) {
		return nil
	}
	switch v := r.Query(name); v {
	case "true":
		r.dryRun = true
	case "false":
	default:
		if len(v) > 64 {
			v = v[:64]
		}
		return problem.Invalid("Some query parameters are not valid; see errors[].", problem.QueryParam(name, "boolean", v))
	}
	return nil
}

// finish writes a handler's error, if any, and the common headers.
func (s *Server) finish(r *Request, err error) {
	if err != nil {
		var p *problem.Problem
		if !errors.As(err, &p) {
			s.Deps.Log.Error("handler failed", "request_id", r.ID, "route", r.route.Path, "err", err.Error())
			p = problem.New(problem.InternalError, "An unexpected failure; request_id identifies it.")
		}
		r.Ctx.Response.ResetBody()
		s.writeProblem(r.Ctx, r.ID, r.Limits, p)
		return
	}
	if r.route.Page {
		r.Ctx.Response.Header.Set("Request-Id", r.ID)
		return
	}
	s.commonHeaders(r.Ctx, r.ID, r.Limits) // SVC-Version is set as the version is resolved
}

// readBufferSize bounds the request line and headers (16 KiB: long query strings fit).
const readBufferSize = 16 << 10
