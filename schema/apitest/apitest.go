// Package apitest runs HTTP roles in tests against the real Redis: it starts an
// httpserver.Server on a free loopback port and creates workspaces, pixels and keys through the
// same store the service uses. Tests skip when Redis is unreachable, except under
// CI=true, where they fail.
package apitest

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	json "github.com/goccy/go-json"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"svc/lib/apikey"
	"svc/lib/httpserver"
	"svc/lib/ids"
	"svc/lib/logs"
	"svc/lib/process"
	"svc/lib/settings"
	"svc/lib/svctest"
	"svc/schema/workspace"
)

// RedisURL is where tests find one Redis server (svctest.RedisURL).
func RedisURL() string { return svctest.RedisURL() }

// RedisEnv returns the environment entries that point a child process at the test
// Redis (svctest.RedisEnv).
func RedisEnv() []string { return svctest.RedisEnv() }

// Redis connects to the test Redis (svctest.Redis).
func Redis(t testing.TB) redis.UniversalClient { return svctest.Redis(t) }

// Server is a running httpserver.Server for a test.
type Server struct {
	URL      string
	API      *httpserver.Server
	Deps     httpserver.Deps
	Redis    redis.UniversalClient
	Keys     *workspace.Store
	Registry *prometheus.Registry
	Client   *http.Client
}

// Start serves routes on 127.0.0.1:0 until the test ends. cfg may adjust the config
// before the server starts (nil for defaults).
func Start(t testing.TB, routes []httpserver.Route, cfg func(*httpserver.Config)) *Server {
	t.Helper()
	rdb := Redis(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := httpserver.ConfigFromEnv(settings.Defaults())
	c.HTTPAddr = ln.Addr().String()
	c.ReadTimeout, c.WriteTimeout, c.IdleTimeout, c.ShutdownTimeout = 5*time.Second, 5*time.Second, 30*time.Second, 5*time.Second
	c.RedisAutoPipeline = false // each command its own round trip, as before the option existed
	c.PublicURL = "http://" + c.HTTPAddr
	if cfg != nil {
		cfg(&c)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	ks := workspace.NewStore(rdb)
	ks.CacheTTL = c.KeyCacheTTL
	deps := httpserver.NewDeps(c, rdb, ks, reg, logs.New(slog.LevelInfo))
	srv := httpserver.NewServer(c, deps, append(httpserver.HealthRoutes(process.RedisCheck(rdb)), routes...))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = srv.Serve(ctx, ln); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return &Server{URL: "http://" + c.HTTPAddr, API: srv, Deps: deps, Redis: rdb, Keys: ks,
		Registry: reg, Client: &http.Client{Timeout: 30 * time.Second}}
}

// Workspace creates a workspace (a showroom one when showroom is true).
func (s *Server) Workspace(t testing.TB, showroom bool) workspace.Workspace {
	t.Helper()
	w, err := s.Keys.CreateWorkspace(context.Background(), "test "+uuid.NewString()[:8], showroom)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// Pixel creates a pixel in ws.
func (s *Server) Pixel(t testing.TB, ws uuid.UUID) workspace.Pixel {
	t.Helper()
	p, err := s.Keys.CreatePixel(context.Background(), ws, "test pixel")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Key creates a key per spec (WorkspaceID and Env must be set; Scopes default to all).
func (s *Server) Key(t testing.TB, spec workspace.KeySpec) (apikey.Key, string) {
	t.Helper()
	if len(spec.Scopes) == 0 {
		spec.Scopes = apikey.Scopes
	}
	k, secret, err := s.Keys.CreateKey(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	return k, secret
}

// Tenant is a workspace with one pixel and one all-scopes key.
type Tenant struct {
	Workspace workspace.Workspace
	Pixel     workspace.Pixel
	Key       apikey.Key
	Secret    string
}

// Tenant creates a live (or, with showroom, sandbox) workspace, pixel and key.
func (s *Server) Tenant(t testing.TB, showroom bool) Tenant {
	w := s.Workspace(t, showroom)
	env := apikey.Live
	if showroom {
		env = apikey.Sandbox
	}
	k, sec := s.Key(t, workspace.KeySpec{WorkspaceID: w.ID, Env: env})
	return Tenant{Workspace: w, Pixel: s.Pixel(t, w.ID), Key: k, Secret: sec}
}

// PixelID is the tenant's prefixed pixel id.
func (tn Tenant) PixelID() string { return ids.Format(ids.Pixel, tn.Pixel.ID) }

// Response is a finished HTTP exchange.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// JSON decodes the body into a map.
func (r Response) JSON(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.Body, &m); err != nil {
		t.Fatalf("body is not JSON: %v: %s", err, r.Body)
	}
	return m
}

// Do sends a request. headers alternate name, value.
func (s *Server) Do(t testing.TB, method, path, secret, body string, headers ...string) Response {
	t.Helper()
	req, err := http.NewRequest(method, s.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if secret != "" {
		req.Header.Set("Authorization", "Bearer "+secret)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := s.Client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return Response{Status: resp.StatusCode, Header: resp.Header, Body: b}
}

// Problem asserts r is a problem document with status and code, carrying the extension
// members of its code and none of another code's (checkExtensions), and returns it.
func Problem(t testing.TB, r Response, status int, code string) map[string]any {
	t.Helper()
	if r.Status != status {
		t.Fatalf("status %d, want %d: %s", r.Status, status, r.Body)
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("Content-Type %q, want application/problem+json", ct)
	}
	m := r.JSON(t)
	if m["code"] != code {
		t.Fatalf("code %v, want %s: %s", m["code"], code, r.Body)
	}
	for _, f := range []string{"type", "title", "status", "code", "detail", "request_id", "doc_url", "retryable", "suggested_action"} {
		if _, ok := m[f]; !ok {
			t.Fatalf("problem lacks %s: %s", f, r.Body)
		}
	}
	if rid, _ := m["request_id"].(string); !strings.HasPrefix(rid, "req_") || r.Header.Get("Request-Id") != rid {
		t.Fatalf("request_id %q vs Request-Id header %q", rid, r.Header.Get("Request-Id"))
	}
	if m["type"] != m["doc_url"] || !strings.HasSuffix(m["type"].(string), "/errors/"+code) {
		t.Fatalf("type %v / doc_url %v do not name the code's page", m["type"], m["doc_url"])
	}
	checkExtensions(t, r, m, code)
	return m
}

// extensions are the problem members that belong to one code each (errors.md, the
// fields table): "`required_scope`, `granted_scopes` | only on `insufficient_scope`",
// "`errors[]` | only on `invalid_request`, and always there", "`expired_at` | only on
// `key_expired`", "`client_ip` | only on `ip_not_allowed`". The code table's conditions
// say each of those codes carries its members ("the response lists required_scope and
// granted_scopes", "carries expired_at", "carries client_ip").
var extensions = []struct{ member, code string }{
	{"errors", "invalid_request"},
	{"required_scope", "insufficient_scope"},
	{"granted_scopes", "insufficient_scope"},
	{"expired_at", "key_expired"},
	{"client_ip", "ip_not_allowed"},
}

// checkExtensions fails unless m, a problem of code, carries exactly the extension
// members of its code, each of its documented shape: errors[] one {field, rule, value,
// …} entry or more, required_scope a scope, granted_scopes an array, expired_at an
// RFC 3339 instant, client_ip an address.
func checkExtensions(t testing.TB, r Response, m map[string]any, code string) {
	t.Helper()
	for _, x := range extensions {
		v, has := m[x.member]
		if has && code != x.code {
			t.Fatalf("problem %s carries %s, documented only on %s: %s", code, x.member, x.code, r.Body)
		}
		if !has && code == x.code {
			t.Fatalf("problem %s lacks %s, documented on every %s problem: %s", code, x.member, code, r.Body)
		}
		if !has {
			continue
		}
		ok := false
		switch x.member {
		case "errors":
			errs, _ := v.([]any)
			ok = len(errs) > 0
			for _, e := range errs {
				fe, _ := e.(map[string]any)
				field, _ := fe["field"].(string)
				rule, _ := fe["rule"].(string)
				_, hasValue := fe["value"]
				ok = ok && field != "" && rule != "" && hasValue
			}
		case "required_scope":
			s, _ := v.(string)
			ok = s != ""
		case "granted_scopes":
			_, ok = v.([]any)
		case "expired_at":
			s, _ := v.(string)
			_, err := time.Parse(time.RFC3339, s)
			ok = err == nil
		case "client_ip":
			s, _ := v.(string)
			_, err := netip.ParseAddr(s)
			ok = err == nil
		}
		if !ok {
			t.Fatalf("problem %s: %s is not of its documented shape: %s", code, x.member, r.Body)
		}
	}
}

// Oversize sends only the head of a request that announces a body of contentLength bytes
// and returns the response the server gives before any body byte is sent: a server that
// refuses oversize bodies before parsing answers at once. (Sending the body as well makes
// a client race the server's close and see a reset instead of the answer.)
func (s *Server) Oversize(t testing.TB, method, path, secret string, contentLength int) Response {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(s.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	head := method + " " + path + " HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\n" +
		"Authorization: Bearer " + secret + "\r\nContent-Length: " + strconv.Itoa(contentLength) + "\r\n\r\n"
	if _, err := conn.Write([]byte(head)); err != nil {
		t.Fatal(err)
	}
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer to an oversize request: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return Response{Status: resp.StatusCode, Header: resp.Header, Body: b}
}
