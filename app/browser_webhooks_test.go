package app

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"svc/lib/svctest"
)

// receiver is a webhook endpoint on this machine: it answers status and records the
// event id (the SVC-Webhook-Id header … or the body) of each delivery.
type receiver struct {
	*httptest.Server
	status atomic.Int32
	mu     sync.Mutex
	bodies []string
}

func newReceiver(t *testing.T, status int) *receiver {
	rc := &receiver{}
	rc.status.Store(int32(status))
	rc.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		rc.mu.Lock()
		rc.bodies = append(rc.bodies, string(b))
		rc.mu.Unlock()
		w.WriteHeader(int(rc.status.Load()))
	}))
	t.Cleanup(rc.Close)
	return rc
}

func (rc *receiver) received() []string {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]string(nil), rc.bodies...)
}

// signUp uses a sign-in link in tb: a new password, then the API keys screen.
func signUp(tb *tab, link string) {
	tb.t.Helper()
	tb.visit(link, "#set-password")
	tb.do(chromedp.SendKeys(chromedp.ID("password"), password), chromedp.SendKeys(chromedp.ID("confirm"), password),
		chromedp.Click(chromedp.ID("set-password")), chromedp.WaitVisible(chromedp.ID("keys")))
}

// waitPage reloads path until the text of sel (which may not be on the page yet)
// contains want, and returns that text. sel names the element that must hold want: a
// wider one could match an id that happens to contain the text.
func waitPage(tb *tab, path, sel, want string, within time.Duration) string {
	tb.t.Helper()
	deadline := time.Now().Add(within)
	for {
		tb.visit(path, "main")
		got := run(tb, chromedp.Evaluate[string](fmt.Sprintf(`(document.querySelector(%q) || {}).textContent || ""`, sel)))
		if strings.Contains(got, want) {
			return got
		}
		if time.Now().After(deadline) {
			tb.t.Fatalf("%s never showed %q in %s:\n%s", path, want, sel, got)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// The Webhooks screens in Chromium over `svc dev` (its webhooks role delivering): an
// endpoint at a cloud-metadata address refused; an endpoint at a receiver on this
// machine (its range allowed by SVC_WEBHOOKS_ALLOW_NETS) created with its secret shown
// once; a key expiring in three days makes a key.expiring event, whose delivery the
// receiver answers 500; the failed attempt shows with its code; the receiver turns to
// 200 and Resend delivers the same event again; the secret rotates; the endpoint is
// disabled; the inbound secret is issued and a refused inbound message shows in the
// log. A viewer sees and cannot change; another workspace's endpoint is 404. Every page
// is checked for CSP violations and by axe-core, and photographed.
func TestWebhooksInABrowser(t *testing.T) {
	chromium(t)
	rc := newReceiver(t, 500)
	d := startDev(t, "SVC_WEBHOOKS_ALLOW_NETS=127.0.0.0/8", "SVC_WEBHOOKS_SCAN_INTERVAL=1s", "SVC_WEBHOOKS_SCHEDULE=0s,1h")
	ws := d.admin(t, "id", "workspace", "create", "--name", "Acme Hooks")
	other := d.admin(t, "id", "workspace", "create", "--name", "Other Hooks")
	otherEndpoint := d.admin(t, "id", "webhook", "endpoint", "create", "--workspace", other, "--url", "https://other.example.com/hooks")
	link := d.admin(t, "sign_in_url", "user", "invite", "--workspace", ws, "--email", uniqueEmail("ada"))
	viewerLink := d.admin(t, "sign_in_url", "user", "invite", "--workspace", ws, "--email", uniqueEmail("vic"), "--role", "viewer")

	tb := newTab(t, d.url)
	tb.shots = 50 // after TestApplicationInABrowser's screenshots
	signUp(tb, link)
	tb.visit("/app/webhooks", "#create-endpoint")
	tb.shot("webhooks-empty")

	// A cloud-metadata address is refused, saying why.
	tb.do(chromedp.SendKeys(chromedp.ID("url"), "http://169.254.169.254/latest/meta-data/"), chromedp.Click(chromedp.ID("create-endpoint-submit")),
		chromedp.WaitVisible(chromedp.ID("form-error")))
	tb.noCSPViolation()
	tb.accessible()
	if e := tb.text("#form-error"); !strings.Contains(e, "address_not_allowed: 169.254.169.254 is cloud metadata") {
		t.Fatalf("the refusal: %q", e)
	}
	tb.shot("webhooks-refused")

	// An endpoint at the receiver: its secret once.
	tb.do(chromedp.SetValue(chromedp.ID("url"), rc.URL+"/hooks/svc"), chromedp.Click(chromedp.ID("create-endpoint-submit")),
		chromedp.WaitVisible(chromedp.ID("secret")))
	tb.noCSPViolation()
	tb.accessible()
	secret := run(tb, chromedp.Value(chromedp.ID("secret")))
	if !strings.HasPrefix(secret, "whsec_") {
		t.Fatalf("secret %q", secret)
	}
	tb.shot("webhook-created")
	tb.do(chromedp.Click(chromedp.ID("endpoint-link")), chromedp.WaitVisible(chromedp.ID("endpoint-facts")))
	endpointPath := strings.TrimPrefix(tb.location(), d.url)

	// A key expiring in three days: the webhooks role's scan emits key.expiring, the
	// receiver answers 500, the attempt shows with its code and the next one scheduled.
	d.admin(t, "id", "key", "create", "--workspace", ws, "--env", "live", "--scopes", "events:write",
		"--expires", time.Now().Add(72*time.Hour).UTC().Format(time.RFC3339))
	row := waitPage(tb, endpointPath, "#deliveries tr[data-attempt='1']", "500", 60*time.Second)
	if !strings.Contains(row, "retry") || !strings.Contains(tb.text("#deliveries h3"), "key.expiring") {
		t.Fatalf("the failed attempt: %q", row)
	}
	tb.shot("webhook-failed")

	// The receiver recovers; Resend delivers the same event (id and body) again.
	rc.status.Store(200)
	tb.submit("button.resend", "#endpoint-facts")
	tb.noCSPViolation()
	if row := waitPage(tb, endpointPath, "#deliveries tr[data-attempt='2']", "delivered", 30*time.Second); !strings.Contains(row, "200") {
		t.Fatalf("the resent attempt: %q", row)
	}
	if got := rc.received(); len(got) != 2 || got[0] != got[1] || !strings.Contains(got[0], `"type":"key.expiring"`) {
		t.Fatalf("the receiver got %d bodies, want the same event twice: %q", len(got), got)
	}
	tb.shot("webhook-resent")

	// Rotate the secret: a new one, shown once.
	tb.do(chromedp.SetValue(chromedp.ID("overlap"), "1h"), chromedp.Click(chromedp.ID("rotate-submit")), chromedp.WaitVisible(chromedp.ID("secret")))
	tb.noCSPViolation()
	tb.accessible()
	if s := run(tb, chromedp.Value(chromedp.ID("secret"))); s == secret || !strings.HasPrefix(s, "whsec_") {
		t.Fatalf("the rotated secret %q", s)
	}
	tb.shot("webhook-rotated")
	tb.visit(endpointPath, "#disable")
	if n := tb.text("#endpoint-secrets"); n != "2 in use" {
		t.Fatalf("secrets during the overlap: %q", n)
	}
	// Disable.
	tb.do(chromedp.Click(chromedp.ID("disable-submit")), chromedp.WaitVisible(chromedp.ID("enable")))
	tb.accessible()
	if st := tb.text("#endpoint-state"); st != "disabled" {
		t.Fatalf("state %q", st)
	}
	tb.shot("webhook-disabled")
	tb.visit("/app/webhooks", "#endpoints")
	tb.shot("webhooks")

	// The inbound secret (shown once) and a refused inbound message in the log.
	tb.visit("/app/webhooks/inbound", "#issue-secret")
	tb.do(chromedp.Click(chromedp.ID("issue-secret-submit")), chromedp.WaitVisible(chromedp.ID("secret")))
	tb.noCSPViolation()
	tb.accessible()
	inSecret := run(tb, chromedp.Value(chromedp.ID("secret")))
	tb.shot("webhooks-inbound-secret")
	receiverURL := d.url + "/v1/webhooks/inbound/" + ws
	resp, err := http.Post(receiverURL, "application/json", strings.NewReader(`{"type":"actuals.reported"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 {
		t.Fatalf("an unsigned inbound message: %d", resp.StatusCode)
	}
	waitPage(tb, "/app/webhooks/inbound", "#inbound-log", "failed", 30*time.Second)
	if page := tb.text("main"); strings.Contains(page, inSecret) || !strings.Contains(page, receiverURL) {
		t.Fatal("the inbound page shows the secret, or not the receiver's URL")
	}
	tb.shot("webhooks-inbound")

	// Another workspace's endpoint is not found.
	tb.visit("/app/webhooks/"+otherEndpoint, "p.message")
	if h := tb.text("h1"); h != "Not found" {
		t.Fatalf("another workspace's endpoint: %q", h)
	}

	// A viewer: the screens without their forms; a change posted anyway is refused.
	tb.do(chromedp.Click(chromedp.ID("sign-out")), chromedp.WaitVisible(chromedp.ID("sign-in")))
	signUp(tb, viewerLink)
	tb.visit(endpointPath, "#deliveries")
	if n := run(tb, chromedp.Evaluate[int](`document.querySelectorAll("#rotate, #enable, #disable, button.resend").length`)); n != 0 {
		t.Fatalf("a viewer sees %d forms", n)
	}
	tb.shot("webhook-viewer")
	tb.do(chromedp.Evaluate[chromedp.Void](`(function () {
		var f = document.createElement("form"); f.method = "post"; f.action = location.pathname + "/enable";
		var i = document.createElement("input"); i.type = "hidden"; i.name = "csrf";
		i.value = document.querySelector('input[name="csrf"]').value; f.appendChild(i);
		document.body.appendChild(f); f.submit(); })()`), chromedp.WaitVisible(chromedp.CSS("p.message")))
	if h := tb.text("h1"); h != "Not allowed" {
		t.Fatalf("a viewer's change: %q", h)
	}
	tb.accessible()
	svctest.WaitFor(t, time.Second, "still disabled", func() bool {
		tb.visit(endpointPath, "#endpoint-state")
		return tb.text("#endpoint-state") == "disabled"
	})
	if n := tb.dialogs.Load(); n != 0 {
		t.Fatalf("%d dialogs opened", n)
	}
}
