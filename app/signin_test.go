package app

import (
	"context"
	"log/slog"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"svc/lib/svctest"
)

// The sign-in path: an invite link sets a password and signs in once; the link is then
// refused; the session cookie is HttpOnly and SameSite; every page has the CSP; a form
// without its CSRF token is refused; sign-out ends the session for good; a wrong
// password is refused and attempts are throttled.
func TestInviteSignInSignOut(t *testing.T) {
	rg := newRig(t, false)
	ctx := context.Background()
	ws := rg.Workspace(t, false)
	email := uniqueEmail("ada")
	token, inv, err := rg.app.Users.Invite(ctx, ws.ID, strings.ToUpper(email), RoleAdmin, "test")
	if err != nil || inv.Email != email {
		t.Fatalf("invite %+v %v", inv, err)
	}
	if got, _ := rg.Redis.Keys(ctx, "svc:app:invite:"+token).Result(); len(got) != 0 {
		t.Fatal("the token is stored in clear")
	}
	b := rg.browser(t)
	p := b.get("/app/invite/" + token)
	if p.Status != 200 || !strings.Contains(p.Body, "Set password") || p.Header.Get("Content-Security-Policy") != ContentSecurityPolicy {
		t.Fatalf("invite page %d %v\n%s", p.Status, p.Header, p.Body)
	}
	if ck := strings.Join(p.Header.Values("Set-Cookie"), "\n"); !strings.Contains(ck, "svc_pre=") || !strings.Contains(ck, "HttpOnly") ||
		!strings.Contains(strings.ToLower(ck), "samesite=strict") || strings.Contains(ck, "Secure") {
		t.Fatalf("pre-session cookie: %s", ck)
	}
	// No CSRF token: refused, the link still works.
	if p := b.do("POST", "/app/invite/"+token, url.Values{"password": {password}, "confirm": {password}}); p.Status != 403 {
		t.Fatalf("without the CSRF token: %d", p.Status)
	}
	if p := b.post("/app/invite/"+token, "/app/invite/"+token, url.Values{"password": {"short"}, "confirm": {"short"}}); p.Status != 422 {
		t.Fatalf("a short password: %d", p.Status)
	}
	p = b.post("/app/invite/"+token, "/app/invite/"+token, url.Values{"password": {password}, "confirm": {password}})
	if p.Status != 303 || p.Header.Get("Location") != "/app/api-keys" {
		t.Fatalf("set password: %d %s", p.Status, p.Body)
	}
	ck := strings.Join(p.Header.Values("Set-Cookie"), "\n")
	if !strings.Contains(ck, "svc_session=") || !strings.Contains(ck, "HttpOnly") || !strings.Contains(strings.ToLower(ck), "samesite=lax") {
		t.Fatalf("session cookie: %s", ck)
	}
	if person, _ := rg.app.Users.Person(ctx, email); !strings.HasPrefix(person.Password, "$argon2id$v=19$m=19456,t=2,p=1$") {
		t.Fatalf("stored password %q", person.Password)
	}
	p = b.get("/app/api-keys")
	if p.Status != 200 || !strings.Contains(p.Body, email) || p.Header.Get("Content-Security-Policy") != ContentSecurityPolicy {
		t.Fatalf("keys page %d\n%s", p.Status, p.Body)
	}
	// The link is used up.
	if p := rg.browser(t).get("/app/invite/" + token); p.Status != 410 {
		t.Fatalf("a used link: %d", p.Status)
	}
	// Sign-out without the token is refused; with it, the session is gone for good.
	if p := b.do("POST", "/app/sign-out", url.Values{}); p.Status != 403 {
		t.Fatalf("sign-out without the CSRF token: %d", p.Status)
	}
	u, _ := url.Parse(rg.URL)
	old := b.http.Jar.Cookies(u)
	if p := b.post("/app/api-keys", "/app/sign-out", url.Values{}); p.Status != 303 || p.Header.Get("Location") != "/app/sign-in" {
		t.Fatalf("sign-out: %d", p.Status)
	}
	b.http.Jar.SetCookies(u, old) // a copy of the cookie kept from before
	if p := b.get("/app/api-keys"); p.Status != 303 || !strings.HasPrefix(p.Header.Get("Location"), "/app/sign-in") {
		t.Fatalf("a signed-out session: %d %s", p.Status, p.Header.Get("Location"))
	}
	// Sign in again; a wrong password is refused.
	b = rg.browser(t)
	if p := b.post("/app/sign-in", "/app/sign-in", url.Values{"email": {email}, "password": {"wrong password!"}}); p.Status != 401 {
		t.Fatalf("a wrong password: %d", p.Status)
	}
	p = b.post("/app/sign-in?next=/app/pixels", "/app/sign-in", url.Values{"email": {email}, "password": {password}, "next": {"/app/pixels"}})
	if p.Status != 303 || p.Header.Get("Location") != "/app/pixels" {
		t.Fatalf("sign in: %d %s", p.Status, p.Header.Get("Location"))
	}
	if p := b.get("/app/audit"); !strings.Contains(p.Body, "user accept-invite") || !strings.Contains(p.Body, "user sign-in") {
		t.Fatalf("audit log:\n%s", p.Body)
	}
	// Throttled: past SVC_APP_SIGNIN_ATTEMPTS for this email, even the right password waits.
	b = rg.browser(t)
	for i := 0; i < rg.app.Config.SignInAttempts; i++ {
		b.post("/app/sign-in", "/app/sign-in", url.Values{"email": {email}, "password": {"wrong password!"}})
	}
	if p := b.post("/app/sign-in", "/app/sign-in", url.Values{"email": {email}, "password": {password}}); p.Status != 429 || p.Header.Get("Retry-After") == "" {
		t.Fatalf("past the bound: %d", p.Status)
	}
}

// Behind https the cookies are Secure with the __Host- prefix, and pages ask browsers to
// keep to https (Strict-Transport-Security); over plain http they do not.
func TestCookiesUnderHTTPS(t *testing.T) {
	rg := newRig(t, true)
	p := rg.browser(t).get("/app/sign-in")
	ck := strings.Join(p.Header.Values("Set-Cookie"), "\n")
	if !strings.Contains(ck, "__Host-svc_pre=") || !strings.Contains(ck, "secure") && !strings.Contains(ck, "Secure") || !strings.Contains(ck, "path=/") {
		t.Fatalf("cookie: %s", ck)
	}
	if got := p.Header.Get("Strict-Transport-Security"); got != "max-age=31536000" {
		t.Fatalf("Strict-Transport-Security %q under https", got)
	}
	if got := newRig(t, false).browser(t).get("/app/sign-in").Header.Get("Strict-Transport-Security"); got != "" {
		t.Fatalf("Strict-Transport-Security %q over plain http", got)
	}
}

// Cookies travel without Secure only where SVC_PUBLIC_URL is plain http; the application
// warns at start when that URL is on an address other machines reach.
func TestPlainHTTPOverANetworkIsWarnedOf(t *testing.T) {
	for url, want := range map[string]bool{
		"https://svc.example.com": false, "http://localhost:8080": false, "http://127.0.0.1:8080": false,
		"http://[::1]:8080": false, "http://127.9.9.9": false,
		"http://svc.example.com": true, "http://10.0.0.5:8080": true, "http://0.0.0.0:8080": true, "http://:8080": true,
	} {
		if got := (Config{PublicURL: url}).plainOverNetwork(); got != want {
			t.Errorf("%s: warned %v, want %v", url, got, want)
		}
	}
}

// A sign-in link is single use even when two requests race with it.
func TestInviteIsSingleUse(t *testing.T) {
	rg := newRig(t, false)
	ctx := context.Background()
	ws := rg.Workspace(t, false)
	token, _, err := rg.app.Users.Invite(ctx, ws.ID, uniqueEmail("race"), RoleViewer, "test")
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 8)
	for range 8 {
		go func() { _, err := rg.app.Users.TakeInvite(ctx, token); got <- err }()
	}
	ok := 0
	for range 8 {
		if <-got == nil {
			ok++
		}
	}
	if ok != 1 {
		t.Fatalf("%d takers", ok)
	}
}

// Attempts from one address are bounded whatever the emails (and invite links) tried.
func TestThrottlePerAddress(t *testing.T) {
	rg := newRig(t, false)
	rg.app.Config.AddressAttempts = 5
	b := rg.browser(t)
	b.from = netip.AddrFrom16([16]byte(randomBytes(16))).String()
	for i := range 5 {
		if p := b.post("/app/sign-in", "/app/sign-in", url.Values{"email": {uniqueEmail("x" + itoa(i))}, "password": {"wrong password!"}}); p.Status != 401 {
			t.Fatalf("attempt %d: %d", i, p.Status)
		}
	}
	if p := b.get("/app/invite/" + randomToken()); p.Status != 429 {
		t.Fatalf("an invite link past the bound: %d", p.Status)
	}
	b.from = netip.AddrFrom16([16]byte(randomBytes(16))).String()
	if p := b.get("/app/invite/" + randomToken()); p.Status != 410 {
		t.Fatalf("another address: %d", p.Status)
	}
}

// Concurrent attempts get no more password checks than the bound: each attempt is
// counted before its check, not after it.
func TestThrottleHoldsUnderConcurrentAttempts(t *testing.T) {
	rg := newRig(t, false)
	rg.app.Config.SignInAttempts = 3
	ws := rg.Workspace(t, false)
	email := uniqueEmail("concurrent")
	rg.member(t, ws, email, RoleViewer)
	const n = 20
	type ready struct {
		b    *browser
		form url.Values
	}
	var all []ready
	for range n {
		b := rg.browser(t)
		form := url.Values{"email": {email}, "password": {"wrong password!"}, "csrf": {csrfOf(t, b.get("/app/sign-in").Body)}}
		all = append(all, ready{b, form})
	}
	got := make(chan int, n)
	for _, r := range all {
		go func() { got <- r.b.do("POST", "/app/sign-in", r.form).Status }()
	}
	counts := map[int]int{}
	for range n {
		counts[<-got]++
	}
	if counts[401] != 3 || counts[429] != n-3 {
		t.Fatalf("answers %v: want 3 password checks (401) and %d refused unchecked (429)", counts, n-3)
	}
	// A right password after them waits too; the bound holds for the window.
	b := rg.browser(t)
	if p := b.post("/app/sign-in", "/app/sign-in", url.Values{"email": {email}, "password": {password}}); p.Status != 429 {
		t.Fatalf("the right password past the bound: %d", p.Status)
	}
}

// A success gives its attempt back: people who sign in right never wait.
func TestThrottleSuccessCostsNothing(t *testing.T) {
	rg := newRig(t, false)
	rg.app.Config.SignInAttempts = 2
	ws := rg.Workspace(t, false)
	email := uniqueEmail("right")
	rg.member(t, ws, email, RoleViewer)
	for i := range 5 {
		if p := rg.browser(t).post("/app/sign-in", "/app/sign-in", url.Values{"email": {email}, "password": {password}}); p.Status != 303 {
			t.Fatalf("sign-in %d: %d", i, p.Status)
		}
	}
	if p := rg.browser(t).post("/app/sign-in", "/app/sign-in", url.Values{"email": {email}, "password": {"wrong password!"}}); p.Status != 401 {
		t.Fatalf("a wrong password after five right ones: %d", p.Status)
	}
}

// A page that fails logs its route, never its path: a sign-in link's path holds its
// token, which still works after the failure.
func TestFailedPageLogsNoToken(t *testing.T) {
	rg := newRig(t, false)
	var buf svctest.SyncBuffer
	rg.app.Log = slog.New(slog.NewTextHandler(&buf, nil))
	token, _, err := rg.app.Users.Invite(context.Background(), uuid.New(), uniqueEmail("gone"), RoleViewer, "test")
	if err != nil {
		t.Fatal(err)
	}
	if p := rg.browser(t).get("/app/invite/" + token); p.Status != 500 {
		t.Fatalf("a link to a workspace that does not exist: %d", p.Status)
	}
	if log := buf.String(); !strings.Contains(log, "page failed") || strings.Contains(log, token) {
		t.Fatalf("log: %s", log)
	}
}

// Moving a session into another workspace of the person is written to that workspace's
// audit log (as a sign-in is), not to the one left.
func TestSwitchWorkspaceIsAudited(t *testing.T) {
	rg := newRig(t, false)
	ctx := context.Background()
	a, other := rg.Workspace(t, false), rg.Workspace(t, false)
	email := uniqueEmail("ada")
	b := rg.member(t, a, email, RoleAdmin)
	if _, err := rg.app.Users.Join(ctx, other.ID, email, RoleViewer, "test"); err != nil {
		t.Fatal(err)
	}
	org := "org_" + other.ID.String()
	if p := b.post("/app/api-keys", "/app/workspace", url.Values{"workspace": {org}}); p.Status != 303 {
		t.Fatalf("switch: %d %s", p.Status, p.Body)
	}
	count := func(ws uuid.UUID) int {
		es, err := rg.app.Audit.List(ctx, ws, 100)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, e := range es {
			if e.Action == "user switch-workspace" && e.Who == email && e.Target == email {
				n++
			}
		}
		return n
	}
	if in, left := count(other.ID), count(a.ID); in != 1 || left != 0 {
		t.Fatalf("switch-workspace entries: %d in the workspace entered, %d in the one left; want 1 and 0", in, left)
	}
}

// Every answer carries the security headers (a page, a 404), and a POST the browser marks
// as coming from another origin (same-site or cross-site) is refused even with its form's
// token; same-origin and none pass.
func TestSecurityHeadersAndFetchMetadata(t *testing.T) {
	rg := newRig(t, false)
	b := rg.member(t, rg.Workspace(t, false), uniqueEmail("ada"), RoleAdmin)
	for _, path := range []string{"/app/api-keys", "/app/pixels/pxl_" + uuid.NewString()} {
		p := b.get(path)
		for h, want := range map[string]string{"X-Content-Type-Options": "nosniff", "X-Frame-Options": "DENY",
			"Referrer-Policy": "no-referrer", "Content-Security-Policy": ContentSecurityPolicy, "Cache-Control": "no-store"} {
			if got := p.Header.Get(h); got != want {
				t.Errorf("%s (%d): %s %q, want %q", path, p.Status, h, got, want)
			}
		}
	}
	// The switch to an unknown workspace is a 404 once the form is let through. A POST the
	// browser marks as from another site is refused, and so is one whose Origin is another
	// site's (for browsers without Fetch Metadata); "null" (our pages' own forms, under
	// no-referrer) and our own origin pass.
	for _, c := range []struct {
		site, origin string
		refused      bool
	}{
		{"same-site", "", true}, {"cross-site", "", true}, {"none", "", false}, {"same-origin", "", false},
		{"", "https://evil.example", true}, {"", "http://127.0.0.1.evil.example", true},
		{"", "null", false}, {"", strings.TrimSuffix(rg.URL, "/"), false},
	} {
		b.fetchSite, b.origin = "", ""
		csrf := csrfOf(t, b.get("/app/api-keys").Body)
		b.fetchSite, b.origin = c.site, c.origin
		p := b.do("POST", "/app/workspace", url.Values{"csrf": {csrf}, "workspace": {"org_" + uuid.NewString()}})
		if c.refused && p.Status != 403 || !c.refused && p.Status != 404 {
			t.Errorf("Sec-Fetch-Site %q, Origin %q: %d, want refused %v", c.site, c.origin, p.Status, c.refused)
		}
	}
	b.fetchSite, b.origin = "", ""
	// A body that is not a form is 400, not the token's 403.
	req, _ := http.NewRequest("POST", rg.URL+"/app/workspace", strings.NewReader("csrf=x&workspace=%zz"))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if resp, err := b.http.Do(req); err != nil || resp.StatusCode != 400 {
		t.Fatalf("a malformed form: %v %v, want 400", resp, err)
	}
}

// One address's failures for an email stop that address, not the email's owner
// elsewhere (nobody can lock an account out from one address); failures from many
// addresses together are bounded too, at emailSpread times the bound.
func TestThrottleCannotLockTheOwnerOutFromOneAddress(t *testing.T) {
	rg := newRig(t, false)
	rg.app.Config.SignInAttempts = 3
	ws := rg.Workspace(t, false)
	email := uniqueEmail("owner")
	rg.member(t, ws, email, RoleViewer)
	from := func() string { return netip.AddrFrom16([16]byte(randomBytes(16))).String() }
	signIn := func(addr, pw string) int {
		b := rg.browser(t)
		b.from = addr
		return b.post("/app/sign-in", "/app/sign-in", url.Values{"email": {email}, "password": {pw}}).Status
	}
	attacker := from()
	for i := 0; i < 3; i++ {
		if st := signIn(attacker, "wrong password!"); st != 401 {
			t.Fatalf("failure %d: %d", i+1, st)
		}
	}
	if st := signIn(attacker, password); st != 429 {
		t.Fatalf("the attacker's address past its bound: %d, want 429", st)
	}
	// Retry-After is what is left of the counter's window, not a whole window again.
	time.Sleep(1100 * time.Millisecond)
	late := rg.browser(t)
	late.from = attacker
	p := late.post("/app/sign-in", "/app/sign-in", url.Values{"email": {email}, "password": {password}})
	if ra, _ := strconv.Atoi(p.Header.Get("Retry-After")); p.Status != 429 || ra < 1 || ra >= int(rg.app.Config.ThrottleWindow.Seconds()) {
		t.Fatalf("a second later: %d, Retry-After %q of a %s window", p.Status, p.Header.Get("Retry-After"), rg.app.Config.ThrottleWindow)
	}
	if st := signIn(from(), password); st != 303 {
		t.Fatalf("the owner from another address: %d, want signed in", st)
	}
	for i := 0; i < emailSpread; i++ { // 3 failures from each of 10 addresses
		addr := from()
		for j := 0; j < 3; j++ {
			signIn(addr, "wrong password!")
		}
	}
	if st := signIn(from(), password); st != 429 {
		t.Fatalf("past %d failures from many addresses: %d, want 429", 3*emailSpread, st)
	}
}

// Signing in again in a browser that holds a session ends that session: its cookie, kept
// aside, opens nothing afterwards.
func TestSignInAgainEndsTheSessionBefore(t *testing.T) {
	rg := newRig(t, false)
	ws := rg.Workspace(t, false)
	email := uniqueEmail("again")
	b := rg.member(t, ws, email, RoleViewer)
	u, _ := url.Parse(rg.URL)
	before := b.http.Jar.Cookies(u)
	if p := b.post("/app/sign-in", "/app/sign-in", url.Values{"email": {email}, "password": {password}}); p.Status != 303 {
		t.Fatalf("sign in again: %d", p.Status)
	}
	if p := b.get("/app/api-keys"); p.Status != 200 {
		t.Fatalf("the new session: %d", p.Status)
	}
	old := rg.browser(t)
	old.http.Jar.SetCookies(u, before)
	if p := old.get("/app/api-keys"); p.Status != 303 || !strings.HasPrefix(p.Header.Get("Location"), "/app/sign-in") {
		t.Fatalf("the session before: %d %s, want sent to sign in", p.Status, p.Header.Get("Location"))
	}
}
