package httpserver

import (
	"bytes"
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
	hs := r.Ctx.Request.Header.PeekAll("Authorization")
	const bearer = "Bearer "
	if len(hs) == 0 || len(hs[0]) == 0 {
		return nil, problem.New(problem.Unauthorized, "The Authorization header is missing.")
	}
	if len(hs) > 1 {
		return nil, problem.New(problem.Unauthorized, "The Authorization header is sent more than once: send one bearer token.")
	}
	h := hs[0]
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

// clientIP is the address a request comes from, for allow-lists: the peer, unless the
// peer is a trusted proxy. Then X-Forwarded-For is read as one list, every header line in
// the order received (a proxy may add a line of its own, as HAProxy's option forwardfor
// does, or extend the last one), and walked from the right past trusted proxies: the
// first address that is not one is the client. An entry that is empty or not an address
// stops the walk, as does the list's start; the client is then the last address the walk
// reached: the trusted hop right of that entry, or the peer. Whatever a client writes
// itself lies left of the entry its first trusted proxy adds about it, so it is never
// reached.
func (s *Server) clientIP(ctx *fasthttp.RequestCtx) netip.Addr {
	client, _ := netip.AddrFromSlice(ctx.RemoteIP())
	client = client.Unmap()
	if !s.trusted(client) {
		return client
	}
	lines := ctx.Request.Header.PeekAll("X-Forwarded-For")
	for i := len(lines) - 1; i >= 0; i-- {
		for line := lines[i]; ; {
			j := bytes.LastIndexByte(line, ',')
			a, ok := forwardedAddr(line[j+1:])
			if !ok {
				return client
			}
			if client = a; !s.trusted(a) {
				return a
			}
			if j < 0 {
				break
			}
			line = line[:j]
		}
	}
	return client
}

// forwardedAddr parses one X-Forwarded-For entry: an address, with or without a port
// ("203.0.113.9:4711", "[2001:db8::1]:443"); an IPv4-mapped address as IPv4, without an
// IPv6 zone.
func forwardedAddr(entry []byte) (netip.Addr, bool) {
	s := string(bytes.TrimSpace(entry))
	a, err := netip.ParseAddr(s)
	if err != nil {
		ap, perr := netip.ParseAddrPort(s)
		if perr != nil {
			return netip.Addr{}, false
		}
		a = ap.Addr()
	}
	return a.Unmap().WithZone(""), true
}

func (s *Server) trusted(a netip.Addr) bool {
	for _, p := range s.Config.TrustedProxies {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// version resolves the request's API version and names it in the SVC-Version header at
// once, so that every answer from here on carries it, problem documents included.
func (s *Server) version(r *Request) *problem.Problem {
	v, p := ResolveVersion(string(r.Ctx.QueryArgs().Peek("version")),
		string(r.Ctx.Request.Header.Peek("SVC-Version")), r.Key.Version)
	r.Version = v
	if p == nil && v != "" {
		r.Ctx.Response.Header.Set("SVC-Version", v)
	}
	return p
}
