package main

import (
	"context"
	"errors"
	"flag"
	"fmt"

	"svc/lib/ids"
	"svc/schema/workspace"
)

// timeZoneCommands set reporting time zones: a workspace's (default UTC) and a pixel's
// override. They are key screens (Builtin).
var timeZoneCommands = Commands{
	"workspace set-time-zone": {"ORG ZONE", workspaceSetTimeZone},
	"pixel set-time-zone":     {"PIXEL ZONE|inherit", pixelSetTimeZone},
}

// inheritZone, as a pixel's zone, makes the pixel follow its workspace's zone again.
const inheritZone = "inherit"

func workspaceSetTimeZone(ctx context.Context, e *Env, args []string) (any, error) {
	pos, err := ParseArgs(flag.NewFlagSet("workspace set-time-zone", flag.ContinueOnError), args, 2)
	if err != nil {
		return nil, err
	}
	w, err := WorkspaceArg(ctx, e.Keys, pos[0])
	if err != nil {
		return nil, err
	}
	w, err = e.Keys.SetWorkspaceTimeZone(ctx, w.ID, pos[1])
	if err != nil {
		return nil, zoneError("ZONE", err)
	}
	return NewWorkspaceJSON(w), nil
}

func pixelSetTimeZone(ctx context.Context, e *Env, args []string) (any, error) {
	pos, err := ParseArgs(flag.NewFlagSet("pixel set-time-zone", flag.ContinueOnError), args, 2)
	if err != nil {
		return nil, err
	}
	id, err := ids.Parse(ids.Pixel, pos[0])
	if err != nil {
		return nil, fmt.Errorf("pixel id %q: %v", pos[0], err)
	}
	zone := pos[1]
	if zone == inheritZone {
		zone = ""
	}
	p, err := e.Keys.SetPixelTimeZone(ctx, id, zone)
	if errors.Is(err, workspace.ErrNotFound) {
		return nil, fmt.Errorf("no pixel %s", ids.Format(ids.Pixel, id))
	}
	if err != nil {
		return nil, zoneError("ZONE", err)
	}
	w, err := e.Keys.Workspace(ctx, p.WorkspaceID)
	if err != nil {
		return nil, err
	}
	return NewPixelJSON(p, w), nil
}
