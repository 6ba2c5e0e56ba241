package httpserver

import (
	"errors"
	"net/netip"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"svc/lib/apikey"
	"svc/lib/limits"
	"svc/lib/problem"
)

// authenticate applies the spec's authentication rules 2–7. It returns the key the
// bearer token names whenever one does, also with a refusal (revoked, expired, address
// not allowed), so that the refusal declares that key's windows.
func (s *Server) authenticate(r *Request) (*apikey.Key, *problem.Problem) {
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
	if errors.Is(err, apikey.ErrUnknownSecret) {
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
func (s *Server) refuse(r *Request, k *apikey.Key, p *problem.Problem) {
	var dec *limits.Decision
	if k != nil {
		dec = s.peek(r, k)
	}
	s.writeProblem(r.Ctx, r.ID, dec, p)
}

// peek reads key k's windows without spending. When the limiter cannot be read it
// declares k's windows as full: the policy is still k's own.
func (s *Server) peek(r *Request, k *apikey.Key) *limits.Decision {
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
