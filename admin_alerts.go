package main

import (
	"context"
	"errors"
	"flag"
	"time"

	"svc/lib/ids"
	"svc/schema/workspace"
)

// alertCommands set and show a workspace's pixel alerts (pixel.rejections_rising,
// pixel.silent: webhooks/README.md). They are key screens (Builtin).
var alertCommands = Commands{
	"workspace set-alerts": {Usage: "ORG [--rejections-threshold SHARE] [--rejections-window DURATION] [--rejections-min-events N] [--silent-after DURATION] [--off]",
		Run: setAlerts},
	"workspace alerts": {Usage: "ORG", Run: showAlerts},
}

// AlertsJSON is what `svc admin workspace set-alerts` and `workspace alerts` print: the
// settings in force (defaults filled in; null: that alert is off).
type AlertsJSON struct {
	WorkspaceID         string   `json:"workspace_id"`
	WorkspaceIDUUID     string   `json:"workspace_id_uuid"`
	RejectionsThreshold *float64 `json:"rejections_threshold"`
	RejectionsWindow    string   `json:"rejections_window"`
	RejectionsMinEvents int      `json:"rejections_min_events"`
	SilentAfter         *string  `json:"silent_after"`
}

func alertsJSON(ws workspace.Workspace, a workspace.Alerts) AlertsJSON {
	out := AlertsJSON{WorkspaceID: ids.Format(ids.Org, ws.ID), WorkspaceIDUUID: ws.ID.String(),
		RejectionsWindow: a.Window().String(), RejectionsMinEvents: a.MinEvents()}
	if a.RejectionsThreshold > 0 {
		out.RejectionsThreshold = &a.RejectionsThreshold
	}
	if a.SilentAfter > 0 {
		s := a.SilentAfter.String()
		out.SilentAfter = &s
	}
	return out
}

// setAlerts changes the settings given and keeps the others: --rejections-threshold 0
// turns pixel.rejections_rising off, --silent-after 0 pixel.silent, --off both (and
// forgets the window and minimum).
func setAlerts(ctx context.Context, e *Env, args []string) (any, error) {
	fs := flag.NewFlagSet("workspace set-alerts", flag.ContinueOnError)
	threshold := fs.Float64("rejections-threshold", 0, "share of rejected events over the window that fires pixel.rejections_rising (0 < s ≤ 1; 0: off)")
	window := fs.Duration("rejections-window", 0, "the window, whole minutes (1m..24h; default 15m)")
	minEvents := fs.Int("rejections-min-events", 0, "events (accepted + rejected) the window must hold for its share to count (default 100)")
	silent := fs.Duration("silent-after", 0, "no accepted event for this long fires pixel.silent (whole minutes, 1m..168h; 0: off)")
	off := fs.Bool("off", false, "turn every alert off")
	pos, err := ParseArgs(fs, args, 1)
	if err != nil {
		return nil, err
	}
	w, err := WorkspaceArg(ctx, e.Keys, pos[0])
	if err != nil {
		return nil, err
	}
	store := workspace.NewAlertSettings(e.Redis)
	a, err := store.Get(ctx, w.ID)
	if err != nil {
		return nil, err
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	switch {
	case *off && len(given) > 1:
		return nil, errors.New("give --off alone")
	case *off:
		a = workspace.Alerts{}
	case len(given) == 0:
		return nil, errors.New("give at least one setting, or --off")
	}
	setGiven(&a.RejectionsThreshold, *threshold, given["rejections-threshold"])
	setGiven(&a.RejectionsWindow, *window, given["rejections-window"])
	setGiven(&a.RejectionsMinEvents, *minEvents, given["rejections-min-events"])
	setGiven(&a.SilentAfter, *silent, given["silent-after"])
	if err := store.Set(ctx, w.ID, a); err != nil {
		return nil, err
	}
	return alertsJSON(w, a), nil
}

// setGiven sets *dst to v when given.
func setGiven[T float64 | int | time.Duration](dst *T, v T, given bool) {
	if given {
		*dst = v
	}
}

// showAlerts prints a workspace's alert settings.
func showAlerts(ctx context.Context, e *Env, args []string) (any, error) {
	fs := flag.NewFlagSet("workspace alerts", flag.ContinueOnError)
	pos, err := ParseArgs(fs, args, 1)
	if err != nil {
		return nil, err
	}
	w, err := WorkspaceArg(ctx, e.Keys, pos[0])
	if err != nil {
		return nil, err
	}
	a, err := workspace.NewAlertSettings(e.Redis).Get(ctx, w.ID)
	if err != nil {
		return nil, err
	}
	return alertsJSON(w, a), nil
}
