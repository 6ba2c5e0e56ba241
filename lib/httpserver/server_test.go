package httpserver_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"svc/lib/apikey"
	"svc/lib/httpserver"
	"svc/lib/idempotency"
	"svc/lib/problem"
	"svc/lib/svctest"
	"svc/schema/apitest"
	"svc/schema/workspace"
)

// testRoutes exercise the conventions without any role's logic.
func testRoutes() []httpserver.Route {
	return []httpserver.Route{
		{Method: "GET", Path: "/things", Scope: "plans:read", Handle: func(r *httpserver.Request) error {
			return r.JSON(200, map[string]string{"version": r.Version})
		}},
		{Method: "GET", Path: "/things/{id}", Scope: "plans:read", Handle: func(r *httpserver.Request) error {
			if r.Param("id") == "missing" {
				return problem.New(problem.NotFound, "no such thing")
			}
			return r.JSON(200, map[string]string{"id": r.Param("id")})
		}},
		{Method: "POST", Path: "/things", Scope: "plans:read", Idempotent: true, Handle: func(r *httpserver.Request) error {
			if strings.Contains(string(r.Body()), "invalid") {
				return problem.Invalid("bad", problem.FieldError{Field: "name", Rule: "required", Value: nil, Pointer: "/name"})
			}
			if strings.Contains(string(r.Body()), "slow") {
				time.Sleep(700 * time.Millisecond)
			}
			return r.JSON(201, map[string]string{"request_id": r.ID})
		}},
		{Method: "GET", Path: "/panic", Handle: func(r *httpserver.Request) error { panic("boom") }},
		{Method: "GET", Path: "/fail", Handle: func(r *httpserver.Request) error { return errors.New("secret internals") }},
	}
}

func TestAuthenticationCodes(t *testing.T) {
	s := apitest.Start(t, testRoutes(), nil)
	tn := s.Tenant(t, false)
	ctx := context.Background()

	apitest.Problem(t, s.Do(t, "GET", "/things", "", ""), 401, "unauthorized")
	r := s.Do(t, "GET", "/things", "", "", "Authorization", "Basic dXNlcjpwYXNz")
	apitest.Problem(t, r, 401, "unauthorized")
	apitest.Problem(t, s.Do(t, "GET", "/things", tn.Secret[:len(tn.Secret)-1], ""), 401, "invalid_key")
	// Padding inside the header value (HTTP itself strips it only at the ends).
	apitest.Problem(t, s.Do(t, "GET", "/things", "", "", "Authorization", "Bearer  "+tn.Secret), 401, "invalid_key")
	apitest.Problem(t, s.Do(t, "GET", "/things", "", "", "Authorization", "Bearer "+tn.Secret+" x"), 401, "invalid_key")
	m := apitest.Problem(t, s.Do(t, "GET", "/things", tn.Secret+"0", ""), 401, "invalid_key")
	if strings.Contains(string(mustJSON(m)), tn.Secret[9:]) {
		t.Fatal("a problem document echoes the secret")
	}

	// Scope.
	k, sec := s.Key(t, workspace.KeySpec{WorkspaceID: tn.Workspace.ID, Env: apikey.Live, Scopes: []string{"events:write", "account:read"}})
	m = apitest.Problem(t, s.Do(t, "GET", "/things", sec, ""), 403, "insufficient_scope")
	if m["required_scope"] != "plans:read" || len(m["granted_scopes"].([]any)) != 2 {
		t.Fatalf("insufficient_scope fields: %v", m)
	}

	// Expiry carries expired_at.
	past := time.Now().Add(-time.Hour).UTC().Truncate(time.Second)
	_, expSec := s.Key(t, workspace.KeySpec{WorkspaceID: tn.Workspace.ID, Env: apikey.Live, ExpiresAt: &past})
	m = apitest.Problem(t, s.Do(t, "GET", "/things", expSec, ""), 401, "key_expired")
	if m["expired_at"] != past.Format(time.RFC3339) {
		t.Fatalf("expired_at %v, want %s", m["expired_at"], past.Format(time.RFC3339))
	}

	// Allow-list carries client_ip.
	_, ipSec := s.Key(t, workspace.KeySpec{WorkspaceID: tn.Workspace.ID, Env: apikey.Live, Allow: []string{"203.0.113.0/24"}})
	m = apitest.Problem(t, s.Do(t, "GET", "/things", ipSec, ""), 403, "ip_not_allowed")
	if m["client_ip"] != "127.0.0.1" {
		t.Fatalf("client_ip %v", m["client_ip"])
	}
	_, okSec := s.Key(t, workspace.KeySpec{WorkspaceID: tn.Workspace.ID, Env: apikey.Live, Allow: []string{"127.0.0.1", "10.0.0.0/8"}})
	if r := s.Do(t, "GET", "/things", okSec, ""); r.Status != 200 {
		t.Fatalf("allowed address refused: %d %s", r.Status, r.Body)
	}

	// Revocation.
	if _, err := s.Keys.Revoke(ctx, k.ID); err != nil {
		t.Fatal(err)
	}
	time.Sleep(600 * time.Millisecond)
	apitest.Problem(t, s.Do(t, "GET", "/things", sec, ""), 401, "key_revoked")
}

func TestForwardedForOnlyFromTrustedProxies(t *testing.T) {
	s := apitest.Start(t, testRoutes(), func(c *httpserver.Config) {
		c.TrustedProxies = nil
	})
	tn := s.Tenant(t, false)
	_, sec := s.Key(t, workspace.KeySpec{WorkspaceID: tn.Workspace.ID, Env: apikey.Live, Allow: []string{"198.51.100.7"}})
	// Untrusted peer: the header is ignored.
	apitest.Problem(t, s.Do(t, "GET", "/things", sec, "", "X-Forwarded-For", "198.51.100.7"), 403, "ip_not_allowed")

	p := apitest.Start(t, testRoutes(), func(c *httpserver.Config) {
		pfx, _ := httpserver.ParsePrefixForTest("127.0.0.1/32")
		c.TrustedProxies = append(c.TrustedProxies, pfx)
	})
	if r := p.Do(t, "GET", "/things", sec, "", "X-Forwarded-For", "203.0.113.9, 198.51.100.7"); r.Status != 200 {
		t.Fatalf("trusted proxy's forwarded address refused: %d %s", r.Status, r.Body)
	}
	m := apitest.Problem(t, p.Do(t, "GET", "/things", sec, "", "X-Forwarded-For", "198.51.100.7, 203.0.113.9"), 403, "ip_not_allowed")
	if m["client_ip"] != "203.0.113.9" {
		t.Fatalf("client_ip %v, want the right-most untrusted address", m["client_ip"])
	}
}

func TestRotationOverlap(t *testing.T) {
	s := apitest.Start(t, testRoutes(), nil)
	tn := s.Tenant(t, false)
	_, newSec, cutover, err := s.Keys.Rotate(context.Background(), tn.Key.ID, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for _, sec := range []string{tn.Secret, newSec} {
		if r := s.Do(t, "GET", "/things", sec, ""); r.Status != 200 {
			t.Fatalf("during overlap: %d %s", r.Status, r.Body)
		}
	}
	time.Sleep(time.Until(cutover) + 600*time.Millisecond)
	m := apitest.Problem(t, s.Do(t, "GET", "/things", tn.Secret, ""), 401, "key_expired")
	if m["expired_at"] != cutover.UTC().Format(time.RFC3339) {
		t.Fatalf("expired_at %v, want cutover %s", m["expired_at"], cutover)
	}
	if r := s.Do(t, "GET", "/things", newSec, ""); r.Status != 200 {
		t.Fatalf("new secret after cutover: %d", r.Status)
	}
}

// A rotation with a shorter overlap than an earlier one ends every older secret at its
// own cutover: a leaked secret is cut off by rotating again with overlap 0.
func TestRotationShortensAnEarlierOverlap(t *testing.T) {
	s := apitest.Start(t, testRoutes(), nil)
	tn := s.Tenant(t, false)
	ctx := context.Background()
	_, second, _, err := s.Keys.Rotate(ctx, tn.Key.ID, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	_, third, cutover, err := s.Keys.Rotate(ctx, tn.Key.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, sec := range []string{tn.Secret, second} {
		svctest.WaitFor(t, 3*time.Second, "the older secret refused", func() bool {
			return s.Do(t, "GET", "/things", sec, "").Status == 401
		})
		m := apitest.Problem(t, s.Do(t, "GET", "/things", sec, ""), 401, "key_expired")
		if m["expired_at"] != cutover.UTC().Format(time.RFC3339) {
			t.Fatalf("expired_at %v, want the second rotation's cutover %s", m["expired_at"], cutover)
		}
	}
	if r := s.Do(t, "GET", "/things", third, ""); r.Status != 200 {
		t.Fatalf("the newest secret: %d", r.Status)
	}
	// A longer overlap later does not bring an ended secret back.
	if _, _, _, err := s.Keys.Rotate(ctx, tn.Key.ID, time.Hour); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1100 * time.Millisecond)
	apitest.Problem(t, s.Do(t, "GET", "/things", tn.Secret, ""), 401, "key_expired")
}

// TestRevocationReachesAnotherProcess: a second server with its own key cache (as a
// second process has) refuses a revoked key within one second.
func TestRevocationReachesAnotherProcess(t *testing.T) {
	a := apitest.Start(t, testRoutes(), nil)
	b := apitest.Start(t, testRoutes(), nil)
	tn := a.Tenant(t, false)
	for _, s := range []*apitest.Server{a, b} {
		if r := s.Do(t, "GET", "/things", tn.Secret, ""); r.Status != 200 {
			t.Fatalf("before revocation: %d", r.Status)
		}
	}
	if _, err := a.Keys.Revoke(context.Background(), tn.Key.ID); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for {
		r := b.Do(t, "GET", "/things", tn.Secret, "")
		if r.Status == 401 {
			apitest.Problem(t, r, 401, "key_revoked")
			break
		}
		if time.Since(start) > time.Second {
			t.Fatalf("revoked key still served after %s", time.Since(start))
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("revocation seen after %s", time.Since(start))
}

func TestRoutingProblems(t *testing.T) {
	s := apitest.Start(t, testRoutes(), nil)
	tn := s.Tenant(t, false)
	if p := apitest.Problem(t, s.Do(t, "GET", "/nowhere", tn.Secret, ""), 404, "not_found"); !strings.Contains(fmt.Sprint(p["suggested_action"]), "/.well-known/svc") {
		t.Fatalf("an unknown path's advice %q: want the discovery document named", p["suggested_action"])
	}
	apitest.Problem(t, s.Do(t, "GET", "/v1/things/missing", tn.Secret, ""), 404, "not_found")
	r := s.Do(t, "DELETE", "/things", tn.Secret, "")
	apitest.Problem(t, r, 405, "method_not_allowed")
	if allow := r.Header.Get("Allow"); allow != "GET, HEAD, POST" { // HEAD is served wherever GET is
		t.Fatalf("Allow %q", allow)
	}
	m := apitest.Problem(t, s.Do(t, "GET", "/panic", tn.Secret, ""), 500, "internal_error")
	if m["retryable"] != true {
		t.Fatal("internal_error must be retryable")
	}
	m = apitest.Problem(t, s.Do(t, "GET", "/fail", tn.Secret, ""), 500, "internal_error")
	if strings.Contains(m["detail"].(string), "secret internals") {
		t.Fatal("internal error text leaked")
	}
	if r := s.Do(t, "GET", "/v1/things", tn.Secret, ""); r.Status != 200 {
		t.Fatalf("/v1 prefix: %d", r.Status)
	}
	// A trailing slash is ignored on static paths, as on parameterised ones.
	for _, p := range []string{"/things/", "/v1/things/", "/things/abc/"} {
		if r := s.Do(t, "GET", p, tn.Secret, ""); r.Status != 200 {
			t.Fatalf("%s: %d", p, r.Status)
		}
	}
	for _, rid := range []string{s.Do(t, "GET", "/things", tn.Secret, "").Header.Get("Request-Id"), s.Do(t, "GET", "/healthz", "", "").Header.Get("Request-Id")} {
		if !strings.HasPrefix(rid, "req_") {
			t.Fatalf("Request-Id %q", rid)
		}
	}
}

func TestVersions(t *testing.T) {
	s := apitest.Start(t, testRoutes(), nil)
	tn := s.Tenant(t, false)
	_, pinned := s.Key(t, workspace.KeySpec{WorkspaceID: tn.Workspace.ID, Env: apikey.Live, Version: "2026-03-01"})
	cases := []struct {
		secret, query, header, want string
	}{
		{tn.Secret, "", "", httpserver.Stable},
		{pinned, "", "", "2026-03-01"},
		{pinned, "", "next", httpserver.Next},
		{pinned, "?version=stable", "2026-03-01", httpserver.Stable},
		{tn.Secret, "?version=2026-12-01", "", "2026-12-01"},
	}
	for _, c := range cases {
		r := s.Do(t, "GET", "/things"+c.query, c.secret, "", "SVC-Version", c.header)
		if r.Status != 200 || r.Header.Get("SVC-Version") != c.want {
			t.Fatalf("%+v: status %d version %q", c, r.Status, r.Header.Get("SVC-Version"))
		}
	}
	apitest.Problem(t, s.Do(t, "GET", "/things?version=2020-01-01", tn.Secret, ""), 400, "unsupported_version")
	apitest.Problem(t, s.Do(t, "GET", "/things", tn.Secret, "", "SVC-Version", "latest"), 400, "unsupported_version")
	// What a request names is never echoed when it looks like a secret or an email.
	for _, v := range []string{"svc_live_0a1b2c3d", "ada@example.com"} {
		m := apitest.Problem(t, s.Do(t, "GET", "/things?version="+v, tn.Secret, ""), 400, "unsupported_version")
		if d := m["detail"].(string); strings.Contains(d, v) || !strings.Contains(d, "(withheld)") {
			t.Fatalf("detail %q", d)
		}
	}
	// A problem answered at a version names it too: a handler's 404, a scope refusal.
	_, noScope := s.Key(t, workspace.KeySpec{WorkspaceID: tn.Workspace.ID, Env: apikey.Live, Scopes: []string{"pixels:read"}})
	for _, c := range []struct {
		path, secret, code string
		status             int
	}{{"/things/missing", tn.Secret, "not_found", 404}, {"/things", noScope, "insufficient_scope", 403}} {
		r := s.Do(t, "GET", c.path, c.secret, "", "SVC-Version", "2026-03-01")
		if apitest.Problem(t, r, c.status, c.code); r.Header.Get("SVC-Version") != "2026-03-01" {
			t.Fatalf("%s: %d %s without SVC-Version (%q)", c.path, r.Status, c.code, r.Header.Get("SVC-Version"))
		}
	}
}

func TestRateLimitHeadersAndWindows(t *testing.T) {
	s := apitest.Start(t, testRoutes(), nil)
	tn := s.Tenant(t, false)
	_, sec := s.Key(t, workspace.KeySpec{WorkspaceID: tn.Workspace.ID, Env: apikey.Live, Burst: 3, Daily: 100})
	for i := 0; i < 3; i++ {
		r := s.Do(t, "GET", "/things", sec, "")
		if r.Status != 200 {
			t.Fatalf("request %d: %d", i, r.Status)
		}
		if got := r.Header.Get("RateLimit-Policy"); got != `"burst";q=3;w=60, "daily";q=100;w=86400` {
			t.Fatalf("RateLimit-Policy %q", got)
		}
		if r.Header.Get("RateLimit-Limit") != "3" || r.Header.Get("RateLimit-Remaining") != strconv.Itoa(2-i) {
			t.Fatalf("request %d: limit %s remaining %s", i, r.Header.Get("RateLimit-Limit"), r.Header.Get("RateLimit-Remaining"))
		}
		if !strings.HasPrefix(r.Header.Get("RateLimit"), `"burst";r=`+strconv.Itoa(2-i)) {
			t.Fatalf("RateLimit %q", r.Header.Get("RateLimit"))
		}
		if reset, _ := strconv.Atoi(r.Header.Get("RateLimit-Reset")); reset < 1 || reset > 60 {
			t.Fatalf("RateLimit-Reset %d", reset)
		}
	}
	r := s.Do(t, "GET", "/things", sec, "")
	apitest.Problem(t, r, 429, "rate_limited")
	if ra, _ := strconv.Atoi(r.Header.Get("Retry-After")); ra < 1 || ra > 20 {
		t.Fatalf("Retry-After %q", r.Header.Get("Retry-After"))
	}
	for _, h := range []string{"RateLimit-Policy", "RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset", "RateLimit"} {
		if r.Header.Get(h) == "" {
			t.Fatalf("429 lacks %s", h)
		}
	}
	// Headers on an unauthenticated error too.
	r = s.Do(t, "GET", "/things", "", "")
	if r.Header.Get("RateLimit-Policy") == "" || r.Header.Get("RateLimit") == "" {
		t.Fatal("401 lacks rate-limit headers")
	}
}

func TestQuotaExceededSpendsNoBurst(t *testing.T) {
	s := apitest.Start(t, testRoutes(), nil)
	tn := s.Tenant(t, false)
	k, sec := s.Key(t, workspace.KeySpec{WorkspaceID: tn.Workspace.ID, Env: apikey.Live, Burst: 10, Daily: 2})
	for i := 0; i < 2; i++ {
		if r := s.Do(t, "GET", "/things", sec, ""); r.Status != 200 {
			t.Fatalf("%d", r.Status)
		}
	}
	r := s.Do(t, "GET", "/things", sec, "")
	apitest.Problem(t, r, 429, "quota_exceeded")
	if r.Header.Get("Retry-After") == "" || r.Header.Get("RateLimit-Limit") != "2" || r.Header.Get("RateLimit-Remaining") != "0" {
		t.Fatalf("headers %v", r.Header)
	}
	b, d := httpserver.LimitsWindowsForTest(10, 2)
	dec, err := s.Deps.Limits.Peek(context.Background(), k.ID.String(), b, d)
	if err != nil {
		t.Fatal(err)
	}
	if dec.Burst.Remaining != 8 {
		t.Fatalf("burst remaining %d after a daily refusal, want 8 (the refusal spends no burst)", dec.Burst.Remaining)
	}
}

func TestRejectedAndUnauthorisedSpendNothing(t *testing.T) {
	s := apitest.Start(t, testRoutes(), nil)
	tn := s.Tenant(t, false)
	k, sec := s.Key(t, workspace.KeySpec{WorkspaceID: tn.Workspace.ID, Env: apikey.Live, Burst: 5, Daily: 50})
	b, d := httpserver.LimitsWindowsForTest(5, 50)
	peek := func() (int, int) {
		dec, err := s.Deps.Limits.Peek(context.Background(), k.ID.String(), b, d)
		if err != nil {
			t.Fatal(err)
		}
		return dec.Burst.Remaining, dec.Daily.Remaining
	}
	apitest.Problem(t, s.Do(t, "POST", "/things", sec, `{"invalid":true}`), 422, "invalid_request")
	apitest.Problem(t, s.Do(t, "GET", "/things/missing", sec, ""), 404, "not_found")
	apitest.Problem(t, s.Do(t, "GET", "/things?version=1999-01-01", sec, ""), 400, "unsupported_version")
	if br, dr := peek(); br != 5 || dr != 50 {
		t.Fatalf("rejected requests spent quota: burst %d daily %d", br, dr)
	}
	if r := s.Do(t, "GET", "/things", sec, ""); r.Status != 200 {
		t.Fatal(r.Status)
	}
	if br, dr := peek(); br != 4 || dr != 49 {
		t.Fatalf("an accepted request should spend one of each: burst %d daily %d", br, dr)
	}
}

func TestIdempotency(t *testing.T) {
	s := apitest.Start(t, testRoutes(), nil)
	tn := s.Tenant(t, false)
	first := s.Do(t, "POST", "/things", tn.Secret, `{"name":"a"}`, "Idempotency-Key", "k-1")
	if first.Status != 201 {
		t.Fatalf("%d %s", first.Status, first.Body)
	}
	again := s.Do(t, "POST", "/v1/things", tn.Secret, `{"name":"a"}`, "Idempotency-Key", "k-1")
	if again.Status != 201 || string(again.Body) != string(first.Body) || again.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay: %d %s (first %s) replayed=%q", again.Status, again.Body, first.Body, again.Header.Get("Idempotent-Replayed"))
	}
	apitest.Problem(t, s.Do(t, "POST", "/things", tn.Secret, `{"name":"b"}`, "Idempotency-Key", "k-1"), 409, "idempotency_key_reuse")
	// Another key may use the same Idempotency-Key independently.
	other := s.Tenant(t, false)
	if r := s.Do(t, "POST", "/things", other.Secret, `{"name":"b"}`, "Idempotency-Key", "k-1"); r.Status != 201 {
		t.Fatalf("idempotency keys must be per API key: %d", r.Status)
	}
	// In use while the first runs.
	done := make(chan apitest.Response)
	go func() { done <- s.Do(t, "POST", "/things", tn.Secret, `{"name":"slow"}`, "Idempotency-Key", "k-2") }()
	time.Sleep(200 * time.Millisecond)
	r := s.Do(t, "POST", "/things", tn.Secret, `{"name":"slow"}`, "Idempotency-Key", "k-2")
	m := apitest.Problem(t, r, 409, "idempotency_key_in_use")
	if m["retryable"] != true || r.Header.Get("Retry-After") == "" {
		t.Fatalf("in_use must be retryable with Retry-After: %v", m)
	}
	if f := <-done; f.Status != 201 {
		t.Fatalf("first slow request: %d", f.Status)
	}
}

// TestIdempotentGateOneCallOrTwo: the gate of an Idempotency-Key request decides the same
// in one call (one Redis server: reserve_gate) as in two (a cluster): a first request and
// its replay spend one request each, a reused key and a repeat while the first runs
// spend nothing, and a request the windows deny leaves no reservation behind.
func TestIdempotentGateOneCallOrTwo(t *testing.T) {
	for _, mode := range []string{"one call", "two calls"} {
		t.Run(mode, func(t *testing.T) {
			s := apitest.Start(t, testRoutes(), nil)
			_, cluster := s.Redis.(*redis.ClusterClient)
			switch {
			case mode == "two calls":
				httpserver.TwoCallGateForTest(s.API)
			case cluster: // make test-scale: keys on several masters are never one call
				if s.API.Deps.OneServer {
					t.Fatal("the test server's Redis is a cluster, and its gate takes it for one server")
				}
				t.Skip("a Redis Cluster: the gate makes two calls (the other subtest)")
			case !s.API.Deps.OneServer:
				t.Fatal("the test server's Redis is one server, and its gate should know it")
			}
			tn := s.Tenant(t, false)
			k, sec := s.Key(t, workspace.KeySpec{WorkspaceID: tn.Workspace.ID, Env: apikey.Live, Burst: 4, Daily: 100})
			b, d := httpserver.LimitsWindowsForTest(4, 100)
			ctx := context.Background()
			left := func() int {
				dec, err := s.Deps.Limits.Peek(ctx, k.ID.String(), b, d)
				if err != nil {
					t.Fatal(err)
				}
				return dec.Burst.Remaining
			}
			post := func(idem, body string) apitest.Response {
				return s.Do(t, "POST", "/things", sec, body, "Idempotency-Key", idem)
			}
			first := post("k-1", `{"name":"a"}`)
			if first.Status != 201 || left() != 3 {
				t.Fatalf("first: %d, %d left", first.Status, left())
			}
			apitest.Problem(t, post("k-1", `{"name":"b"}`), 409, "idempotency_key_reuse")
			if left() != 3 {
				t.Fatalf("a reused key spent quota: %d left", left())
			}
			again := post("k-1", `{"name":"a"}`)
			if again.Status != 201 || string(again.Body) != string(first.Body) || again.Header.Get("Idempotent-Replayed") != "true" || left() != 2 {
				t.Fatalf("replay: %d %s, %d left", again.Status, again.Body, left())
			}
			slow := make(chan apitest.Response)
			go func() { slow <- post("k-2", `{"name":"slow"}`) }()
			time.Sleep(200 * time.Millisecond)
			apitest.Problem(t, post("k-2", `{"name":"slow"}`), 409, "idempotency_key_in_use")
			if r := <-slow; r.Status != 201 || left() != 1 {
				t.Fatalf("k-2: %d, %d left (the repeat while it ran must spend nothing)", r.Status, left())
			}
			if r := post("k-3", `{"name":"c"}`); r.Status != 201 {
				t.Fatalf("k-3: %d", r.Status)
			}
			apitest.Problem(t, post("k-4", `{"name":"d"}`), 429, "rate_limited")
			if st, err := s.Deps.Idem.Peek(ctx, k.ID.String(), "k-4"); err != nil || st != idempotency.Absent {
				t.Fatalf("a request the windows denied left its key %v (%v), want absent", st, err)
			}
			if left() != 0 {
				t.Fatalf("%d left, want 0", left())
			}
		})
	}
}

// TestIdempotencyTakeover: on a route with TakeoverAfter, an identical repeat takes over
// a reservation still pending that long after it was made (its first run stuck, as an
// edge whose process died); before, and with another body, it is refused as usual. The
// stuck first run failing later does not release the taker's reservation, and the
// taker's answer is the key's answer. On a route without it, the repeat waits.
func TestIdempotencyTakeover(t *testing.T) {
	const takeover = 400 * time.Millisecond
	calls := make(chan chan error)
	stuck := func(r *httpserver.Request) error {
		reply := make(chan error)
		calls <- reply
		if err := <-reply; err != nil {
			return err
		}
		return r.JSON(202, map[string]string{"request_id": r.ID})
	}
	s := apitest.Start(t, []httpserver.Route{
		{Method: "POST", Path: "/jobs", Idempotent: true, TakeoverAfter: takeover, Handle: stuck},
		{Method: "POST", Path: "/other-jobs", Idempotent: true, Handle: stuck},
	}, nil)
	tn := s.Tenant(t, false)
	key := "k-takeover"
	send := func(path, body string) <-chan apitest.Response {
		out := make(chan apitest.Response, 1)
		go func(key string) { out <- s.Do(t, "POST", path, tn.Secret, body, "Idempotency-Key", key) }(key)
		return out
	}
	start := time.Now()
	first := send("/jobs", `{"n":1}`)
	call1 := <-calls
	apitest.Problem(t, <-send("/jobs", `{"n":1}`), 409, "idempotency_key_in_use")
	apitest.Problem(t, <-send("/jobs", `{"n":2}`), 409, "idempotency_key_reuse")
	time.Sleep(takeover - time.Since(start) + 50*time.Millisecond)
	apitest.Problem(t, <-send("/jobs", `{"n":2}`), 409, "idempotency_key_reuse") // pending or not
	taker := send("/jobs", `{"n":1}`)
	call2 := <-calls
	call1 <- problem.Unavailable("the stuck dependency", 1) // the first run fails late: releases only its own
	if r := <-first; r.Status != 503 {
		t.Fatalf("first run: %d %s", r.Status, r.Body)
	}
	select {
	case r := <-send("/jobs", `{"n":1}`):
		apitest.Problem(t, r, 409, "idempotency_key_in_use")
	case c := <-calls:
		c <- nil
		t.Fatal("the first run's late failure released the taker's reservation: a third run started")
	}
	call2 <- nil
	won := <-taker
	if won.Status != 202 {
		t.Fatalf("taker: %d %s", won.Status, won.Body)
	}
	replay := <-send("/jobs", `{"n":1}`)
	if replay.Status != 202 || string(replay.Body) != string(won.Body) || replay.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay: %d %s, want the taker's %s", replay.Status, replay.Body, won.Body)
	}

	// Without TakeoverAfter the reservation stays the first run's.
	key = "k-no-takeover"
	first = send("/other-jobs", `{"n":1}`)
	call1 = <-calls
	time.Sleep(takeover + 50*time.Millisecond)
	apitest.Problem(t, <-send("/other-jobs", `{"n":1}`), 409, "idempotency_key_in_use")
	call1 <- nil
	if r := <-first; r.Status != 202 {
		t.Fatalf("first run without takeover: %d %s", r.Status, r.Body)
	}
}

func TestBodyTooLarge(t *testing.T) {
	s := apitest.Start(t, testRoutes(), func(c *httpserver.Config) { c.MaxBodyBytes = 4096 })
	tn := s.Tenant(t, false)
	apitest.Problem(t, s.Oversize(t, "POST", "/things", tn.Secret, 4097), 413, "payload_too_large")
	if r := s.Do(t, "POST", "/things", tn.Secret, `{"name":"`+strings.Repeat("x", 4000)+`"}`); r.Status != 201 {
		t.Fatalf("a body under the cap: %d", r.Status)
	}
}

func TestEveryCodeHasATableEntry(t *testing.T) {
	spec := []string{"unauthorized", "invalid_key", "key_revoked", "key_expired", "insufficient_scope", "ip_not_allowed",
		"not_found", "method_not_allowed", "invalid_request", "idempotency_key_reuse", "rate_limited", "quota_exceeded",
		"unsupported_version", "internal_error"}
	for _, c := range spec {
		e, ok := problem.Table[problem.Code(c)]
		if !ok || e.Added || e.Title == "" || e.SuggestedAction == "" {
			t.Fatalf("spec code %s: %+v", c, e)
		}
	}
	for _, c := range []string{"payload_too_large", "idempotency_key_in_use", "service_unavailable"} {
		if e := problem.Table[problem.Code(c)]; !e.Added || !(e.Retryable || c == "payload_too_large") {
			t.Fatalf("additive code %s: %+v", c, e)
		}
	}
}

func mustJSON(m map[string]any) []byte {
	b, _ := json.Marshal(m)
	return b
}

// TestSlowClientsAreCut: a client that sends half a request and stalls is disconnected
// after the read timeout; an idle keep-alive connection after the idle timeout.
func TestSlowClientsAreCut(t *testing.T) {
	s := apitest.Start(t, testRoutes(), func(c *httpserver.Config) {
		c.ReadTimeout, c.IdleTimeout = 300*time.Millisecond, 300*time.Millisecond
	})
	conn, err := net.Dial("tcp", strings.TrimPrefix(s.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte("POST /things HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{")); err != nil {
		t.Fatal(err)
	}
	conn.SetReadDeadline(time.Now().Add(3 * time.Second))
	start := time.Now()
	_, err = io.ReadAll(conn)
	if err != nil || time.Since(start) > 2*time.Second {
		t.Fatalf("half-open request not cut within the read timeout: %v after %s", err, time.Since(start))
	}
	idle, err := net.Dial("tcp", strings.TrimPrefix(s.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	idle.SetReadDeadline(time.Now().Add(3 * time.Second))
	start = time.Now()
	if _, err := io.ReadAll(idle); err != nil || time.Since(start) > 2*time.Second {
		t.Fatalf("idle connection not closed: %v after %s", err, time.Since(start))
	}
}

// TestLongURLGetsAProblem: a request line over the read buffer is a 422 problem, not a
// reset; a long query string under it is served.
func TestLongURLGetsAProblem(t *testing.T) {
	s := apitest.Start(t, testRoutes(), nil)
	tn := s.Tenant(t, false)
	if r := s.Do(t, "GET", "/things?x="+strings.Repeat("a", 8000), tn.Secret, ""); r.Status != 200 {
		t.Fatalf("8 KB query: %d", r.Status)
	}
	apitest.Problem(t, s.Do(t, "GET", "/things?x="+strings.Repeat("a", 20000), tn.Secret, ""), 422, "invalid_request")
}

// TestChangingLimitsKeepsWhatWasSpent: an administrator raising a key's quotas after it
// spent some keeps those requests spent, no more: 3 of 3 daily spent and raised to
// 10000 is admitted with 9996 left (it was locked out for a day). (limits_test.go covers
// the burst window and lowering, on a clock the test moves.)
func TestChangingLimitsKeepsWhatWasSpent(t *testing.T) {
	s := apitest.Start(t, testRoutes(), nil)
	tn := s.Tenant(t, false)
	k, sec := s.Key(t, workspace.KeySpec{WorkspaceID: tn.Workspace.ID, Env: apikey.Live, Burst: 4, Daily: 3})
	for i := 0; i < 3; i++ {
		if r := s.Do(t, "GET", "/things", sec, ""); r.Status != 200 {
			t.Fatalf("request %d: %d", i, r.Status)
		}
	}
	apitest.Problem(t, s.Do(t, "GET", "/things", sec, ""), 429, "quota_exceeded")
	if _, err := s.Keys.SetLimits(context.Background(), k.ID, 600, 10000); err != nil {
		t.Fatal(err)
	}
	time.Sleep(600 * time.Millisecond) // the key cache
	r := s.Do(t, "GET", "/things", sec, "")
	if r.Status != 200 {
		t.Fatalf("after raising the limits: %d %s", r.Status, r.Body)
	}
	if got := r.Header.Get("RateLimit"); !strings.Contains(got, `"daily";r=9996;`) {
		t.Fatalf("RateLimit %q, want 9996 daily left", got)
	}
}

// TestRefusalsDeclareTheKeysOwnWindows: once the key is known, a refusal before the
// request is counted (scope, version, allow-list, revocation) declares that key's
// windows and what is really left, and spends nothing.
// A route's Admit refusal (the edge's brake) declares the key's own windows, nothing
// spent, as every refusal once the key is known.
func TestAdmitRefusalDeclaresTheKeysOwnWindows(t *testing.T) {
	s := apitest.Start(t, []httpserver.Route{{Method: "POST", Path: "/admitted", Scope: "plans:read",
		Admit:  func(*httpserver.Request) *problem.Problem { return problem.New(problem.RateLimited, "braked") },
		Handle: func(r *httpserver.Request) error { return r.JSON(200, map[string]string{}) }}}, nil)
	tn := s.Tenant(t, false)
	_, sec := s.Key(t, workspace.KeySpec{WorkspaceID: tn.Workspace.ID, Env: apikey.Live, Burst: 77, Daily: 7777})
	for range 2 {
		r := s.Do(t, "POST", "/admitted", sec, "{}")
		apitest.Problem(t, r, 429, "rate_limited")
		if got, want := r.Header.Get("RateLimit-Policy"), `"burst";q=77;w=60, "daily";q=7777;w=86400`; got != want {
			t.Fatalf("RateLimit-Policy %q, want %q", got, want)
		}
		if got := r.Header.Get("RateLimit-Remaining"); got != "77" {
			t.Fatalf("RateLimit-Remaining %q, want 77 (nothing spent)", got)
		}
	}
}

func TestRefusalsDeclareTheKeysOwnWindows(t *testing.T) {
	s := apitest.Start(t, testRoutes(), nil)
	tn := s.Tenant(t, false)
	_, sec := s.Key(t, workspace.KeySpec{WorkspaceID: tn.Workspace.ID, Env: apikey.Live, Burst: 77, Daily: 7777,
		Scopes: []string{"account:read"}})
	_, ipSec := s.Key(t, workspace.KeySpec{WorkspaceID: tn.Workspace.ID, Env: apikey.Live, Burst: 77, Daily: 7777,
		Allow: []string{"203.0.113.0/24"}})
	const policy = `"burst";q=77;w=60, "daily";q=7777;w=86400`
	check := func(r apitest.Response, status int, code, remaining string) {
		t.Helper()
		apitest.Problem(t, r, status, code)
		if got := r.Header.Get("RateLimit-Policy"); got != policy {
			t.Fatalf("%s: RateLimit-Policy %q, want %q", code, got, policy)
		}
		if got := r.Header.Get("RateLimit-Remaining"); got != remaining {
			t.Fatalf("%s: RateLimit-Remaining %q, want %s", code, got, remaining)
		}
	}
	check(s.Do(t, "GET", "/things", ipSec, ""), 403, "ip_not_allowed", "77")
	check(s.Do(t, "GET", "/things", sec, ""), 403, "insufficient_scope", "77")
	check(s.Do(t, "GET", "/things?version=1999-01-01", sec, ""), 400, "unsupported_version", "77")
	for i := 0; i < 5; i++ {
		if r := s.Do(t, "GET", "/fail", sec, ""); r.Status != 500 {
			t.Fatalf("/fail: %d", r.Status)
		}
	}
	check(s.Do(t, "GET", "/things", sec, ""), 403, "insufficient_scope", "72")
	if got := s.Do(t, "GET", "/things", sec, "").Header.Get("RateLimit"); !strings.HasPrefix(got, `"burst";r=72;`) {
		t.Fatalf("RateLimit %q: a refusal spent quota", got)
	}
	// A default key that spent 5 declares r=115 on its 403.
	_, def := s.Key(t, workspace.KeySpec{WorkspaceID: tn.Workspace.ID, Env: apikey.Live, Scopes: []string{"account:read"}})
	for i := 0; i < 5; i++ {
		s.Do(t, "GET", "/fail", def, "")
	}
	r := s.Do(t, "GET", "/things", def, "")
	apitest.Problem(t, r, 403, "insufficient_scope")
	if got := r.Header.Get("RateLimit"); !strings.HasPrefix(got, `"burst";r=115;`) || !strings.Contains(got, `"daily";r=9995;`) {
		t.Fatalf("default key's 403: RateLimit %q, want r=115 and r=9995", got)
	}
	// Before a key is known: the default policy, nothing spent.
	r = s.Do(t, "GET", "/things", "svc_live_nosuchkey", "")
	apitest.Problem(t, r, 401, "invalid_key")
	if r.Header.Get("RateLimit-Policy") != `"burst";q=120;w=60, "daily";q=10000;w=86400` || r.Header.Get("RateLimit-Remaining") != "120" {
		t.Fatalf("401 headers: %v", r.Header)
	}
}

// TestMalformedRequestsSayWhatToFix: a request fasthttp cannot read is 422
// invalid_request whose errors[] names the part to fix (its suggested_action points
// there), without echoing the request.
func TestMalformedRequestsSayWhatToFix(t *testing.T) {
	s := apitest.Start(t, testRoutes(), nil)
	cases := []struct{ raw, field string }{
		{"GARBAGE\r\n\r\n", "request_line"},
		{"GET  /things HTTP/1.1\r\nHost: x\r\n\r\n", "request_line"},
		{"POST /things HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nAuthorization: Bearer svc_live_secret\r\nBad Header\r\n\r\nabc", "headers"},
		{"POST /things HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n", "Content-Length"},
		{"POST /things HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabc", "Content-Length"},
		{"GET /things HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n", "Host"},
	}
	// Bodies are read only once the key is checked: a malformed body needs a valid key to
	// be seen at all (without one the answer is 401 before any body byte is read).
	_, sec := s.Key(t, workspace.KeySpec{WorkspaceID: s.Tenant(t, false).Workspace.ID, Env: apikey.Live, Scopes: []string{"plans:read"}})
	cases = append(cases, struct{ raw, field string }{
		"POST /things HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + sec + "\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "body"})
	for _, c := range cases {
		body := rawExchange(t, s.URL, c.raw)
		var m map[string]any
		if err := json.Unmarshal([]byte(body), &m); err != nil {
			t.Fatalf("%q: %v: %s", c.raw, err, body)
		}
		if m["status"] != float64(422) || m["code"] != "invalid_request" {
			t.Fatalf("%q: %s", c.raw, body)
		}
		errs, _ := m["errors"].([]any)
		if len(errs) != 1 {
			t.Fatalf("%q: errors[] %v, want one entry (suggested_action: %v)", c.raw, m["errors"], m["suggested_action"])
		}
		e := errs[0].(map[string]any)
		if e["field"] != c.field || e["rule"] != "http_syntax" || e["detail"] == "" {
			t.Errorf("%q: errors[0] %v, want field %s rule http_syntax with a detail", c.raw, e, c.field)
		}
		if strings.Contains(body, "svc_live_secret") || strings.Contains(body, "GARBAGE") {
			t.Errorf("%q: the problem echoes the request: %s", c.raw, body)
		}
	}
	m := apitest.Problem(t, overlong(t, s, "/things?x="+strings.Repeat("a", 20000)), 422, "invalid_request")
	if errs, _ := m["errors"].([]any); len(errs) != 1 || errs[0].(map[string]any)["rule"] != "max_length" || errs[0].(map[string]any)["value"] != float64(16384) {
		t.Errorf("an over-long request line: errors[] %v", m["errors"])
	}
}

// overlong sends GET path, whose request line is longer than the server reads: the
// server answers and closes the connection with the rest unread, and the kernel may then
// reset it before the client has read the answer (a race of the client's write against
// the server's close, not of the answer). A reset attempt is tried again, at most 5 times.
func overlong(t *testing.T, s *apitest.Server, path string) apitest.Response {
	t.Helper()
	var last error
	for range 5 {
		resp, err := s.Client.Get(s.URL + path)
		if err != nil {
			last = err
			continue
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			last = err
			continue
		}
		return apitest.Response{Status: resp.StatusCode, Header: resp.Header, Body: b}
	}
	t.Fatalf("GET of an over-long request line: %v", last)
	return apitest.Response{}
}

// rawExchange writes raw to the server and returns the response body.
func rawExchange(t *testing.T, url, raw string) string {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(3 * time.Second))
	if _, err := c.Write([]byte(raw)); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("%q: %v", raw, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// A write operation without a dry run refuses validate_only (any value) before its
// handler runs: a request meant as a dry run never runs for real. A read ignores it.
func TestDryRunRefusedWhereThereIsNone(t *testing.T) {
	s := apitest.Start(t, testRoutes(), nil)
	tn := s.Tenant(t, false)
	for _, v := range []string{"true", "false", "yes"} {
		p := apitest.Problem(t, s.Do(t, "POST", "/things?"+httpserver.DryRunQuery+"="+v, tn.Secret, `{"name":"x"}`), 422, "invalid_request")
		errs, _ := p["errors"].([]any)
		if len(errs) != 1 || errs[0].(map[string]any)["field"] != httpserver.DryRunQuery || errs[0].(map[string]any)["rule"] != "dry_run_unsupported" {
			t.Fatalf("validate_only=%s: %v", v, p)
		}
	}
	if r := s.Do(t, "POST", "/things", tn.Secret, `{"name":"x"}`); r.Status != 201 {
		t.Fatalf("without validate_only: %d %s", r.Status, r.Body)
	}
	if r := s.Do(t, "GET", "/things?"+httpserver.DryRunQuery+"=true", tn.Secret, ""); r.Status != 200 {
		t.Fatalf("a read with validate_only: %d %s", r.Status, r.Body)
	}
}

// TestIdempotencyKeyEmptyOrRepeated: an Idempotency-Key header sent empty or twice is
// 422 invalid_request naming it, and spends nothing; the request is not run.
func TestIdempotencyKeyEmptyOrRepeated(t *testing.T) {
	s := apitest.Start(t, testRoutes(), nil)
	tn := s.Tenant(t, false)
	empty := s.Do(t, "POST", "/things", tn.Secret, `{"name":"x"}`, "Idempotency-Key", "")
	m := apitest.Problem(t, empty, 422, "invalid_request")
	if e := m["errors"].([]any)[0].(map[string]any); e["field"] != "Idempotency-Key" || e["rule"] != "min_length" {
		t.Fatalf("empty: errors %v", m["errors"])
	}
	c := rawConn(t, s, "POST /things HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "+tn.Secret+
		"\r\nContent-Type: application/json\r\nIdempotency-Key: a\r\nIdempotency-Key: b\r\nContent-Length: 12\r\n\r\n{\"name\":\"x\"}")
	twice := readAnswer(t, c, bufio.NewReader(c))
	m = apitest.Problem(t, twice, 422, "invalid_request")
	if e := m["errors"].([]any)[0].(map[string]any); e["field"] != "Idempotency-Key" || e["rule"] != "single" {
		t.Fatalf("twice: errors %v", m["errors"])
	}
	if got := twice.Header.Get("RateLimit-Remaining"); got != "120" {
		t.Fatalf("RateLimit-Remaining %q: a refused key spent the window", got)
	}
	if r := s.Do(t, "POST", "/things", tn.Secret, `{"name":"x"}`, "Idempotency-Key", "a"); r.Status != 201 {
		t.Fatalf("one key: %d %s", r.Status, r.Body)
	}
}

// TestAuthorizationRepeated: two Authorization headers are 401 unauthorized, whichever
// comes first: the server never picks one of two tokens.
func TestAuthorizationRepeated(t *testing.T) {
	s := apitest.Start(t, testRoutes(), nil)
	tn := s.Tenant(t, false)
	for _, pair := range [][2]string{{tn.Secret, "svc_live_bogus"}, {"svc_live_bogus", tn.Secret}} {
		c := rawConn(t, s, "GET /things HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "+pair[0]+"\r\nAuthorization: Bearer "+pair[1]+"\r\n\r\n")
		apitest.Problem(t, readAnswer(t, c, bufio.NewReader(c)), 401, "unauthorized")
	}
}
