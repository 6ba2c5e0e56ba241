package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"svc/app"
	"svc/lib/ids"
	"svc/schema/apitest"
	"svc/schema/workspace"
)

// svc admin user invite prints a one-time sign-in link of the application; every change
// an admin command makes lands in its workspace's audit log (read-only commands do not),
// with a URL's credentials left out.
func TestAdminInviteAndAudit(t *testing.T) {
	rdb := apitest.Redis(t)
	ks := workspace.NewStore(rdb)
	ctx := context.Background()
	w, err := ks.CreateWorkspace(ctx, "audit test", false)
	if err != nil {
		t.Fatal(err)
	}
	org := ids.Format(ids.Org, w.ID)
	e := &Env{Keys: ks, Redis: rdb, Out: &bytes.Buffer{}, Who: "svc admin (test@host)", Audit: app.NewAudit(rdb, time.Hour),
		PublicURL: "https://svc.example.com"}
	args := []string{"--workspace", org, "--email", "Ada@Example.com", "--role", "viewer"}
	out, err := Builtin["user invite"].Run(ctx, e, args)
	if err != nil {
		t.Fatal(err)
	}
	m := out.(map[string]any)
	link, _ := m["sign_in_url"].(string)
	token, ok := strings.CutPrefix(link, "https://svc.example.com/app/invite/")
	if !ok || m["email"] != "ada@example.com" || m["role"] != "viewer" {
		t.Fatalf("printed %v", m)
	}
	if inv, err := app.NewUsers(rdb).PeekInvite(ctx, token); err != nil || inv.Workspace != w.ID || inv.InvitedBy != e.Who {
		t.Fatalf("invite %+v %v", inv, err)
	}
	if _, err := Builtin["user invite"].Run(ctx, e, []string{"--workspace", org, "--email", "x@example.com", "--role", "owner"}); err == nil {
		t.Fatal("an unknown role was accepted")
	}
	if err := auditAdmin(ctx, e, "user invite", args, out); err != nil {
		t.Fatal(err)
	}
	if err := auditAdmin(ctx, e, "key list", []string{"--workspace", org}, map[string]any{}); err != nil {
		t.Fatal(err)
	}
	if err := auditAdmin(ctx, e, "webhook endpoint create", []string{"--workspace", org, "--url=https://user:pw@hooks.example.com/x?token=s3cr3t"},
		map[string]any{"id": "whk_1", "workspace_id": org}); err != nil {
		t.Fatal(err)
	}
	if err := auditAdmin(ctx, e, "workspace set-retention", []string{org, "--days", "30"}, map[string]any{}); err != nil {
		t.Fatal(err)
	}
	es, err := e.Audit.List(ctx, w.ID, 10)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, en := range es {
		got = append(got, en.Action+" "+en.Target+" "+en.Detail)
		if en.Who != e.Who || en.Address != "local" {
			t.Fatalf("entry %+v", en)
		}
	}
	want := []string{"workspace set-retention  " + org + " --days 30",
		"webhook endpoint create whk_1 --workspace " + org + " --url=https://hooks.example.com",
		"user invite ada@example.com " + strings.Join(args, " ")}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("audit log:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// svc admin user set-role and user remove change members through the application's
// store: a viewer made admin, a member removed, the last admin neither demoted nor
// removed, an unknown member refused.
func TestAdminMemberRoleAndRemoval(t *testing.T) {
	rdb := apitest.Redis(t)
	ks := workspace.NewStore(rdb)
	ctx := context.Background()
	w, err := ks.CreateWorkspace(ctx, "members test", false)
	if err != nil {
		t.Fatal(err)
	}
	org := ids.Format(ids.Org, w.ID)
	users := app.NewUsers(rdb)
	for email, role := range map[string]string{"ada@example.com": app.RoleAdmin, "bob@example.com": app.RoleViewer} {
		if _, err := users.Join(ctx, w.ID, email, role, "test"); err != nil {
			t.Fatal(err)
		}
	}
	e := &Env{Keys: ks, Redis: rdb, Out: &bytes.Buffer{}, Who: "svc admin (test@host)"}
	run := func(cmd string, args ...string) (any, error) {
		return Builtin[cmd].Run(ctx, e, append([]string{"--workspace", org}, args...))
	}
	if _, err := run("user set-role", "--email", "Ada@Example.com", "--role", "viewer"); !errors.Is(err, app.ErrLastAdmin) {
		t.Fatalf("demoting the last admin: %v", err)
	}
	if _, err := run("user remove", "--email", "ada@example.com"); !errors.Is(err, app.ErrLastAdmin) {
		t.Fatalf("removing the last admin: %v", err)
	}
	if out, err := run("user set-role", "--email", "bob@example.com", "--role", "admin"); err != nil || out.(map[string]any)["previous_role"] != "viewer" {
		t.Fatalf("bob made admin: %v %v", out, err)
	}
	if _, err := run("user remove", "--email", "ada@example.com"); err != nil {
		t.Fatalf("removing ada once bob is admin: %v", err)
	}
	if _, err := users.Member(ctx, w.ID, "ada@example.com"); !errors.Is(err, app.ErrNotFound) {
		t.Fatalf("ada is still a member: %v", err)
	}
	if wss, _ := users.Workspaces(ctx, "ada@example.com"); len(wss) != 0 {
		t.Fatalf("ada still lists %v", wss)
	}
	if _, err := run("user remove", "--email", "nobody@example.com"); err == nil || strings.Contains(err.Error(), "nobody") {
		t.Fatalf("an unknown member: %v", err)
	}
}

// svc admin refuses an audit-log retention under a day, as the application does: each
// change it writes trims the workspace's log to that retention.
func TestAdminRefusesAShortAuditRetention(t *testing.T) {
	t.Setenv("SVC_APP_AUDIT_RETENTION", "10m")
	err := adminMain(context.Background(), []string{"audit", "list", "--workspace", "ops"})
	if err == nil || !strings.Contains(err.Error(), "SVC_APP_AUDIT_RETENTION") {
		t.Fatalf("svc admin with a 10-minute audit retention: %v", err)
	}
}

// An admin command's --help lists its flags, not "flag: help requested".
func TestAdminHelpListsTheFlags(t *testing.T) {
	fs := flag.NewFlagSet("key create", flag.ContinueOnError)
	fs.Int("burst", 120, "requests per 60 s")
	_, err := ParseArgs(fs, []string{"--help"}, 0)
	if err == nil || !strings.Contains(err.Error(), "-burst") || strings.Contains(err.Error(), "help requested") {
		t.Fatalf("--help: %v", err)
	}
}

// svc admin user forget ends every membership of an account and deletes it, so the
// address can be invited afresh and its owner choose a password; never while the
// account is a workspace's last admin (then nothing changes); each workspace left has it
// in its audit log.
func TestAdminForgetsAnAccount(t *testing.T) {
	rdb := apitest.Redis(t)
	ks := workspace.NewStore(rdb)
	ctx := context.Background()
	users := app.NewUsers(rdb)
	email := "forget-" + uuid.NewString()[:8] + "@example.com"
	var wss []workspace.Workspace
	for i, role := range []string{app.RoleAdmin, app.RoleViewer, app.RoleAdmin} {
		w, err := ks.CreateWorkspace(ctx, "forget test "+strconv.Itoa(i), false)
		if err != nil {
			t.Fatal(err)
		}
		wss = append(wss, w)
		if _, err := users.Join(ctx, w.ID, email, role, "test"); err != nil {
			t.Fatal(err)
		}
		if i < 2 { // the third workspace has no other admin
			if _, err := users.Join(ctx, w.ID, "other-"+email, app.RoleAdmin, "test"); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := users.CreatePerson(ctx, email, "a password an admin chose"); err != nil {
		t.Fatal(err)
	}
	e := &Env{Keys: ks, Redis: rdb, Out: &bytes.Buffer{}, Who: "svc admin (test@host)", Audit: app.NewAudit(rdb, time.Hour)}
	forget := func() (any, error) { return Builtin["user forget"].Run(ctx, e, []string{"--email", email}) }
	if _, err := forget(); !errors.Is(err, app.ErrLastAdmin) {
		t.Fatalf("the last admin of a workspace forgotten: %v", err)
	}
	if left, _ := users.Workspaces(ctx, email); len(left) != 3 {
		t.Fatalf("a refused forget changed the memberships: %v", left)
	}
	if _, err := users.Join(ctx, wss[2].ID, "other-"+email, app.RoleAdmin, "test"); err != nil {
		t.Fatal(err)
	}
	out, err := forget()
	if err != nil || len(out.(map[string]any)["workspaces_left"].([]string)) != 3 {
		t.Fatalf("forget: %v %v", out, err)
	}
	if _, err := users.Person(ctx, email); !errors.Is(err, app.ErrNotFound) {
		t.Fatalf("the account is still there: %v", err)
	}
	for _, w := range wss {
		if _, err := users.Member(ctx, w.ID, email); !errors.Is(err, app.ErrNotFound) {
			t.Fatalf("still a member of %s: %v", w.ID, err)
		}
		es, err := e.Audit.List(ctx, w.ID, 10)
		if err != nil || len(es) == 0 || es[0].Action != "user forget" || es[0].Target != email {
			t.Fatalf("%s's audit log: %+v %v", w.ID, es, err)
		}
	}
	if _, _, err := users.Invite(ctx, wss[0].ID, email, app.RoleViewer, "test"); err != nil {
		t.Fatalf("inviting the address afresh: %v", err)
	}
}
