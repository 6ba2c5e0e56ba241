package app

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"svc/lib/ids"
	"svc/schema/workspace"
)

// The workspace screen: an admin sets the retention (the store svc admin uses; bad
// values refused), requests an erasure (listed pending, audited, the address never
// shown), changes a member's role and removes a member (whose session then opens
// nothing); the last admin cannot be demoted or removed; a viewer changes nothing.
func TestWorkspaceScreen(t *testing.T) {
	rg := newRig(t, false)
	ctx := context.Background()
	ws := rg.Workspace(t, false)
	admEmail, bobEmail, eveEmail := uniqueEmail("admin"), uniqueEmail("bob"), uniqueEmail("eve")
	adm := rg.member(t, ws, admEmail, RoleAdmin)
	bob := rg.member(t, ws, bobEmail, RoleViewer)
	eve := rg.member(t, ws, eveEmail, RoleViewer)
	const page = "/app/workspace"
	done := func(a answer, want string) {
		t.Helper()
		if a.Status != 303 || a.Header.Get("Location") != page+"?done="+want {
			t.Fatalf("%s: %d %s", want, a.Status, a.Body)
		}
	}
	// A viewer sees the screen without forms, and every change is refused.
	if p := bob.get(page); p.Status != 200 || strings.Contains(p.Body, `id="retention-form"`) || !strings.Contains(p.Body, "without limit") {
		t.Fatalf("a viewer's page: %d\n%s", p.Status, p.Body)
	}
	for path, form := range map[string]url.Values{
		"/retention": {"days": {"30"}}, "/erasures": {"email": {"x@example.com"}},
		"/members/role": {"email": {bobEmail}, "role": {RoleAdmin}}, "/members/remove": {"email": {eveEmail}, "confirm": {"yes"}},
	} {
		if p := bob.post(page, page+path, form); p.Status != 403 {
			t.Fatalf("a viewer's %s: %d", path, p.Status)
		}
	}
	// Retention.
	done(adm.post(page, page+"/retention", url.Values{"days": {"30"}}), "retention")
	if n, _ := workspace.NewRetention(rg.Redis).Get(ctx, ws.ID); n != 30 {
		t.Fatalf("retention %d", n)
	}
	if p := adm.post(page, page+"/retention", url.Values{"days": {"3"}}); p.Status != 422 {
		t.Fatalf("3 days: %d", p.Status)
	}
	// The bounds: 8 to 36,500 days, or unlimited (0).
	if p := adm.post(page, page+"/retention", url.Values{"days": {"36501"}}); p.Status != 422 {
		t.Fatalf("36,501 days: %d", p.Status)
	}
	for _, c := range []struct {
		form url.Values
		want int
	}{{url.Values{"unlimited": {"yes"}}, 0}, {url.Values{"days": {"36500"}}, 36500}, {url.Values{"days": {"8"}}, 8}} {
		done(adm.post(page, page+"/retention", c.form), "retention")
		if n, _ := workspace.NewRetention(rg.Redis).Get(ctx, ws.ID); n != c.want {
			t.Fatalf("retention after %v: %d, want %d", c.form, n, c.want)
		}
	}
	done(adm.post(page, page+"/retention", url.Values{"days": {"30"}}), "retention")
	if p := adm.get(page); !strings.Contains(p.Body, "<strong>30 days</strong>") {
		t.Fatalf("the page after:\n%s", p.Body)
	}
	// An erasure: listed pending; the address appears nowhere.
	done(adm.post(page, page+"/erasures", url.Values{"email": {"Gone.Person@Example.com"}, "suppress": {"yes"}}), "erasure")
	if p := adm.get(page); !strings.Contains(p.Body, "<td>pending</td>") || strings.Contains(strings.ToLower(p.Body), "gone.person") {
		t.Fatalf("the erasures:\n%s", p.Body)
	}
	if p := adm.post(page, page+"/erasures", url.Values{"email": {"nope"}}); p.Status != 422 {
		t.Fatalf("a bad email: %d", p.Status)
	}
	// Roles: bob becomes admin; the last admin cannot step down or leave.
	done(adm.post(page, page+"/members/role", url.Values{"email": {bobEmail}, "role": {RoleAdmin}}), "role")
	if m, _ := rg.app.Users.Member(ctx, ws.ID, bobEmail); m.Role != RoleAdmin {
		t.Fatalf("bob is %q", m.Role)
	}
	done(adm.post(page, page+"/members/role", url.Values{"email": {bobEmail}, "role": {RoleViewer}}), "role")
	if p := adm.post(page, page+"/members/role", url.Values{"email": {admEmail}, "role": {RoleViewer}}); p.Status != 422 || !strings.Contains(p.Body, "last admin") {
		t.Fatalf("demoting the last admin: %d", p.Status)
	}
	if p := adm.post(page, page+"/members/remove", url.Values{"email": {admEmail}, "confirm": {"yes"}}); p.Status != 422 {
		t.Fatalf("removing the last admin: %d", p.Status)
	}
	if p := adm.post(page, page+"/members/role", url.Values{"email": {bobEmail}, "role": {"owner"}}); p.Status != 422 {
		t.Fatalf("an unknown role: %d", p.Status)
	}
	if p := adm.post(page, page+"/members/role", url.Values{"email": {uniqueEmail("nobody")}, "role": {RoleAdmin}}); p.Status != 404 {
		t.Fatalf("no such member: %d", p.Status)
	}
	// Removal: confirmed only; eve's session then opens nothing.
	if p := adm.post(page, page+"/members/remove", url.Values{"email": {eveEmail}}); p.Status != 422 {
		t.Fatalf("unconfirmed removal: %d", p.Status)
	}
	done(adm.post(page, page+"/members/remove", url.Values{"email": {eveEmail}, "confirm": {"yes"}}), "removed")
	if p := eve.get(page); p.Status != 303 || !strings.HasPrefix(p.Header.Get("Location"), "/app/sign-in") {
		t.Fatalf("a removed member's session: %d %s", p.Status, p.Header.Get("Location"))
	}
	es, err := rg.app.Audit.List(ctx, ws.ID, 50)
	if err != nil {
		t.Fatal(err)
	}
	var log strings.Builder
	for _, e := range es {
		log.WriteString(e.Action + " " + e.Target + " " + e.Detail + "\n")
	}
	for _, want := range []string{"workspace set-retention", "days unlimited→30", "erasure request era_", "user set-role " + bobEmail + " role viewer→admin",
		"user remove " + eveEmail} {
		if !strings.Contains(log.String(), want) {
			t.Fatalf("the audit log lacks %q:\n%s", want, log.String())
		}
	}
	if strings.Contains(strings.ToLower(log.String()), "gone.person") {
		t.Fatal("the audit log holds the erased address")
	}
}

// Without ClickHouse the workspace screen still works but for the erasures: the list
// says it cannot be read, a request is refused (503, nothing recorded), the retention
// still changes; the live view says it cannot read (503).
func TestWorkspaceWithoutClickHouse(t *testing.T) {
	rg := newRig(t, false)
	rg.app.conn = nil
	rg.app.Config.ClickHouse.Addr, rg.app.Config.ClickHouse.DialTimeout = "127.0.0.1:1", 200*time.Millisecond
	ws := rg.Workspace(t, false)
	px := rg.Pixel(t, ws.ID)
	adm := rg.member(t, ws, uniqueEmail("admin"), RoleAdmin)
	const page = "/app/workspace"
	if p := adm.get(page); p.Status != 200 || !strings.Contains(p.Body, "erasure requests cannot be read") {
		t.Fatalf("the page: %d\n%s", p.Status, p.Body)
	}
	if p := adm.post(page, page+"/erasures", url.Values{"email": {"x@example.com"}}); p.Status != 503 || !strings.Contains(p.Body, "nothing was changed") {
		t.Fatalf("an erasure: %d", p.Status)
	}
	if p := adm.post(page, page+"/retention", url.Values{"days": {"30"}}); p.Status != 303 {
		t.Fatalf("retention: %d", p.Status)
	}
	if p := adm.get("/app/pixels/" + ids.Format(ids.Pixel, px.ID) + "/live"); p.Status != 503 || !strings.Contains(p.Body, "cannot be read right now") {
		t.Fatalf("the live view: %d", p.Status)
	}
}
