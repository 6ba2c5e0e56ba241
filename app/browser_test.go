package app

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/google/uuid"

	"svc/lib/chpool"
	"svc/lib/svctest"
	"svc/schema/chtest"
)

func TestMain(m *testing.M) { os.Exit(svctest.RunTests(m)) }

// screens is where the browser test saves a screenshot of every screen: .data/screens
// (not committed) unless -screens names another folder (testdata/screens holds the
// copies the README shows).
var screens = flag.String("screens", filepath.Join("..", ".data", "screens"), "folder for the browser test's screenshots")

// chromium is the browser's path: make test installs Debian's chromium
// (deploy/local/services.sh). Without it the test is skipped, or fails under CI=true.
func chromium(t *testing.T) string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("no chromium (CI=true, not skipping): make test installs it through deploy/local/services.sh")
	}
	t.Skip("no chromium: make test installs it through deploy/local/services.sh")
	return ""
}

// dev is `svc dev` (every role, the application among them) on a database of its own.
type dev struct {
	url string
	env []string
}

// startDev starts `svc dev`; extra are more VAR=value settings.
func startDev(t *testing.T, extra ...string) *dev {
	cfg := chtest.Config(t) // a fresh database name; skips without ClickHouse
	addr := svctest.FreeAddr(t)
	d := &dev{url: "http://" + addr}
	d.env = append(os.Environ(), "SVC_HTTP_ADDR="+addr, "SVC_METRICS_ADDR=off", "SVC_EMBEDDED_KAFKA_ADDR="+svctest.FreeAddr(t),
		"SVC_DATA_DIR="+t.TempDir(), "SVC_CLICKHOUSE_DB="+cfg.Database, "SVC_KAFKA_PARTITIONS=2", "SVC_ROLLUP_BATCH_INTERVAL=100ms",
		"SVC_APP_ADDRESS_ATTEMPTS=100000", // every attempt of every run comes from loopback
		svctest.WebhooksEnv(t))
	d.env = append(d.env, extra...)
	svctest.Run(t, d.env, "migrate")
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if conn, err := chpool.Open(ctx, cfg); err == nil {
			chtest.Drop(t, conn, cfg.Database)
		}
	})
	p := svctest.Start(t, d.env, addr, "dev")
	p.WaitReady(t, 90*time.Second)
	t.Cleanup(func() {
		_ = p.Stop(t, 30*time.Second)
		if t.Failed() { // what svc dev said, to tell a slow role from a wrong page
			out := p.Output()
			t.Logf("svc dev's log (its last 8 KiB):\n%s", out[max(0, len(out)-8192):])
		}
	})
	return d
}

// admin runs `svc admin args…` and returns the id-like string member key of what it
// printed.
func (d *dev) admin(t *testing.T, key string, args ...string) string {
	t.Helper()
	m := svctest.RunJSON(t, d.env, append([]string{"admin"}, args...)...)
	s, _ := m[key].(string)
	if s == "" {
		t.Fatalf("svc admin %v printed %v", args, m)
	}
	return s
}

// tab is one browser tab driven by a test.
type tab struct {
	t       *testing.T
	ctx     context.Context
	base    string
	dialogs atomic.Int32 // JavaScript dialogs that opened (alert, confirm, prompt)
	shots   int
}

// cspWatch records the page's Content-Security-Policy violations in window.__csp.
const cspWatch = `window.__csp = []; document.addEventListener("securitypolicyviolation",
  function (e) { window.__csp.push(e.violatedDirective + " " + e.blockedURI); });`

func newTab(t *testing.T, base string) *tab {
	alloc, cancel := chromedp.NewExecAllocator(context.Background(), append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium(t)), chromedp.NoSandbox, chromedp.WindowSize(1280, 900))...)
	t.Cleanup(cancel)
	ctx, cancel := chromedp.NewContext(alloc)
	t.Cleanup(cancel)
	tb := &tab{t: t, ctx: ctx, base: base}
	if _, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: cspWatch}); err != nil {
		t.Fatal(err)
	}
	dialogs := chromedp.Events(ctx, page.JavascriptDialogOpening)
	go func() {
		for ev, err := range dialogs {
			if err != nil {
				return
			}
			tb.dialogs.Add(1)
			t.Logf("a dialog opened: %q", ev.Message)
			_, _ = chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: false})
		}
	}()
	return tb
}

func (tb *tab) do(steps ...chromedp.Action[chromedp.Void]) {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		tb.t.Fatalf("browser: %v (at %s)", err, tb.location())
	}
}

func run[T any](tb *tab, a chromedp.Action[T]) T {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, 30*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		tb.t.Fatalf("browser: %v (at %s)", err, tb.location())
	}
	return v
}

func (tb *tab) location() string {
	ctx, cancel := context.WithTimeout(tb.ctx, 5*time.Second)
	defer cancel()
	loc, _ := chromedp.Run(ctx, chromedp.Location())
	return loc
}

// submit clicks sel (a form's button) and waits until the page it leads to has loaded
// and shows want: a wait for an element the old page has too would return before the
// submission lands, and a navigation then would abort it.
func (tb *tab) submit(sel, want string) {
	tb.t.Helper()
	tb.do(chromedp.Evaluate[chromedp.Void](`window.__before = true`), chromedp.Click(chromedp.CSS(sel)))
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(tb.ctx, 5*time.Second)
		old, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`window.__before === true || document.readyState !== "complete"`))
		cancel()
		if err == nil && !old { // an error: the old page is going away
			break
		}
		if time.Now().After(deadline) {
			tb.t.Fatalf("browser: %s led to no new page (at %s)", sel, tb.location())
		}
		time.Sleep(50 * time.Millisecond)
	}
	tb.do(chromedp.WaitVisible(chromedp.CSS(want)))
}

// visit opens path (or a whole URL) and waits for sel; the page must not have broken its
// CSP.
func (tb *tab) visit(path, sel string) {
	tb.t.Helper()
	if strings.HasPrefix(path, "/") {
		path = tb.base + path
	}
	tb.do(chromedp.Navigate(path), chromedp.WaitVisible(chromedp.CSS(sel)))
	tb.noCSPViolation()
	tb.accessible()
}

// axeSource is axe-core (app/npm, make app-assets), run on every screen the test visits.
var axeSource = func() string {
	b, err := os.ReadFile(filepath.Join("testdata", "axe.min.js"))
	if err != nil {
		panic(err)
	}
	return string(b)
}()

// accessible runs axe-core on the page: no serious or critical violation of WCAG 2.x A/AA.
func (tb *tab) accessible() {
	tb.t.Helper()
	if ok := run(tb, chromedp.Evaluate[bool](axeSource+";typeof axe === 'object'")); !ok {
		tb.t.Fatal("axe-core did not load")
	}
	bad := run(tb, chromedp.Evaluate[[]string](`axe.run(document, {runOnly: {type: "tag", values: ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "best-practice"]}})
		.then(function (r) { return r.violations.filter(function (v) { return v.impact === "serious" || v.impact === "critical"; })
		.map(function (v) { return v.impact + " " + v.id + ": " + v.help + " at " + v.nodes.map(function (n) { return n.target.join(" "); }).join(", "); }); })`,
		chromedp.EvalAwaitPromise))
	if len(bad) > 0 {
		tb.t.Errorf("axe-core at %s:\n%s", tb.location(), strings.Join(bad, "\n"))
	}
}

func (tb *tab) noCSPViolation() {
	tb.t.Helper()
	if v := run(tb, chromedp.Evaluate[[]string](`window.__csp || []`)); len(v) > 0 {
		tb.t.Fatalf("CSP violations at %s: %v", tb.location(), v)
	}
}

func (tb *tab) text(sel string) string {
	tb.t.Helper()
	return run(tb, chromedp.Text(chromedp.CSS(sel)))
}

// shot saves a screenshot of the whole page as NN-name.png.
func (tb *tab) shot(name string) {
	tb.t.Helper()
	tb.shots++
	png := run(tb, chromedp.FullScreenshot(100))
	if err := os.MkdirAll(*screens, 0o755); err != nil {
		tb.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(*screens, fmt.Sprintf("%02d-%s.png", tb.shots, name)), png, 0o644); err != nil {
		tb.t.Fatal(err)
	}
}

// curl runs a curl line the application showed (with a new Idempotency-Key: a new
// request) and returns its status line and body.
func curl(t *testing.T, line string) (int, string) {
	t.Helper()
	line = regexp.MustCompile(`Idempotency-Key: [0-9a-f-]+`).ReplaceAllString(line, "Idempotency-Key: "+uuid.NewString())
	out, err := exec.Command("sh", "-c", line+" -s").CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", line, err, out)
	}
	var status int
	fmt.Sscanf(string(out), "HTTP/1.1 %d", &status)
	return status, string(out)
}

// The application in Chromium over `svc dev`: sign in through a sign-in link and set a
// password, create a key, run its curl line, see the pixel's rollups and chart move,
// rotate and revoke the key (its curl line then gets 401 key_revoked); and the attacks: a
// form without its CSRF token, another workspace's ids, a pixel named like a script, a
// used sign-in link, a signed-out session. No page breaks its CSP or has a serious
// accessibility violation (axe-core); a screenshot of every screen is saved.
func TestApplicationInABrowser(t *testing.T) {
	chromium(t) // skip (or fail under CI) before starting anything
	d := startDev(t)
	ws := d.admin(t, "id", "workspace", "create", "--name", "Acme Shop")
	pixel := d.admin(t, "id", "pixel", "create", "--workspace", ws, "--name", "Checkout")
	other := d.admin(t, "id", "workspace", "create", "--name", "Other Co")
	otherKey := d.admin(t, "id", "key", "create", "--workspace", other, "--env", "live", "--scopes", "events:write")
	otherPixel := d.admin(t, "id", "pixel", "create", "--workspace", other)
	email := uniqueEmail("ada")
	link := d.admin(t, "sign_in_url", "user", "invite", "--workspace", ws, "--email", email)
	if !strings.HasPrefix(link, d.url+"/app/invite/") {
		t.Fatalf("sign-in link %s", link)
	}

	tb := newTab(t, d.url)
	// The sign-in link: set a password, land on the keys.
	tb.visit(link, "#set-password")
	tb.shot("invite")
	tb.do(chromedp.SendKeys(chromedp.ID("password"), password), chromedp.SendKeys(chromedp.ID("confirm"), password),
		chromedp.Click(chromedp.ID("set-password")), chromedp.WaitVisible(chromedp.ID("keys")))
	if loc := tb.location(); loc != d.url+"/app/api-keys" {
		t.Fatalf("after the password: %s", loc)
	}
	tb.shot("api-keys-empty")

	// Create a key: the secret once, a copy button, a curl line that works.
	tb.do(chromedp.Click(chromedp.CSS(`input[name=scope][value="pixels:read"]`)), chromedp.Click(chromedp.ID("create-key-submit")),
		chromedp.WaitVisible(chromedp.ID("secret")))
	tb.noCSPViolation()
	tb.accessible()
	secret := run(tb, chromedp.Value(chromedp.ID("secret")))
	line := tb.text("#curl")
	if !strings.HasPrefix(secret, "svc_live_") || !strings.Contains(line, "Bearer "+secret) || !strings.Contains(line, pixel) {
		t.Fatalf("secret %q, curl line %q", secret, line)
	}
	tb.do(chromedp.Click(chromedp.ID("copy-secret")))
	if got := run(tb, chromedp.Poll[string](`document.getElementById("copy-secret").textContent.trim() !== "Copy secret" &&
		document.getElementById("copy-secret").textContent.trim()`)); got != "Copied" {
		t.Logf("the copy button said %q (the headless clipboard refused)", got)
	}
	tb.shot("key-created")
	if status, out := curl(t, line); status != 202 || !strings.Contains(out, `"accepted":1`) {
		t.Fatalf("the curl line: %d\n%s", status, out)
	}
	tb.visit("/app/api-keys", "#keys")
	if row := tb.text("#keys tbody tr"); !strings.Contains(row, "active") || !strings.Contains(row, "of 120 left") || !strings.Contains(row, "events:write, pixels:read") {
		t.Fatalf("the key's row: %q", row)
	}
	keyID := run(tb, chromedp.AttributeValue(chromedp.CSS("#keys tbody tr"), "data-key")).Value
	tb.shot("api-keys")

	// The pixel's rollups: the event arrives in the table and the chart; a second one
	// moves both.
	waitEvents := func(n string) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for {
			tb.visit("/app/pixels/"+pixel+"?event=purchase", "#rollups")
			if strings.Contains(tb.text("#rollups tbody"), "purchase\tEUR\t"+n+"\t") {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("the table never showed %s events: %q", n, tb.text("#rollups tbody"))
			}
			time.Sleep(500 * time.Millisecond)
		}
	}
	waitEvents("1")
	tb.do(chromedp.WaitVisible(chromedp.CSS(`#chart[data-ready="yes"] canvas`)))
	tb.shot("pixel")
	if status, _ := curl(t, line); status != 202 {
		t.Fatalf("the second curl: %d", status)
	}
	waitEvents("2")
	tb.do(chromedp.WaitVisible(chromedp.CSS(`#chart[data-ready="yes"] canvas`)))
	if chart := run(tb, chromedp.Evaluate[string](`document.getElementById("chart").getAttribute("data-chart")`)); !strings.Contains(chart, `"events":[`) ||
		!strings.Contains(chart, `,2]`) {
		t.Fatalf("the chart's data: %s", chart)
	}
	tb.shot("pixel-moved")

	// A pixel named like a script is text: in the heading, the list, and no dialog opened.
	hostile := `<script>alert(1)</script>`
	tb.visit("/app/pixels", "#create-pixel")
	tb.do(chromedp.SendKeys(chromedp.ID("name"), hostile), chromedp.Click(chromedp.ID("create-pixel-submit")),
		chromedp.WaitVisible(chromedp.ID("pixel-name")))
	tb.noCSPViolation()
	if h := tb.text("#pixel-name"); h != hostile {
		t.Fatalf("the heading reads %q", h)
	}
	tb.visit("/app/pixels", "#pixels")
	if names := tb.text("#pixels tbody"); !strings.Contains(names, hostile) {
		t.Fatalf("the list reads %q", names)
	}
	if n := run(tb, chromedp.Evaluate[int](`document.querySelectorAll("script:not([src])").length`)); n != 0 {
		t.Fatalf("%d inline scripts in the page", n)
	}
	tb.shot("pixels")

	// Rotate with an overlap: a new secret; the old one keeps working until the cutover.
	tb.visit("/app/api-keys/"+keyID, "#rotate")
	tb.shot("key")
	tb.do(chromedp.SetValue(chromedp.ID("overlap"), "1h"), chromedp.Click(chromedp.ID("rotate-submit")), chromedp.WaitVisible(chromedp.ID("secret")))
	tb.accessible()
	rotated := tb.text("#curl")
	if strings.Contains(rotated, secret) {
		t.Fatal("the rotation showed the old secret")
	}
	tb.shot("key-rotated")
	for _, l := range []string{line, rotated} {
		if status, out := curl(t, l); status != 202 {
			t.Fatalf("during the overlap: %d\n%s", status, out)
		}
	}
	// Revoke: the key's curl lines get 401 key_revoked within a second.
	tb.visit("/app/api-keys/"+keyID, "#revoke")
	tb.do(chromedp.Click(chromedp.ID("revoke-confirm")), chromedp.Click(chromedp.ID("revoke-submit")),
		chromedp.WaitNotPresent(chromedp.ID("revoke")))
	tb.accessible()
	if st := tb.text("#key-state"); st != "revoked" {
		t.Fatalf("state %q", st)
	}
	tb.shot("key-revoked")
	svctest.WaitFor(t, 5*time.Second, "key_revoked", func() bool {
		status, out := curl(t, rotated)
		return status == 401 && strings.Contains(out, `"code":"key_revoked"`)
	})

	// A form without its CSRF token is refused, and changes nothing.
	tb.visit("/app/api-keys", "#create-key")
	tb.do(chromedp.Evaluate[chromedp.Void](`document.querySelector('#create-key input[name="csrf"]').remove()`),
		chromedp.Click(chromedp.ID("create-key-submit")), chromedp.WaitVisible(chromedp.CSS("p.message")))
	if h := tb.text("h1"); h != "Form refused" {
		t.Fatalf("without the CSRF token: %q", h)
	}
	tb.accessible()
	tb.shot("csrf-refused")
	if keys := svctest.RunJSON(t, d.env, "admin", "key", "list", "--workspace", ws)["data"].([]any); len(keys) != 1 {
		t.Fatalf("%d keys", len(keys))
	}
	// Another workspace's key and pixel are not found.
	for _, path := range []string{"/app/api-keys/" + otherKey, "/app/pixels/" + otherPixel} {
		tb.visit(path, "p.message")
		if h := tb.text("h1"); h != "Not found" {
			t.Fatalf("%s: %q", path, h)
		}
	}
	tb.shot("not-found")
	// The used sign-in link is refused.
	tb.visit(link, "p.message")
	if h := tb.text("h1"); h != "Sign-in link not valid" {
		t.Fatalf("a used link: %q", h)
	}
	tb.shot("link-used")
	// The audit log has the application's changes and svc admin's.
	tb.visit("/app/audit", "#audit")
	log := tb.text("#audit tbody")
	for _, want := range []string{"key create", "key rotate", "key revoke", "pixel create", "user accept-invite", "svc admin", "user invite"} {
		if !strings.Contains(log, want) {
			t.Fatalf("the audit log lacks %q:\n%s", want, log)
		}
	}
	tb.shot("audit")
	// Members: an admin makes a sign-in link for someone else.
	tb.visit("/app/members", "#invite")
	tb.do(chromedp.SendKeys(chromedp.ID("email"), uniqueEmail("bob")), chromedp.Click(chromedp.ID("invite-submit")),
		chromedp.WaitVisible(chromedp.ID("invite-link")))
	tb.noCSPViolation()
	tb.accessible()
	if l := run(tb, chromedp.Value(chromedp.ID("invite-link"))); !strings.HasPrefix(l, d.url+"/app/invite/") {
		t.Fatalf("the members screen's link: %q", l)
	}
	tb.shot("members")
	// On a phone's screen: every screen fits its width (wide tables scroll in their own
	// box, the page does not).
	tb.do(chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2)))
	for _, p := range []struct{ path, sel string }{{"/app/api-keys", "#keys"}, {"/app/pixels", "main"},
		{"/app/members", "main"}, {"/app/audit", "main"}, {"/app/webhooks", "main"}, {"/app/workspace", "main"}} {
		tb.visit(p.path, p.sel)
		if w := run(tb, chromedp.Evaluate[int](`document.documentElement.scrollWidth - window.innerWidth`)); w > 0 {
			wide := run(tb, chromedp.Evaluate[[]string](`[...document.querySelectorAll("body *")].filter(e => e.getBoundingClientRect().right > window.innerWidth + 1 && !(e.closest(".scroll") && getComputedStyle(e).position === "static")).slice(0, 8).map(e => e.tagName + "#" + e.id + "." + e.className)`))
			t.Fatalf("%s on a 390-pixel screen is %d pixels too wide: %v", p.path, w, wide)
		}
	}
	tb.visit("/app/api-keys", "#keys")
	tb.shot("api-keys-phone")
	tb.do(chromedp.EmulateViewport(1280, 900))
	keyboardCreatesAKey(tb)

	// Sign out: a copy of the session cookie opens nothing any more.
	cookies, err := chromedp.Call(tb.ctx, network.GetCookies, network.GetCookiesParams{URLs: []string{d.url}})
	if err != nil {
		t.Fatal(err)
	}
	var session *network.Cookie
	for _, c := range cookies.Cookies {
		if c.Name == "svc_session" {
			session = c
		}
	}
	if session == nil || !session.HTTPOnly || session.SameSite != network.CookieSameSiteLax {
		t.Fatalf("session cookie %+v", session)
	}
	tb.do(chromedp.Click(chromedp.ID("sign-out")), chromedp.WaitVisible(chromedp.ID("sign-in")))
	tb.shot("sign-in")
	httpOnly := true
	if _, err := chromedp.Call(tb.ctx, network.SetCookie, network.SetCookieParams{Name: session.Name, Value: session.Value, URL: d.url,
		HTTPOnly: &httpOnly, SameSite: network.CookieSameSiteLax}); err != nil {
		t.Fatal(err)
	}
	tb.visit("/app/api-keys", "#sign-in")
	if loc := tb.location(); !strings.HasPrefix(loc, d.url+"/app/sign-in") {
		t.Fatalf("a signed-out session reached %s", loc)
	}
	// Sign in again with the password.
	tb.do(chromedp.SendKeys(chromedp.ID("email"), email), chromedp.SendKeys(chromedp.ID("password"), password),
		chromedp.Click(chromedp.ID("sign-in")), chromedp.WaitVisible(chromedp.ID("keys")))
	if n := tb.dialogs.Load(); n != 0 {
		t.Fatalf("%d dialogs opened", n)
	}
}

// keyboardCreatesAKey creates a key from the keyboard: Tab from the top of the API keys
// screen reaches the skip link first, then, in order, a scope's checkbox (Space toggles
// it) and the create button, where Enter submits the form; the new secret shows.
func keyboardCreatesAKey(tb *tab) {
	tb.t.Helper()
	tb.visit("/app/api-keys", "#keys")
	focused := func() string {
		return run(tb, chromedp.Evaluate[string](`(document.activeElement.id || "") + "|" + (document.activeElement.className || "") + "|" + (document.activeElement.value || "")`))
	}
	tb.do(chromedp.KeyEvent(kb.Tab))
	if f := focused(); !strings.Contains(f, "skip") {
		tb.t.Fatalf("the first Tab focuses %q, want the skip link", f)
	}
	tabTo := func(want string) {
		for range 80 {
			tb.do(chromedp.KeyEvent(kb.Tab))
			if strings.Contains(focused(), want) {
				return
			}
		}
		tb.t.Fatalf("Tab never reaches %q", want)
	}
	tabTo("events:write")
	isChecked := func() bool { return run(tb, chromedp.Evaluate[bool](`document.activeElement.checked`)) }
	before := isChecked()
	tb.do(chromedp.KeyEvent(" "))
	if isChecked() == before {
		tb.t.Fatal("Space does not toggle the focused scope's checkbox")
	}
	if before { // it was ticked (the form's default): tick it again
		tb.do(chromedp.KeyEvent(" "))
	}
	tabTo("create-key-submit")
	tb.do(chromedp.KeyEvent(kb.Enter), chromedp.WaitVisible(chromedp.ID("secret")))
	if s := run(tb, chromedp.Value(chromedp.ID("secret"))); !strings.HasPrefix(s, "svc_live_") {
		tb.t.Fatalf("the key created with the keyboard: secret %q", s)
	}
}
