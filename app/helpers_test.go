package app

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/netip"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"svc/lib/httpserver"
	"svc/lib/logs"
	"svc/lib/settings"
	"svc/schema/apitest"
	"svc/schema/chtest"
	"svc/schema/workspace"
)

// rig is the application on a test server over the real Redis and a migrated
// ClickHouse database.
type rig struct {
	*apitest.Server
	app *App
}

// newRig serves the application's pages (and, with https, names itself with an https
// public URL, as behind a TLS proxy).
func newRig(t *testing.T, https bool) *rig {
	_, conn := chtest.NewDB(t)
	a := &App{}
	// Loopback is a trusted proxy, so a test can come from any address (X-Forwarded-For).
	srv := apitest.Start(t, a.Routes(), func(c *httpserver.Config) { c.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")} })
	cfg := ConfigFromEnv(settings.Defaults())
	cfg.AddressAttempts = 100000 // every test comes from loopback; TestThrottlePerAddress tests this bound
	cfg.PublicURL = srv.URL
	if https {
		cfg.PublicURL = strings.Replace(srv.URL, "http://", "https://", 1)
	}
	*a = *Assemble(cfg, srv.Keys, srv.Redis, conn, logs.New(slog.LevelInfo))
	return &rig{Server: srv, app: a}
}

// browser is a client with its own cookies that does not follow redirects.
type browser struct {
	t    *testing.T
	rg   *rig
	http *http.Client
	from string // X-Forwarded-For: the client address the server sees ("" for loopback)
	// fetchSite is the Sec-Fetch-Site a browser would send ("": none).
	fetchSite string
	// origin is the Origin a browser would send ("": none).
	origin string
}

func (rg *rig) browser(t *testing.T) *browser {
	jar, _ := cookiejar.New(nil)
	return &browser{t: t, rg: rg, http: &http.Client{Jar: jar, Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

type answer struct {
	Status int
	Header http.Header
	Body   string
}

func (b *browser) do(method, path string, form url.Values) answer {
	b.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, b.rg.URL+path, body)
	if err != nil {
		b.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if b.from != "" {
		req.Header.Set("X-Forwarded-For", b.from)
	}
	if b.fetchSite != "" {
		req.Header.Set("Sec-Fetch-Site", b.fetchSite)
	}
	if b.origin != "" {
		req.Header.Set("Origin", b.origin)
	}
	resp, err := b.http.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, resp.Header, string(out)}
}

func (b *browser) get(path string) answer { return b.do("GET", path, nil) }

// post posts form to path with the CSRF token of the page at from (a GET first).
func (b *browser) post(from, path string, form url.Values) answer {
	b.t.Helper()
	p := b.get(from)
	form.Set("csrf", csrfOf(b.t, p.Body))
	return b.do("POST", path, form)
}

var csrfRE = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

func csrfOf(t *testing.T, html string) string {
	t.Helper()
	m := csrfRE.FindStringSubmatch(html)
	if m == nil {
		t.Fatalf("no CSRF token in the page:\n%s", html)
	}
	return m[1]
}

// member invites email to ws with role and has them set password through the link: a
// signed-in browser.
func (rg *rig) member(t *testing.T, ws workspace.Workspace, email, role string) *browser {
	t.Helper()
	token, _, err := rg.app.Users.Invite(context.Background(), ws.ID, email, role, "test")
	if err != nil {
		t.Fatal(err)
	}
	b := rg.browser(t)
	p := b.post("/app/invite/"+token, "/app/invite/"+token, url.Values{"password": {password}, "confirm": {password}})
	if p.Status != 303 || p.Header.Get("Location") != "/app/api-keys" {
		t.Fatalf("accepting the invite: %d %s", p.Status, p.Body)
	}
	return b
}

func uniqueEmail(name string) string {
	return name + "-" + strings.ReplaceAll(time.Now().Format("150405.000000000"), ".", "") + "@example.com"
}

// password is every test person's.
const password = "correct horse battery"
