package app

import (
	"context"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// An admin invites someone from the application: the link is shown once and works; the
// member is listed with their role; a viewer cannot invite.
func TestMembersInvite(t *testing.T) {
	rg := newRig(t, false)
	ws := rg.Workspace(t, false)
	adm := rg.member(t, ws, uniqueEmail("admin"), RoleAdmin)
	email := uniqueEmail("bob")
	p := adm.post("/app/members", "/app/members", url.Values{"email": {email}, "role": {RoleViewer}})
	m := regexp.MustCompile(`id="invite-link" type="text" readonly value="([^"]+)"`).FindStringSubmatch(p.Body)
	if p.Status != 201 || m == nil || !strings.HasPrefix(m[1], rg.URL+"/app/invite/") {
		t.Fatalf("invite: %d\n%s", p.Status, p.Body)
	}
	path := strings.TrimPrefix(m[1], rg.URL)
	bob := rg.browser(t)
	if p := bob.post(path, path, url.Values{"password": {password}, "confirm": {password}}); p.Status != 303 {
		t.Fatalf("bob's link: %d %s", p.Status, p.Body)
	}
	if p := adm.get("/app/members"); !strings.Contains(p.Body, "<td>"+email+"</td><td>viewer</td>") {
		t.Fatalf("members:\n%s", p.Body)
	}
	if p := bob.post("/app/members", "/app/members", url.Values{"email": {uniqueEmail("eve")}, "role": {RoleAdmin}}); p.Status != 403 {
		t.Fatalf("a viewer's invite: %d", p.Status)
	}
	if p := adm.post("/app/members", "/app/members", url.Values{"email": {"not an email"}, "role": {RoleAdmin}}); p.Status != 422 {
		t.Fatalf("a bad email: %d", p.Status)
	}
}

// A sign-in link never changes the role of someone who is a member already: an older
// link of a member made admin since cannot make them a viewer (and leave the workspace
// without an admin, past the last-admin rule and the audited role change). Inviting a
// member is refused.
func TestInviteNeverChangesAMembersRole(t *testing.T) {
	rg := newRig(t, false)
	ctx := context.Background()
	ws := rg.Workspace(t, false)
	adminEmail, email := uniqueEmail("first-admin"), uniqueEmail("bob")
	rg.member(t, ws, adminEmail, RoleAdmin)
	var links []string
	for range 2 {
		token, _, err := rg.app.Users.Invite(ctx, ws.ID, email, RoleViewer, adminEmail)
		if err != nil {
			t.Fatal(err)
		}
		links = append(links, "/app/invite/"+token)
	}
	bob := rg.browser(t)
	if p := bob.post(links[1], links[1], url.Values{"password": {password}, "confirm": {password}}); p.Status != 303 {
		t.Fatalf("bob's second link: %d %s", p.Status, p.Body)
	}
	if _, _, err := rg.app.Users.SetRole(ctx, ws.ID, email, RoleAdmin); err != nil {
		t.Fatal(err)
	}
	if _, err := rg.app.Users.Remove(ctx, ws.ID, adminEmail); err != nil {
		t.Fatal(err)
	}
	if p := rg.browser(t).post(links[0], links[0], url.Values{"password": {password}}); p.Status != 303 {
		t.Fatalf("bob's first link: %d %s", p.Status, p.Body)
	}
	if m, err := rg.app.Users.Member(ctx, ws.ID, email); err != nil || m.Role != RoleAdmin {
		t.Fatalf("bob after his older link: %+v %v, want admin still", m, err)
	}
	if p := bob.post("/app/members", "/app/members", url.Values{"email": {email}, "role": {RoleViewer}}); p.Status != 422 ||
		!strings.Contains(p.Body, "member of this workspace already") {
		t.Fatalf("inviting a member: %d\n%s", p.Status, p.Body)
	}
}

// A change `svc admin` made is signed "svc admin (user@host)" in the log; the
// application's pages show "svc admin", to admins and viewers alike: the operator's
// account and machine are not a workspace's to read (`svc admin audit list` shows them).
func TestOperatorShownWithoutAccountOrHost(t *testing.T) {
	rg := newRig(t, false)
	ctx := context.Background()
	ws := rg.Workspace(t, false)
	const label = "svc admin (opsuser@build-host-7)"
	token, _, err := rg.app.Users.Invite(ctx, ws.ID, uniqueEmail("carol"), RoleViewer, label)
	if err != nil {
		t.Fatal(err)
	}
	carol := rg.browser(t)
	if p := carol.post("/app/invite/"+token, "/app/invite/"+token, url.Values{"password": {password}, "confirm": {password}}); p.Status != 303 {
		t.Fatalf("carol's link: %d %s", p.Status, p.Body)
	}
	if err := rg.app.Audit.Record(ctx, Entry{Workspace: ws.ID, Who: label, Address: "local", Action: "key revoke", Target: "key_x"}); err != nil {
		t.Fatal(err)
	}
	adm := rg.member(t, ws, uniqueEmail("admin"), RoleAdmin)
	for _, b := range []*browser{carol, adm} {
		members, audit := b.get("/app/members"), b.get("/app/audit")
		if !strings.Contains(members.Body, "<td>svc admin</td>") || !strings.Contains(audit.Body, "<td>svc admin</td>") {
			t.Fatalf("the operator is not shown as svc admin:\n%s\n%s", members.Body, audit.Body)
		}
		if strings.Contains(members.Body+audit.Body, "opsuser") || strings.Contains(members.Body+audit.Body, "build-host-7") {
			t.Fatal("a page shows the operator's account or machine")
		}
	}
	if got, err := rg.app.Audit.List(ctx, ws.ID, 10); err != nil || !slices.ContainsFunc(got, func(e Entry) bool { return e.Who == label }) {
		t.Fatalf("the log keeps the operator's full label: %v %v", got, err)
	}
}
