package app

import (
	"net/url"
	"regexp"
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
