package main

// `svc admin`, the operator's side of the application's screens: workspaces, pixels and
// API keys (admin_keys.go), the application's users and audit log (admin_users.go), time
// zones, retention, the catalog's imports and the showroom seed, webhook endpoints and
// deliveries (admin_*.go). Every command prints one JSON object on stdout, or exits
// non-zero with a message on stderr. Secrets are printed only on creation and rotation,
// never logged.

import (
	"context"
	"fmt"
	"os"

	json "github.com/goccy/go-json"

	"svc/app"
	"svc/lib/process"
	"svc/lib/settings"
	"svc/schema/workspace"
)

// Builtin are this package's commands: the key screens (workspaces, pixels, keys, their
// time zones, raw-event retention) and the catalog's loading (imports, the showroom
// seed). The webhooks role's live in its package; main.go hands every set to Main.
var Builtin = Merge(timeZoneCommands, retentionCommands, alertCommands, catalogCommands, userCommands, keyCommands)

// runAdmin runs `svc admin <noun> <verb> [flags]`, one of the commands of sets.
func runAdmin(ctx context.Context, args []string, sets ...Commands) error {
	cmds := Merge(sets...)
	name, rest := cmds.split(args)
	cmd, ok := cmds[name]
	if !ok {
		return cmds.usageError(name)
	}
	r := settings.New()
	rc := process.RedisFromEnv(r)
	ac := readAdminApp(r)
	if err := r.Err(); err != nil {
		return err
	}
	if err := app.CheckAuditRetention(ac.Retention); err != nil {
		return err
	}
	rdb, err := process.OpenRedis(ctx, rc)
	if err != nil {
		return err
	}
	defer rdb.Close()
	e := &Env{Keys: workspace.NewStore(rdb), Redis: rdb, Out: os.Stdout, Who: operator(),
		Audit: app.NewAudit(rdb, ac.Retention), PublicURL: ac.PublicURL}
	out, err := cmd.Run(ctx, e, rest)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	enc := json.NewEncoder(e.Out)
	if err := enc.Encode(out); err != nil {
		return err
	}
	if err := auditAdmin(ctx, e, name, rest, out); err != nil {
		return auditFailed(name, err)
	}
	return nil
}
