package app

import (
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// The live view, the pixel's health, the keys' last use and the workspace screen in
// Chromium over `svc dev`: events sent with a key's curl line (one rejected) arrive in
// the open live view with the rejected one's rule and field and no identity value; the
// pixel page shows the day's figures and the rejection; an admin changes the retention,
// a member's role, removes a member and requests an erasure; a viewer can change
// nothing, even posting a form by hand; another workspace's pixel is not found. Every
// page is checked for CSP violations and by axe-core; screenshots from 41 on.
func TestWorkspaceInABrowser(t *testing.T) {
	chromium(t)
	d := startDev(t)
	ws := d.admin(t, "id", "workspace", "create", "--name", "Acme Shop")
	pixel := d.admin(t, "id", "pixel", "create", "--workspace", ws, "--name", "Checkout")
	other := d.admin(t, "id", "workspace", "create", "--name", "Other Co")
	otherPixel := d.admin(t, "id", "pixel", "create", "--workspace", other)
	email := uniqueEmail("ada")
	link := d.admin(t, "sign_in_url", "user", "invite", "--workspace", ws, "--email", email)
	bob, eve, carol := uniqueEmail("bob"), uniqueEmail("eve"), uniqueEmail("carol")

	// Three viewers join through their links in a second browser; carol stays signed in.
	vt := newTab(t, d.url)
	vt.shots = 44
	for _, who := range []string{bob, eve, carol} {
		l := d.admin(t, "sign_in_url", "user", "invite", "--workspace", ws, "--email", who, "--role", "viewer")
		vt.do(chromedp.Navigate(l), chromedp.WaitVisible(chromedp.ID("set-password")),
			chromedp.SendKeys(chromedp.ID("password"), password), chromedp.SendKeys(chromedp.ID("confirm"), password),
			chromedp.Click(chromedp.ID("set-password")), chromedp.WaitVisible(chromedp.ID("keys")))
		if who != carol {
			vt.do(chromedp.Click(chromedp.ID("sign-out")), chromedp.WaitVisible(chromedp.ID("sign-in")))
		}
	}

	tb := newTab(t, d.url)
	tb.shots = 40
	tb.do(chromedp.Navigate(link), chromedp.WaitVisible(chromedp.ID("set-password")),
		chromedp.SendKeys(chromedp.ID("password"), password), chromedp.SendKeys(chromedp.ID("confirm"), password),
		chromedp.Click(chromedp.ID("set-password")), chromedp.WaitVisible(chromedp.ID("keys")),
		chromedp.Click(chromedp.ID("create-key-submit")), chromedp.WaitVisible(chromedp.ID("curl")))
	line := tb.text("#curl")
	bad := strings.Replace(line, `"currency":"EUR"`, `"currency":"EURO"`, 1)
	if bad == line {
		t.Fatalf("no currency to break in %q", line)
	}

	// The live view is open before the events are sent: live.js brings them in.
	live := "/app/pixels/" + pixel + "/live"
	tb.visit(live, "#live")
	if status, out := curl(t, line); status != 202 {
		t.Fatalf("the curl line: %d\n%s", status, out)
	}
	if status, out := curl(t, bad); status != 202 && status != 422 {
		t.Fatalf("the rejected curl line: %d\n%s", status, out)
	}
	rows := waitText(t, tb, "#live tbody", 60*time.Second, func(s string) bool {
		return strings.Contains(s, "email digest present") && strings.Contains(s, "rule iso4217 on ") && strings.Contains(s, "currency")
	})
	if strings.Contains(rows, "ada@example.com") || !strings.Contains(rows, `(received "EURO")`) {
		t.Fatalf("the live rows: %q", rows)
	}
	if reads := run(tb, chromedp.Evaluate[string](`document.getElementById("live").getAttribute("data-reads") || "0"`)); reads == "0" {
		t.Fatal("the rows did not come through live.js")
	}
	tb.noCSPViolation()
	tb.accessible()
	if rate := tb.text("#live-rate"); !strings.Contains(rate, "100 accepted events and 100 rejections every 2 s") {
		t.Fatalf("the stated rate: %q", rate)
	}
	tb.shot("live")

	// The pixel's health: today's received, accepted, rejected by rule; the rejection listed.
	var health string
	deadline := time.Now().Add(60 * time.Second)
	for {
		tb.visit("/app/pixels/"+pixel, "#health")
		health = tb.text("#health tbody tr")
		if strings.Contains(health, "\t2\t1\t1\tiso4217: 1\t0") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the health row: %q", health)
		}
		time.Sleep(time.Second)
	}
	if r := tb.text("#rejections tbody"); !strings.Contains(r, "iso4217") || !strings.Contains(r, "currency") {
		t.Fatalf("the recent rejections: %q", r)
	}
	if last := tb.text("#health-last"); strings.Contains(last, "none") {
		t.Fatalf("last accepted: %q", last)
	}
	tb.shot("pixel-health")
	tb.visit("/app/api-keys", "#keys")
	if used := tb.text("#keys tbody tr td.last-used"); !strings.HasSuffix(used, "UTC") {
		t.Fatalf("the key's last use: %q", used)
	}

	// The workspace: retention 30 days, bob made admin, eve removed, an erasure requested.
	tb.visit("/app/workspace", "#retention-form")
	tb.shot("workspace")
	tb.do(chromedp.Click(chromedp.ID("unlimited")), chromedp.SendKeys(chromedp.ID("days"), "30"),
		chromedp.Click(chromedp.ID("retention-submit")))
	waitDone(tb, "retention")
	if r := tb.text("#retention"); !strings.Contains(r, "30 days") {
		t.Fatalf("retention: %q", r)
	}
	row := func(who string) string { return `#ws-members tr[data-member="` + who + `"]` }
	tb.do(chromedp.SetValue(chromedp.CSS(row(bob)+" select"), "admin"), chromedp.Click(chromedp.CSS(row(bob)+" .role-submit")))
	waitDone(tb, "role")
	if r := tb.text(row(bob) + " td.role"); r != "admin" {
		t.Fatalf("bob's role: %q", r)
	}
	tb.do(chromedp.Click(chromedp.CSS(row(eve)+" .remove-confirm")), chromedp.Click(chromedp.CSS(row(eve)+" .remove-submit")))
	waitDone(tb, "removed")
	if n := run(tb, chromedp.Evaluate[int](`document.querySelectorAll('#ws-members tr[data-member="`+eve+`"]').length`)); n != 0 {
		t.Fatal("eve is still listed")
	}
	tb.do(chromedp.SendKeys(chromedp.ID("erase-email"), "gone@example.com"), chromedp.Click(chromedp.ID("erasure-submit")))
	waitDone(tb, "erasure")
	if e := tb.text("#erasures tbody"); !strings.Contains(e, "pending") || strings.Contains(e, "gone@") {
		t.Fatalf("the erasures: %q", e)
	}
	tb.noCSPViolation()
	tb.accessible()
	tb.shot("workspace-changed")
	tb.visit("/app/audit", "#audit")
	for _, want := range []string{"workspace set-retention", "user set-role", "user remove", "erasure request"} {
		if !strings.Contains(tb.text("#audit tbody"), want) {
			t.Fatalf("the audit log lacks %q", want)
		}
	}

	// Another workspace's pixel is not found, its live view and feed neither.
	for _, path := range []string{"/app/pixels/" + otherPixel + "/live", "/app/pixels/" + otherPixel + "/live/feed?cursor=0~e~r"} {
		tb.visit(path, "p.message")
		if h := tb.text("h1"); h != "Not found" {
			t.Fatalf("%s: %q", path, h)
		}
	}

	// A viewer sees the workspace and the live view without forms, and a form posted by
	// hand is refused.
	vt.visit("/app/workspace", "#ws-members")
	if n := run(vt, chromedp.Evaluate[int](`document.querySelectorAll("#retention-form, #erasure-form, .role-submit, .remove-submit").length`)); n != 0 {
		t.Fatalf("a viewer sees %d forms", n)
	}
	vt.shot("workspace-viewer")
	vt.visit(live, "#live")
	vt.do(chromedp.Evaluate[chromedp.Void](`(function () {
		var f = document.createElement("form"); f.method = "post"; f.action = "/app/workspace/retention";
		var c = document.createElement("input"); c.type = "hidden"; c.name = "csrf";
		c.value = document.querySelector('input[name="csrf"]').value; f.appendChild(c);
		var dd = document.createElement("input"); dd.type = "hidden"; dd.name = "days"; dd.value = "9"; f.appendChild(dd);
		document.body.appendChild(f); f.submit(); })()`), chromedp.WaitVisible(chromedp.CSS("p.message")))
	if h := vt.text("h1"); h != "Not allowed" {
		t.Fatalf("a viewer's retention form: %q", h)
	}
	vt.visit("/app/workspace", "#retention")
	if r := vt.text("#retention"); !strings.Contains(r, "30 days") {
		t.Fatalf("the viewer changed the retention: %q", r)
	}
	if n := tb.dialogs.Load() + vt.dialogs.Load(); n != 0 {
		t.Fatalf("%d dialogs opened", n)
	}
}

// waitText waits until the text of sel satisfies ok (the page refreshes itself) and
// returns it.
func waitText(t *testing.T, tb *tab, sel string, within time.Duration, ok func(string) bool) string {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		s := tb.text(sel)
		if ok(s) {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never showed what was expected: %q", sel, s)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// waitDone waits for the page a workspace form led to (/app/workspace?done=what): the
// page before it may show another notice.
func waitDone(tb *tab, what string) {
	tb.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !strings.HasSuffix(tb.location(), "/app/workspace?done="+what) {
		if time.Now().After(deadline) {
			tb.t.Fatalf("the form did not lead to done=%s (at %s)", what, tb.location())
		}
		time.Sleep(100 * time.Millisecond)
	}
	tb.do(chromedp.WaitVisible(chromedp.ID("notice")))
}
