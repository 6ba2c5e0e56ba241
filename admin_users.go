package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"net/url"
	"os"
	"os/user"
	"strings"
	"time"

	json "github.com/goccy/go-json"
	"github.com/google/uuid"

	"svc/app"
	"svc/lib/ids"
	"svc/lib/settings"
)

// The application's people (svc admin user …) and the audit log every change of svc
// admin is written to, the log the application writes too (app.Audit).
var userCommands = Commands{
	"user invite":   {"--workspace ID --email EMAIL [--role admin|viewer] (prints a one-time sign-in link, valid 24 h)", userInvite},
	"user set-role": {"--workspace ID --email EMAIL --role admin|viewer (never the workspace's last admin to viewer)", userSetRole},
	"user remove":   {"--workspace ID --email EMAIL (ends the membership; never the workspace's last admin)", userRemove},
	"user forget":   {"--email EMAIL (ends every membership and deletes the account, so the address's owner can be invited afresh; never a workspace's last admin)", userForget},
	"audit list":    {"--workspace ID [--limit N] (newest first; --workspace ops: changes of no workspace)", auditList},
}

// readOnly are the commands that change nothing: they are not written to the audit log.
var readOnly = map[string]bool{"key list": true, "audit list": true, "webhook inbound-log": true,
	"webhook endpoint list": true, "webhook deliveries": true, "workspace alerts": true}

// adminApp is what svc admin reads of the application's settings: the base URL of
// sign-in links and the audit log's retention.
type adminApp struct {
	PublicURL string
	Retention time.Duration
}

func readAdminApp(r *settings.Reader) adminApp {
	return adminApp{PublicURL: strings.TrimRight(cmp.Or(r.String("SVC_PUBLIC_URL"), "http://"+r.String("SVC_HTTP_ADDR")), "/"),
		Retention: r.Duration("SVC_APP_AUDIT_RETENTION")}
}

// operator names the person running svc admin in the audit log.
func operator() string {
	name := "unknown"
	if u, err := user.Current(); err == nil {
		name = u.Username
	}
	host, _ := os.Hostname()
	return app.OperatorPrefix + name + "@" + host + ")"
}

func userInvite(ctx context.Context, e *Env, args []string) (any, error) {
	fs := flag.NewFlagSet("user invite", flag.ContinueOnError)
	ws := fs.String("workspace", "", "workspace id (org_… or UUID)")
	email := fs.String("email", "", "the person's email")
	role := fs.String("role", app.RoleAdmin, "admin or viewer")
	if _, err := ParseArgs(fs, args, 0); err != nil {
		return nil, err
	}
	w, err := WorkspaceArg(ctx, e.Keys, *ws)
	if err != nil {
		return nil, err
	}
	token, inv, err := app.NewUsers(e.Redis).Invite(ctx, w.ID, *email, *role, e.Who)
	if err != nil {
		return nil, err
	}
	return map[string]any{"workspace_id": ids.Format(ids.Org, w.ID), "email": inv.Email, "role": inv.Role,
		"expires_at": inv.ExpiresAt, "sign_in_url": e.PublicURL + "/app/invite/" + token}, nil
}

func auditList(ctx context.Context, e *Env, args []string) (any, error) {
	fs := flag.NewFlagSet("audit list", flag.ContinueOnError)
	ws := fs.String("workspace", "", "workspace id, or ops")
	limit := fs.Int64("limit", 100, "entries")
	if _, err := ParseArgs(fs, args, 0); err != nil {
		return nil, err
	}
	id := uuid.Nil
	if *ws != "ops" {
		w, err := WorkspaceArg(ctx, e.Keys, *ws)
		if err != nil {
			return nil, err
		}
		id = w.ID
	}
	es, err := e.Audit.List(ctx, id, max(*limit, 1))
	if err != nil {
		return nil, err
	}
	out := make([]map[string]any, len(es))
	for i, en := range es {
		out[i] = map[string]any{"time": en.Time, "who": en.Who, "address": en.Address, "action": en.Action,
			"target": en.Target, "detail": en.Detail}
	}
	return map[string]any{"data": out}, nil
}

// auditArgs is what the audit log keeps of a command's arguments: a URL (a webhook
// receiver's) as its scheme and host only, as the application records it, since its user
// info, path or query may carry the receiver's credentials or token.
func auditArgs(args []string) string {
	out := make([]string, len(args))
	for i, a := range args {
		prefix, raw := "", a
		if k, v, ok := strings.Cut(a, "="); ok && strings.HasPrefix(k, "-") {
			prefix, raw = k+"=", v
		}
		if strings.Contains(raw, "://") {
			u, err := url.Parse(raw)
			raw = "…"
			if err == nil && u.Host != "" {
				raw = u.Scheme + "://" + u.Host
			}
		}
		out[i] = prefix + raw
	}
	return strings.Join(out, " ")
}

// auditAdmin writes a change command name made with args, which printed out, to the
// audit log of the workspace it concerns (the "workspace_id" it printed, else its
// --workspace, else the operator's log).
func auditAdmin(ctx context.Context, e *Env, name string, args []string, out any) error {
	if readOnly[name] {
		return nil
	}
	var printed map[string]any
	b, _ := json.Marshal(out)
	_ = json.Unmarshal(b, &printed)
	str := func(k string) string { s, _ := printed[k].(string); return s }
	candidates := []string{str("workspace_id"), flagValue(args, "workspace")}
	if strings.HasPrefix(name, "workspace ") { // its id is the workspace's, or its first argument
		candidates = append(candidates, str("id"), strings.Join(args[:min(len(args), 1)], ""))
	}
	ws := uuid.Nil
	for _, raw := range candidates {
		if id, err := ids.Parse(ids.Org, raw); err == nil {
			ws = id
			break
		}
	}
	return e.Audit.Record(ctx, app.Entry{Workspace: ws, Who: e.Who, Address: "local", Action: name,
		Target: cmp.Or(str("id"), str("email")), Detail: auditArgs(args)})
}

// flagValue is the value of --name (or -name) in args, "" without one.
func flagValue(args []string, name string) string {
	for i, a := range args {
		a = strings.TrimLeft(a, "-")
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v
		}
		if a == name && i+1 < len(args) {
			return args[i+1]
		}
	}
	return ""
}

// auditFailed is the error of a change made but not written to the audit log.
func auditFailed(name string, err error) error {
	return fmt.Errorf("%s: done, but not written to the audit log: %w", name, err)
}

// memberArgs reads --workspace and --email (and --role when role is not nil).
func memberArgs(ctx context.Context, e *Env, name string, args []string, role *string) (uuid.UUID, string, error) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	ws := fs.String("workspace", "", "workspace id (org_… or UUID)")
	email := fs.String("email", "", "the member's email")
	if role != nil {
		fs.StringVar(role, "role", "", "admin or viewer")
	}
	if _, err := ParseArgs(fs, args, 0); err != nil {
		return uuid.Nil, "", err
	}
	w, err := WorkspaceArg(ctx, e.Keys, *ws)
	if err != nil {
		return uuid.Nil, "", err
	}
	addr, err := app.NormalEmail(*email)
	return w.ID, addr, err
}

// userSetRole changes a member's role through the application's store (app.Users.SetRole).
func userSetRole(ctx context.Context, e *Env, args []string) (any, error) {
	var role string
	ws, email, err := memberArgs(ctx, e, "user set-role", args, &role)
	if err != nil {
		return nil, err
	}
	before, after, err := app.NewUsers(e.Redis).SetRole(ctx, ws, email, role)
	if err != nil {
		return nil, memberErr(err)
	}
	return map[string]any{"workspace_id": ids.Format(ids.Org, ws), "email": email, "role": after.Role, "previous_role": before.Role}, nil
}

// userRemove ends a membership through the application's store (app.Users.Remove).
func userRemove(ctx context.Context, e *Env, args []string) (any, error) {
	ws, email, err := memberArgs(ctx, e, "user remove", args, nil)
	if err != nil {
		return nil, err
	}
	m, err := app.NewUsers(e.Redis).Remove(ctx, ws, email)
	if err != nil {
		return nil, memberErr(err)
	}
	return map[string]any{"workspace_id": ids.Format(ids.Org, ws), "email": email, "removed": true, "role": m.Role}, nil
}

// userForget deletes an account and its memberships (app.Users.Forget), writing the
// change to the audit log of every workspace it left (runAdmin writes the operator's).
func userForget(ctx context.Context, e *Env, args []string) (any, error) {
	fs := flag.NewFlagSet("user forget", flag.ContinueOnError)
	rawEmail := fs.String("email", "", "the account's email")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	email, err := app.NormalEmail(*rawEmail)
	if err != nil {
		return nil, errors.New("--email: an email address")
	}
	left, err := app.NewUsers(e.Redis).Forget(ctx, email)
	var orgs []string
	for _, ws := range left {
		orgs = append(orgs, ids.Format(ids.Org, ws))
		if aerr := e.Audit.Record(ctx, app.Entry{Workspace: ws, Who: e.Who, Address: "local", Action: "user forget", Target: email}); aerr != nil {
			return nil, auditFailed("user forget", aerr)
		}
	}
	if err != nil {
		return nil, err
	}
	return map[string]any{"email": email, "forgotten": true, "workspaces_left": orgs}, nil
}

func memberErr(err error) error {
	if errors.Is(err, app.ErrNotFound) {
		return errors.New("no member of the workspace has this email")
	}
	return err
}
