package httpserver_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"svc/lib/apikey"
	"svc/lib/httpserver"
	"svc/lib/svctest"
	"svc/schema/apitest"
	"svc/schema/workspace"
)

// The system test of key allow-lists behind a real HAProxy (Debian's package; `make
// test` installs it through deploy/local/services.sh). The proxy connects to the server
// from 127.0.0.1, the one trusted proxy; the client connects to the proxy from
// 127.0.0.2, so the address the server attributes a request to tells them apart.
const (
	proxyAddr  = "127.0.0.1"
	clientAddr = "127.0.0.2"
)

// TestAllowListBehindHAProxy: HAProxy's option forwardfor adds an X-Forwarded-For line of
// its own after any the client sent. A key allowed only from 10.0.0.0/8 is refused to the
// client whether or not it forges 10.9.9.9 in a line of its own; a key allowed from the
// client's address is served; a key allowed from the proxy's address only is refused.
func TestAllowListBehindHAProxy(t *testing.T) {
	s := apitest.Start(t, testRoutes(), func(c *httpserver.Config) {
		c.TrustedProxies = []netip.Prefix{netip.MustParsePrefix(proxyAddr + "/32")}
	})
	edge := startHAProxy(t, strings.TrimPrefix(s.URL, "http://"))
	tn := s.Tenant(t, false)
	key := func(allow ...string) string {
		_, sec := s.Key(t, workspace.KeySpec{WorkspaceID: tn.Workspace.ID, Env: apikey.Live, Allow: allow})
		return sec
	}
	tenOnly, client, proxyOnly := key("10.0.0.0/8"), key(clientAddr+"/32"), key(proxyAddr)
	forged := [][]string{nil, {"10.9.9.9"}, {"10.9.9.9, " + proxyAddr}, {"10.9.9.9", proxyAddr}}
	for _, lines := range forged {
		for _, sec := range []string{tenOnly, proxyOnly} {
			r := edge.get(t, sec, lines)
			if r.Status != 403 {
				t.Fatalf("X-Forwarded-For lines %q: a key not allowing the client answers %d: %s", lines, r.Status, r.Body)
			}
			if m := apitest.Problem(t, r, 403, "ip_not_allowed"); m["client_ip"] != clientAddr {
				t.Fatalf("X-Forwarded-For lines %q: client_ip %v, want the client's %s", lines, m["client_ip"], clientAddr)
			}
		}
		if r := edge.get(t, client, lines); r.Status != 200 {
			t.Fatalf("X-Forwarded-For lines %q: the client's own key answers %d: %s", lines, r.Status, r.Body)
		}
	}
}

// haproxy is a running HAProxy and a client that connects to it from clientAddr.
type haproxy struct {
	url    string
	client *http.Client
}

// get sends GET /things through the proxy with key sec and lines as X-Forwarded-For
// header lines of their own, in order.
func (h haproxy) get(t *testing.T, sec string, lines []string) apitest.Response {
	t.Helper()
	req, err := http.NewRequest("GET", h.url+"/things", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+sec)
	for _, l := range lines {
		req.Header.Add("X-Forwarded-For", l)
	}
	resp, err := h.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return apitest.Response{Status: resp.StatusCode, Header: resp.Header, Body: b}
}

// startHAProxy runs haproxy in the foreground (-db) in front of backend, with
// option forwardfor, until the test ends.
func startHAProxy(t *testing.T, backend string) haproxy {
	t.Helper()
	bin := haproxyBinary(t)
	front := svctest.FreeAddr(t)
	cfg := fmt.Sprintf(`defaults
    mode http
    option forwardfor
    timeout connect 2s
    timeout client 10s
    timeout server 10s

frontend edge
    bind %s
    default_backend svc

backend svc
    server svc %s source %s
`, front, backend, proxyAddr)
	path := filepath.Join(t.TempDir(), "haproxy.cfg")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	var out svctest.SyncBuffer
	cmd := exec.Command(bin, "-f", path, "-db")
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	if !listening(front, 10*time.Second) {
		t.Fatalf("haproxy does not listen on %s: %s", front, out.String())
	}
	dialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(clientAddr)}, Timeout: 5 * time.Second}
	tr := &http.Transport{DialContext: dialer.DialContext}
	t.Cleanup(tr.CloseIdleConnections)
	return haproxy{url: "http://" + front, client: &http.Client{Transport: tr, Timeout: 30 * time.Second}}
}

// haproxyBinary finds Debian's haproxy; without it the test skips, or fails under
// CI=true, where `make test` installs it.
func haproxyBinary(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("haproxy"); err == nil {
		return p
	}
	if _, err := os.Stat("/usr/sbin/haproxy"); err == nil {
		return "/usr/sbin/haproxy"
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("haproxy is not installed (deploy/local/services.sh installs it)")
	}
	t.Skip("haproxy is not installed: apt-get install haproxy, or run make test")
	return ""
}

// listening polls addr until it accepts a connection, for up to d.
func listening(addr string, d time.Duration) bool {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	for ctx.Err() == nil {
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			return true
		}
		time.Sleep(50 * time.Millisecond)
	}
	return false
}
