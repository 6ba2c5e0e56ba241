package httpserver_test

import (
	"bufio"
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"svc/lib/apikey"
	"svc/schema/apitest"
	"svc/schema/workspace"
)

// Promises of the developer pages (versioning.md, limits.md, errors.md) that the other
// tests of this package touch only from one side.

// TestNoVersionBeforeTheKeyIsAccepted: the answers given before a key is accepted and a
// version resolved carry no SVC-Version (versioning.md lists them); one given after does.
func TestNoVersionBeforeTheKeyIsAccepted(t *testing.T) {
	s := apitest.Start(t, testRoutes(), nil)
	tn := s.Tenant(t, false)
	past := time.Now().Add(-time.Hour)
	_, expired := s.Key(t, workspace.KeySpec{WorkspaceID: tn.Workspace.ID, Env: apikey.Live, ExpiresAt: &past})
	_, elsewhere := s.Key(t, workspace.KeySpec{WorkspaceID: tn.Workspace.ID, Env: apikey.Live, Allow: []string{"203.0.113.0/24"}})
	revokedKey, revoked := s.Key(t, workspace.KeySpec{WorkspaceID: tn.Workspace.ID, Env: apikey.Live})
	if _, err := s.Keys.Revoke(context.Background(), revokedKey.ID); err != nil {
		t.Fatal(err)
	}
	time.Sleep(600 * time.Millisecond) // the key cache's TTL
	for _, c := range []struct {
		what, method, path, secret, body string
		status                           int
	}{
		{"no key", "GET", "/things", "", "", 401},
		{"unknown key", "GET", "/things", "svc_live_nosuchkey", "", 401},
		{"expired key", "GET", "/things", expired, "", 401},
		{"revoked key", "GET", "/things", revoked, "", 401},
		{"address not allowed", "GET", "/things", elsewhere, "", 403},
		{"unknown path", "GET", "/nowhere", tn.Secret, "", 404},
		{"method", "DELETE", "/things", tn.Secret, "", 405},
		{"unsupported version", "GET", "/things?version=1999-01-01", tn.Secret, "", 400},
		{"public route", "GET", "/healthz", "", "", 200},
	} {
		r := s.Do(t, c.method, c.path, c.secret, c.body, "SVC-Version", "2026-03-01")
		if r.Status != c.status {
			t.Fatalf("%s: %d %s, want %d", c.what, r.Status, r.Body, c.status)
		}
		if v := r.Header.Get("SVC-Version"); v != "" {
			t.Fatalf("%s: SVC-Version %q on an answer given before the version was resolved", c.what, v)
		}
	}
	for what, msg := range map[string]string{
		"malformed HTTP":    "GET /things HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n",
		"a body over 1 MiB": "POST /things HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + tn.Secret + "\r\nContent-Length: 5000000\r\n\r\n",
	} {
		c := rawConn(t, s, msg)
		if r := readAnswer(t, c, bufio.NewReader(c)); r.Status/100 != 4 || r.Header.Get("SVC-Version") != "" {
			t.Fatalf("%s: %d, SVC-Version %q", what, r.Status, r.Header.Get("SVC-Version"))
		}
	}
	if r := s.Do(t, "GET", "/things", tn.Secret, "", "SVC-Version", "2026-03-01"); r.Header.Get("SVC-Version") != "2026-03-01" {
		t.Fatalf("an accepted request: SVC-Version %q", r.Header.Get("SVC-Version"))
	}
}

// TestReplayNamesTheRepeatInItsHeader: an idempotent replay's body is the first answer,
// its request_id included, while its Request-Id header names the repeat (errors.md,
// events.md).
func TestReplayNamesTheRepeatInItsHeader(t *testing.T) {
	s := apitest.Start(t, testRoutes(), nil)
	tn := s.Tenant(t, false)
	first := s.Do(t, "POST", "/things", tn.Secret, `{"name":"x"}`, "Idempotency-Key", "replay-header")
	again := s.Do(t, "POST", "/things", tn.Secret, `{"name":"x"}`, "Idempotency-Key", "replay-header")
	if first.Status != 201 || again.Status != 201 || again.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("first %d, again %d (replayed %q)", first.Status, again.Status, again.Header.Get("Idempotent-Replayed"))
	}
	if string(again.Body) != string(first.Body) {
		t.Fatalf("the replay's body differs: %s against %s", again.Body, first.Body)
	}
	h1, h2 := first.Header.Get("Request-Id"), again.Header.Get("Request-Id")
	if !strings.HasPrefix(h2, "req_") || h2 == h1 {
		t.Fatalf("the replay's Request-Id %q, the first's %q: want the repeat's own", h2, h1)
	}
}

// TestHeadersDescribeTheClosestWindow: RateLimit-Limit, -Remaining and -Reset describe
// the window with the smallest share left (limits.md), the daily one when it is.
func TestHeadersDescribeTheClosestWindow(t *testing.T) {
	s := apitest.Start(t, testRoutes(), nil)
	tn := s.Tenant(t, false)
	_, sec := s.Key(t, workspace.KeySpec{WorkspaceID: tn.Workspace.ID, Env: apikey.Live, Burst: 100, Daily: 3})
	var r apitest.Response
	for i := 0; i < 2; i++ {
		r = s.Do(t, "GET", "/things", sec, "")
	}
	if r.Status != 200 || r.Header.Get("RateLimit-Limit") != "3" || r.Header.Get("RateLimit-Remaining") != "1" {
		t.Fatalf("after 2 of a daily 3 and a burst 100: %d, Limit %q Remaining %q", r.Status,
			r.Header.Get("RateLimit-Limit"), r.Header.Get("RateLimit-Remaining"))
	}
	_, burst := s.Key(t, workspace.KeySpec{WorkspaceID: tn.Workspace.ID, Env: apikey.Live, Burst: 3, Daily: 100})
	for i := 0; i < 2; i++ {
		r = s.Do(t, "GET", "/things", burst, "")
	}
	if r.Header.Get("RateLimit-Limit") != "3" || r.Header.Get("RateLimit-Remaining") != "1" {
		t.Fatalf("after 2 of a burst 3 and a daily 100: Limit %q Remaining %q", r.Header.Get("RateLimit-Limit"), r.Header.Get("RateLimit-Remaining"))
	}
}

// TestRevokedAndExpiredDeclareTheKeysOwnWindows: key_revoked and key_expired name the
// key's own windows, as the other refusals of a known key do (limits.md).
func TestRevokedAndExpiredDeclareTheKeysOwnWindows(t *testing.T) {
	s := apitest.Start(t, testRoutes(), nil)
	tn := s.Tenant(t, false)
	k, sec := s.Key(t, workspace.KeySpec{WorkspaceID: tn.Workspace.ID, Env: apikey.Live, Burst: 77, Daily: 7777})
	past := time.Now().Add(-time.Hour)
	_, expired := s.Key(t, workspace.KeySpec{WorkspaceID: tn.Workspace.ID, Env: apikey.Live, Burst: 77, Daily: 7777, ExpiresAt: &past})
	if _, err := s.Keys.Revoke(context.Background(), k.ID); err != nil {
		t.Fatal(err)
	}
	time.Sleep(600 * time.Millisecond)
	for code, secret := range map[string]string{"key_revoked": sec, "key_expired": expired} {
		r := s.Do(t, "GET", "/things", secret, "")
		apitest.Problem(t, r, 401, code)
		if got := r.Header.Get("RateLimit-Policy"); got != `"burst";q=77;w=60, "daily";q=7777;w=86400` || r.Header.Get("RateLimit-Remaining") != "77" {
			t.Fatalf("%s: RateLimit-Policy %q, Remaining %q", code, got, r.Header.Get("RateLimit-Remaining"))
		}
	}
}

// TestContinueThenPayloadTooLarge: a request with Expect: 100-continue and a body over
// the ceiling gets 100 Continue as soon as its headers are in, then 413, its body unread,
// and the connection closed (limits.md).
func TestContinueThenPayloadTooLarge(t *testing.T) {
	s := apitest.Start(t, testRoutes(), nil)
	tn := s.Tenant(t, false)
	c := rawConn(t, s, "POST /things HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "+tn.Secret+
		"\r\nContent-Type: application/json\r\nExpect: 100-continue\r\nContent-Length: 5000000\r\n\r\n")
	br := bufio.NewReader(c)
	c.SetReadDeadline(time.Now().Add(3 * time.Second))
	line, err := br.ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "HTTP/1.1 100") {
		t.Fatalf("first line %q (%v), want 100 Continue", line, err)
	}
	if blank, _ := br.ReadString('\n'); blank != "\r\n" {
		t.Fatalf("after the 100: %q", blank)
	}
	r := readAnswer(t, c, br)
	apitest.Problem(t, r, 413, "payload_too_large")
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	if rest, err := io.ReadAll(br); len(rest) > 0 || err != nil {
		t.Fatalf("after the 413: %q, %v (want the connection closed)", rest, err)
	}
}

// TestIdempotencyKeyBound: a key of 255 characters is taken; one of 256 is 422 with
// errors[].value 255, the bound (errors.md).
func TestIdempotencyKeyBound(t *testing.T) {
	s := apitest.Start(t, testRoutes(), nil)
	tn := s.Tenant(t, false)
	if r := s.Do(t, "POST", "/things", tn.Secret, `{"name":"x"}`, "Idempotency-Key", strings.Repeat("k", 255)); r.Status != 201 {
		t.Fatalf("255 characters: %d %s", r.Status, r.Body)
	}
	m := apitest.Problem(t, s.Do(t, "POST", "/things", tn.Secret, `{"name":"x"}`, "Idempotency-Key", strings.Repeat("k", 256)), 422, "invalid_request")
	if e := m["errors"].([]any)[0].(map[string]any); e["field"] != "Idempotency-Key" || e["rule"] != "max_length" || e["value"] != float64(255) {
		t.Fatalf("256 characters: errors %v", m["errors"])
	}
}

// TestProblemsAreNosniffAndNoStore: a problem document, which may quote what the request
// sent, is marked never to be sniffed as another type nor kept by a cache.
func TestProblemsAreNosniffAndNoStore(t *testing.T) {
	s := apitest.Start(t, testRoutes(), nil)
	tn := s.Tenant(t, false)
	for _, r := range []apitest.Response{
		s.Do(t, "GET", "/nowhere", tn.Secret, ""),
		s.Do(t, "GET", "/things", "", ""),
		s.Do(t, "POST", "/things", tn.Secret, `{"name":"x"}`, "Content-Encoding", "gzip"),
	} {
		if r.Header.Get("X-Content-Type-Options") != "nosniff" || r.Header.Get("Cache-Control") != "no-store" {
			t.Fatalf("%d: X-Content-Type-Options %q, Cache-Control %q", r.Status, r.Header.Get("X-Content-Type-Options"), r.Header.Get("Cache-Control"))
		}
	}
}
