package main

import (
	"context"
	"errors"
	"flag"

	"svc/lib/ids"
	"svc/schema/workspace"
)

// retentionCommands set a workspace's raw-event retention (privacy/README.md). They are
// key screens (Builtin).
var retentionCommands = Commands{
	"workspace set-retention": {Usage: "ORG (--days N | --unlimited)", Run: setRetention},
}

// RetentionJSON is what `svc admin workspace set-retention` prints.
type RetentionJSON struct {
	WorkspaceID           string `json:"workspace_id"`
	WorkspaceIDUUID       string `json:"workspace_id_uuid"`
	RawEventRetentionDays *int   `json:"raw_event_retention_days"` // null: unlimited
}

// setRetention sets a workspace's raw-event retention: raw events of days older than
// N days are removed by the privacy worker (svc webhooks), within its retention
// interval; rollups keep every day.
func setRetention(ctx context.Context, e *Env, args []string) (any, error) {
	fs := flag.NewFlagSet("workspace set-retention", flag.ContinueOnError)
	days := fs.Int("days", 0, "keep raw events this many days (8..36500)")
	unlimited := fs.Bool("unlimited", false, "keep raw events without limit (the default)")
	pos, err := ParseArgs(fs, args, 1)
	if err != nil {
		return nil, err
	}
	switch {
	case *unlimited && *days != 0:
		return nil, errors.New("give --days or --unlimited, not both")
	case !*unlimited:
		if err := workspace.ValidateRetentionDays(*days); err != nil {
			return nil, err
		}
	}
	w, err := WorkspaceArg(ctx, e.Keys, pos[0])
	if err != nil {
		return nil, err
	}
	if err := workspace.NewRetention(e.Redis).Set(ctx, w.ID, *days); err != nil {
		return nil, err
	}
	out := RetentionJSON{WorkspaceID: ids.Format(ids.Org, w.ID), WorkspaceIDUUID: w.ID.String()}
	if *days > 0 {
		out.RawEventRetentionDays = days
	}
	return out, nil
}
