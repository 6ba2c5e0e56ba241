package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"

	json "github.com/goccy/go-json"
	"github.com/valyala/fasthttp"

	"svc/api/idempotency"
	"svc/api/ids"
	"svc/api/keys"
	"svc/api/limits"
	"svc/api/problem"
)

// Deps are the stores every HTTP role shares.
type Deps struct {
	Keys    *keys.Store
	Limits  *limits.Limiter
	Idem    *idempotency.Store
	Metrics *Metrics
	Log     *slog.Logger
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
	noKey    limits.Decision
	now      func() time.Time
	bodies   *bodyBudget
	bodyBufs sync.Pool // *[]byte of at most maxPooledBody: reused body buffers
}

// NewServer returns a Server for routes.
func NewServer(cfg Config, deps Deps, routes []Route) *Server {
	return &Server{Config: cfg, Deps: deps, rt: newRouter(routes),
		noKey: limits.Full(limits.Windows(keys.DefaultBurst, keys.DefaultDaily)), now: time.Now,
		bodies: &bodyBudget{limit: int64(cfg.MaxInflightBodyBytes)}}
}

// Routes returns the routes served (OpenAPI and documentation use it).
func (s *Server) Routes() []Route {
	out := make([]Route, len(s.rt.all))
	for i, c := range s.rt.all {
		out[i] = c.Route
	}
	return out
}

// HTTPServer returns a fasthttp server with the configured limits and timeouts.
// Request bodies are streamed (body.go): fasthttp reads the headers and at most one body
// byte (MaxRequestBodySize 1 is the size of that pre-read, not a cap), and Handle reads
// the body only once the route and the key allow it. A body announced over MaxBodyBytes
// is answered 413 payload_too_large without reading any of it.
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
		// A connection idle or stalled past the read timeout is closed without an answer:
		// writing one to a keep-alive connection that sent nothing would be a response to
		// no request.
		_ = ctx.Conn().Close()
		return
	} else {
		p = malformedProblem(err)
	}
	ctx.Response.SetConnectionClose()
	s.writeProblem(ctx, ids.RequestID(), nil, p)
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// Handle is the fasthttp handler.
func (s *Server) Handle(ctx *fasthttp.RequestCtx) {
	start := time.Now()
	ctx.Response.Header.DisableNormalizing() // send RateLimit-Policy, not Ratelimit-Policy
	r := &Request{Ctx: ctx, ID: ids.RequestID(), srv: s}
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
	if c != nil {
		routeName = c.Method + " " + c.Path
	}
	if announcedOversize(ctx) {
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
		s.writeProblem(ctx, r.ID, nil, problem.New(problem.NotFound, "No operation at %s.", path))
		return
	}
	r.route = c
	s.serve(r)
}

// serve runs the conventions in order, then the handler. The body is read after the
// checks that need only the headers (a public route's handler authenticates itself, so
// its body is read first).
func (s *Server) serve(r *Request) {
	c := r.route
	if c.Public {
		if p := s.readBody(r, s.Config.MaxBodyBytes); p != nil {
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
	limit := s.Config.MaxBodyBytes
	if c.MaxBody > 0 {
		limit = min(limit, c.MaxBody)
	}
	if r.Ctx.Request.Header.ContentLength() > limit {
		r.Ctx.SetConnectionClose()
		s.refuse(r, k, problem.New(problem.PayloadTooLarge, "The body is larger than %d bytes.", limit))
		return
	}
	if p := s.readBody(r, limit); p != nil {
		s.refuse(r, k, p)
		return
	}
	if p := s.gate(r); p != nil {
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
	s.commonHeaders(r.Ctx, r.ID, r.Limits)
	if r.Version != "" {
		r.Ctx.Response.Header.Set("SVC-Version", r.Version)
	}
}

// authenticate applies the spec's authentication rules 2–7. It returns the key the
// bearer token names whenever one does, also with a refusal (revoked, expired, address
// not allowed), so that the refusal declares that key's windows.
func (s *Server) authenticate(r *Request) (*keys.Key, *problem.Problem) {
	h := r.Ctx.Request.Header.Peek("Authorization")
	const bearer = "Bearer "
	if len(h) == 0 {
		return nil, problem.New(problem.Unauthorized, "The Authorization header is missing.")
	}
	if len(h) <= len(bearer) || !strings.EqualFold(string(h[:len(bearer)]), bearer) {
		return nil, problem.New(problem.Unauthorized, "The Authorization header is not a bearer token.")
	}
	secret := string(h[len(bearer):])
	k, sec, err := s.Deps.Keys.Authenticate(r.Context(), secret)
	if errors.Is(err, keys.ErrUnknownSecret) {
		return nil, problem.New(problem.InvalidKey, "The bearer token matches no key on record.")
	}
	if err != nil {
		s.Deps.Log.Error("key lookup failed", "request_id", r.ID, "err", err.Error())
		return nil, unavailable("the key store")
	}
	now := s.now()
	if k.RevokedAt != nil {
		return k, problem.New(problem.KeyRevoked, "This key was revoked at %s.", k.RevokedAt.UTC().Format(time.RFC3339))
	}
	if sec.CutoverAt != nil && !now.Before(*sec.CutoverAt) {
		p := problem.New(problem.KeyExpired, "This secret was rotated out at %s; use the key's new secret.", sec.CutoverAt.UTC().Format(time.RFC3339))
		p.ExpiredAt = sec.CutoverAt.UTC().Format(time.RFC3339)
		return k, p
	}
	if k.ExpiresAt != nil && !now.Before(*k.ExpiresAt) {
		p := problem.New(problem.KeyExpired, "This key expired at %s.", k.ExpiresAt.UTC().Format(time.RFC3339))
		p.ExpiredAt = k.ExpiresAt.UTC().Format(time.RFC3339)
		return k, p
	}
	ip := s.clientIP(r.Ctx)
	if !k.Allows(ip) {
		p := problem.New(problem.IPNotAllowed, "Calls from %s are not on this key's allow-list.", ip)
		p.ClientIP = ip.String()
		return k, p
	}
	return k, nil
}

// refuse writes p, a refusal made before the request was counted, declaring the windows
// of key k as they stand (read, not spent); with no key known (k nil), the default
// policy with nothing spent.
func (s *Server) refuse(r *Request, k *keys.Key, p *problem.Problem) {
	var dec *limits.Decision
	if k != nil {
		dec = s.peek(r, k)
	}
	s.writeProblem(r.Ctx, r.ID, dec, p)
}

// peek reads key k's windows without spending. When the limiter cannot be read it
// declares k's windows as full: the policy is still k's own.
func (s *Server) peek(r *Request, k *keys.Key) *limits.Decision {
	b, d := limits.Windows(k.Burst, k.Daily)
	dec, err := s.Deps.Limits.Peek(r.Context(), k.ID.String(), b, d)
	if err != nil {
		s.Deps.Log.Warn("rate limit peek failed", "request_id", r.ID, "err", err.Error())
		dec = limits.Full(b, d)
	}
	return &dec
}

// clientIP is the peer address, or, when the peer is a trusted proxy, the right-most
// X-Forwarded-For address that is not itself a trusted proxy.
func (s *Server) clientIP(ctx *fasthttp.RequestCtx) netip.Addr {
	peer, _ := netip.AddrFromSlice(ctx.RemoteIP())
	peer = peer.Unmap()
	if !s.trusted(peer) {
		return peer
	}
	xff := string(ctx.Request.Header.Peek("X-Forwarded-For"))
	parts := strings.Split(xff, ",")
	for i := len(parts) - 1; i >= 0; i-- {
		a, err := netip.ParseAddr(strings.TrimSpace(parts[i]))
		if err != nil {
			return peer
		}
		a = a.Unmap()
		if !s.trusted(a) {
			return a
		}
	}
	return peer
}

func (s *Server) trusted(a netip.Addr) bool {
	for _, p := range s.Config.TrustedProxies {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

func (s *Server) version(r *Request) *problem.Problem {
	v, p := ResolveVersion(string(r.Ctx.QueryArgs().Peek("version")),
		string(r.Ctx.Request.Header.Peek("SVC-Version")), r.Key.Version)
	r.Version = v
	return p
}

// gate takes one request from the key's windows and, for an Idempotency-Key request,
// reserves the key, in one Redis round trip (gate.go). A conflicting Idempotency-Key
// (reuse, in use) spends nothing.
func (s *Server) gate(r *Request) *problem.Problem {
	if pre, ok := r.Ctx.UserValue(prechargedKey).(precharged); ok && pre.keyID == r.Key.ID.String() {
		dec := pre.dec
		r.Limits, r.charged = &dec, true // the outer request's unit: a 4xx here refunds it
		return nil
	}
	var idem *idemState
	if r.route.Idempotent {
		if k := r.Ctx.Request.Header.Peek("Idempotency-Key"); len(k) > 0 {
			if len(k) > idempotency.MaxKeyLen {
				r.Limits = s.peek(r, r.Key)
				return problem.Invalid("The Idempotency-Key header is too long.",
					problem.FieldError{Field: "Idempotency-Key", Rule: "max_length", Value: idempotency.MaxKeyLen})
			}
			idem = &idemState{key: string(k),
				fp: idempotency.Fingerprint(string(r.Ctx.Method()), stripVersion(string(r.Ctx.Path())), r.Ctx.PostBody())}
		}
	}
	b, d := limits.Windows(r.Key.Burst, r.Key.Daily)
	dec, err := s.take(r, b, d, idem)
	if err != nil {
		s.Deps.Log.Error("rate limiter failed", "request_id", r.ID, "err", err.Error())
		full := limits.Full(b, d) // the key's own policy; what is left is unknown
		r.Limits = &full
		return unavailable("the rate limiter")
	}
	r.Limits, r.idem = &dec, idem
	if dec.Allowed {
		r.charged = idem == nil || idem.outcome == idempotency.Proceed || idem.outcome == idempotency.Replay
		return nil
	}
	var p *problem.Problem
	if dec.Denied == "daily" {
		p = problem.New(problem.QuotaExceeded, "The key's daily quota of %d requests is spent.", d.Quota)
	} else {
		p = problem.New(problem.RateLimited, "The key's burst limit of %d requests per %d s is spent.", b.Quota, b.Seconds)
	}
	p.RetryAfter = max(1, dec.RetryAfter)
	return p
}

// Precharge marks ctx, an in-process request a handler dispatches through Handle on
// behalf of its own request r (the MCP endpoint's tool calls), as already counted: when
// ctx authenticates as r's key, the limiter is not asked again and r's decision stands
// (a 4xx answer still refunds, as for any request). Everything else (authentication,
// version, scope, problem documents) applies as usual. Only code in this process can
// set a user value, so no client can claim it.
func Precharge(ctx *fasthttp.RequestCtx, r *Request) {
	if r.Key != nil && r.Limits != nil {
		ctx.SetUserValue(prechargedKey, precharged{keyID: r.Key.ID.String(), dec: *r.Limits})
	}
}

const prechargedKey = "svc.precharged"

type precharged struct {
	keyID string
	dec   limits.Decision
}

// refundIfRejected gives back the quota of a request answered with a 4xx.
func (s *Server) refundIfRejected(r *Request) {
	st := r.Ctx.Response.StatusCode()
	if r.Limits == nil || !r.charged || st < 400 || st >= 500 {
		return
	}
	b, d := limits.Windows(r.Key.Burst, r.Key.Daily)
	dec, err := s.Deps.Limits.Refund(r.Context(), r.Key.ID.String(), b, d)
	if err != nil {
		s.Deps.Log.Warn("quota refund failed", "request_id", r.ID, "err", err.Error())
		return
	}
	dec.Allowed = true
	r.Limits = &dec
	s.rateHeaders(r.Ctx, r.Limits)
}

// idempotent runs an Idempotency-Key request whose key the gate looked up: replay,
// conflict, or run and store.
func (s *Server) idempotent(r *Request) {
	kid, in := r.Key.ID.String(), r.idem
	switch in.outcome {
	case idempotency.Reuse:
		s.writeProblem(r.Ctx, r.ID, r.Limits, problem.New(problem.IdempotencyKeyReuse, "This Idempotency-Key was used with a different request."))
		return
	case idempotency.InUse:
		p := problem.New(problem.IdempotencyKeyInUse, "A request with this Idempotency-Key is still running.")
		p.RetryAfter = 1
		s.writeProblem(r.Ctx, r.ID, r.Limits, p)
		return
	case idempotency.Replay:
		r.Raw(in.stored.Status, in.stored.ContentType, in.stored.Body)
		r.Ctx.Response.Header.Set("Idempotent-Replayed", "true")
		s.finish(r, nil)
		s.refundIfRejected(r)
		return
	}
	s.finish(r, r.route.Handle(r))
	st := r.Ctx.Response.StatusCode()
	if st >= 500 && r.pending != nil {
		go s.settle(kid, in.key, in.fp, r.pending, r.ID)
		return
	}
	if st >= 500 || st == fasthttp.StatusTooManyRequests {
		if err := s.Deps.Idem.Release(r.Context(), kid, in.key, in.fp, r.ID); err != nil {
			s.Deps.Log.Warn("idempotency release failed", "request_id", r.ID, "err", err.Error())
		}
		return
	}
	// Recorded before the answer, so that a repeat sent after it always replays. If this
	// process dies between Kafka's acknowledgement and here, a repeat takes the
	// reservation over after the route's TakeoverAfter (else it lapses after PendingTTL)
	// and runs again: the consumer drops that second copy of an event batch by its batch
	// id.
	start := time.Now()
	err := s.Deps.Idem.Complete(r.Context(), kid, in.key, in.fp, idempotency.Stored{Status: st,
		ContentType: string(r.Ctx.Response.Header.ContentType()), Body: r.Ctx.Response.Body()})
	s.Deps.Metrics.RedisStore.Observe(time.Since(start).Seconds())
	if err != nil {
		s.Deps.Log.Error("idempotency completion failed", "request_id", r.ID, "err", err.Error())
	}
	s.refundIfRejected(r)
}

// settle decides an ambiguous idempotent request (reqID, the reservation's owner) once its
// outcome is known.
func (s *Server) settle(kid, key, fp string, wait func() (idempotency.Stored, bool), reqID string) {
	st, ok := wait()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var err error
	if ok {
		err = s.Deps.Idem.Complete(ctx, kid, key, fp, st)
	} else {
		err = s.Deps.Idem.Release(ctx, kid, key, fp, reqID)
	}
	if err != nil {
		s.Deps.Log.Error("idempotency settle failed", "request_id", reqID, "err", err.Error())
	}
}

func unavailable(what string) *problem.Problem {
	p := problem.New(problem.ServiceUnavailable, "%s is unavailable; nothing was changed.", what)
	p.RetryAfter = 1
	return p
}

// Unavailable returns a 503 service_unavailable problem naming the dependency.
func Unavailable(what string, retryAfter int) *problem.Problem {
	p := unavailable(what)
	p.RetryAfter = max(1, retryAfter)
	return p
}

// writeProblem writes p as the response.
func (s *Server) writeProblem(ctx *fasthttp.RequestCtx, reqID string, dec *limits.Decision, p *problem.Problem) {
	p.Finish(s.Config.DocsURL(), reqID)
	b, _ := json.Marshal(p)
	ctx.SetStatusCode(p.Status)
	ctx.SetContentType("application/problem+json")
	ctx.SetBody(b)
	if p.RetryAfter > 0 {
		ctx.Response.Header.Set("Retry-After", strconv.Itoa(p.RetryAfter))
	}
	if len(p.Allow) > 0 {
		ctx.Response.Header.Set("Allow", strings.Join(p.Allow, ", "))
	}
	ctx.SetUserValue(problemCodeKey, string(p.Code))
	s.commonHeaders(ctx, reqID, dec)
}

const problemCodeKey = "svc.problem"

// readBufferSize bounds the request line and headers (16 KiB: long query strings fit).
const readBufferSize = 16 << 10

// commonHeaders sets Request-Id and the rate-limit headers every response carries.
func (s *Server) commonHeaders(ctx *fasthttp.RequestCtx, reqID string, dec *limits.Decision) {
	ctx.Response.Header.Set("Request-Id", reqID)
	if dec == nil {
		dec = &s.noKey
	}
	s.rateHeaders(ctx, dec)
}

func (s *Server) rateHeaders(ctx *fasthttp.RequestCtx, dec *limits.Decision) {
	h := &ctx.Response.Header
	h.Set("RateLimit-Policy", limits.Policy(dec.Burst.Window, dec.Daily.Window))
	c := dec.Closest()
	if !dec.Allowed && dec.Denied != "" {
		c = dec.Burst
		if dec.Denied == "daily" {
			c = dec.Daily
		}
	}
	h.Set("RateLimit-Limit", strconv.Itoa(c.Quota))
	h.Set("RateLimit-Remaining", strconv.Itoa(c.Remaining))
	h.Set("RateLimit-Reset", strconv.Itoa(c.Reset))
	h.Set("RateLimit", limits.Draft(dec))
}

func (s *Server) observe(ctx *fasthttp.RequestCtx, route string, start time.Time) {
	if s.Deps.Metrics == nil {
		return
	}
	code, _ := ctx.UserValue(problemCodeKey).(string)
	if code == "" {
		code = strconv.Itoa(ctx.Response.StatusCode())
	}
	s.Deps.Metrics.Requests.WithLabelValues(route, code).Inc()
	s.Deps.Metrics.Duration.WithLabelValues(route).Observe(time.Since(start).Seconds())
}
