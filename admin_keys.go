package main

// The key screens' commands: workspaces, pixels and API keys.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/google/uuid"

	"svc/lib/apikey"
	"svc/lib/httpserver"
	"svc/lib/ids"
	"svc/schema/workspace"
)

// keyCommands create workspaces and pixels, and issue, revoke, rotate, limit and list
// API keys.
var keyCommands = Commands{
	"workspace create": {"--name NAME [--showroom] [--time-zone ZONE]", workspaceCreate},
	"pixel create":     {"--workspace ID [--name NAME] [--time-zone ZONE]", pixelCreate},
	"key create":       {"--workspace ID --env live|sandbox --scopes a,b [--expires RFC3339] [--allow CIDR,...] [--version V] [--burst N] [--daily N]", keyCreate},
	"key revoke":       {"ID", keyRevoke},
	"key rotate":       {"ID --overlap DURATION", keyRotate},
	"key set-limits":   {"ID [--burst N] [--daily N]", keySetLimits},
	"key list":         {"--workspace ID", keyList},
}

func workspaceCreate(ctx context.Context, e *Env, args []string) (any, error) {
	fs := flag.NewFlagSet("workspace create", flag.ContinueOnError)
	name := fs.String("name", "", "workspace name")
	showroom := fs.Bool("showroom", false, "a showroom workspace (demonstration data, sandbox keys)")
	zone := fs.String("time-zone", "", "IANA time zone of the workspace's rollup days (default UTC)")
	if _, err := ParseArgs(fs, args, 0); err != nil {
		return nil, err
	}
	if strings.TrimSpace(*name) == "" {
		return nil, errors.New("--name is required")
	}
	w, err := e.Keys.PutWorkspace(ctx, workspace.Workspace{ID: uuid.New(), Name: strings.TrimSpace(*name), Showroom: *showroom,
		TimeZone: *zone, CreatedAt: time.Now().UTC().Truncate(time.Second)})
	if err != nil {
		return nil, zoneError("--time-zone", err)
	}
	return NewWorkspaceJSON(w), nil
}

func pixelCreate(ctx context.Context, e *Env, args []string) (any, error) {
	fs := flag.NewFlagSet("pixel create", flag.ContinueOnError)
	ws := fs.String("workspace", "", "workspace id (org_… or UUID)")
	name := fs.String("name", "Website pixel", "pixel name")
	zone := fs.String("time-zone", "", "IANA time zone of the pixel's rollup days (default: the workspace's)")
	if _, err := ParseArgs(fs, args, 0); err != nil {
		return nil, err
	}
	w, err := WorkspaceArg(ctx, e.Keys, *ws)
	if err != nil {
		return nil, err
	}
	p, err := e.Keys.PutPixel(ctx, workspace.Pixel{ID: uuid.New(), WorkspaceID: w.ID, Name: *name, TimeZone: *zone})
	if err != nil {
		return nil, zoneError("--time-zone", err)
	}
	return NewPixelJSON(p, w), nil
}

func keyCreate(ctx context.Context, e *Env, args []string) (any, error) {
	fs := flag.NewFlagSet("key create", flag.ContinueOnError)
	ws := fs.String("workspace", "", "workspace id")
	envName := fs.String("env", "", "live or sandbox")
	scopes := fs.String("scopes", "", "comma-separated scopes")
	expires := fs.String("expires", "", "expiry, RFC 3339")
	allow := fs.String("allow", "", "comma-separated addresses or CIDR ranges")
	version := fs.String("version", "", "pinned API version")
	burst := fs.Int("burst", apikey.DefaultBurst, "requests per 60 s")
	daily := fs.Int("daily", apikey.DefaultDaily, "requests per rolling 86,400 s")
	if _, err := ParseArgs(fs, args, 0); err != nil {
		return nil, err
	}
	w, err := WorkspaceArg(ctx, e.Keys, *ws)
	if err != nil {
		return nil, err
	}
	spec := workspace.KeySpec{WorkspaceID: w.ID, Env: *envName, Scopes: splitList(*scopes), Allow: splitList(*allow),
		Version: *version, Burst: *burst, Daily: *daily}
	if *burst < 1 || *daily < 1 {
		return nil, errors.New("--burst and --daily must be at least 1")
	}
	if *expires != "" {
		t, err := time.Parse(time.RFC3339, *expires)
		if err != nil {
			return nil, fmt.Errorf("--expires %q is not an RFC 3339 time such as 2027-01-31T00:00:00Z", *expires)
		}
		t = t.UTC()
		spec.ExpiresAt = &t
	}
	if *version != "" {
		if _, p := httpserver.ResolveVersion("", "", *version); p != nil {
			return nil, errors.New(p.Detail)
		}
	}
	k, secret, err := e.Keys.CreateKey(ctx, spec)
	if err != nil {
		return nil, err
	}
	out := apikey.NewJSON(k, time.Now())
	out.Secret = secret
	return out, nil
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func keyArg(ctx context.Context, e *Env, raw string) (apikey.Key, error) {
	id, err := ids.Parse(ids.Key, raw)
	if err != nil {
		return apikey.Key{}, fmt.Errorf("key id %q: %v", raw, err)
	}
	k, err := e.Keys.Key(ctx, id)
	if errors.Is(err, workspace.ErrNotFound) {
		return apikey.Key{}, fmt.Errorf("no key %s", ids.Format(ids.Key, id))
	}
	return k, err
}

func keyRevoke(ctx context.Context, e *Env, args []string) (any, error) {
	pos, err := ParseArgs(flag.NewFlagSet("key revoke", flag.ContinueOnError), args, 1)
	if err != nil {
		return nil, err
	}
	k, err := keyArg(ctx, e, pos[0])
	if err != nil {
		return nil, err
	}
	k, err = e.Keys.Revoke(ctx, k.ID)
	if err != nil {
		return nil, err
	}
	return apikey.NewJSON(k, time.Now()), nil
}

func keyRotate(ctx context.Context, e *Env, args []string) (any, error) {
	fs := flag.NewFlagSet("key rotate", flag.ContinueOnError)
	overlap := fs.Duration("overlap", 24*time.Hour, "how long the old secret keeps working")
	pos, err := ParseArgs(fs, args, 1)
	if err != nil {
		return nil, err
	}
	k, err := keyArg(ctx, e, pos[0])
	if err != nil {
		return nil, err
	}
	k, secret, cutover, err := e.Keys.Rotate(ctx, k.ID, *overlap)
	if err != nil {
		return nil, err
	}
	out := apikey.NewJSON(k, time.Now())
	out.Secret, out.PreviousCutoverAt = secret, &cutover
	return out, nil
}

func keySetLimits(ctx context.Context, e *Env, args []string) (any, error) {
	fs := flag.NewFlagSet("key set-limits", flag.ContinueOnError)
	burst := fs.Int("burst", 0, "requests per 60 s")
	daily := fs.Int("daily", 0, "requests per rolling 86,400 s")
	pos, err := ParseArgs(fs, args, 1)
	if err != nil {
		return nil, err
	}
	if *burst == 0 && *daily == 0 {
		return nil, errors.New("give --burst, --daily or both")
	}
	if *burst < 0 || *daily < 0 {
		return nil, errors.New("--burst and --daily must be positive")
	}
	k, err := keyArg(ctx, e, pos[0])
	if err != nil {
		return nil, err
	}
	k, err = e.Keys.SetLimits(ctx, k.ID, *burst, *daily)
	if err != nil {
		return nil, err
	}
	return apikey.NewJSON(k, time.Now()), nil
}

func keyList(ctx context.Context, e *Env, args []string) (any, error) {
	fs := flag.NewFlagSet("key list", flag.ContinueOnError)
	ws := fs.String("workspace", "", "workspace id")
	if _, err := ParseArgs(fs, args, 0); err != nil {
		return nil, err
	}
	w, err := WorkspaceArg(ctx, e.Keys, *ws)
	if err != nil {
		return nil, err
	}
	ks, err := e.Keys.Keys(ctx, w.ID)
	if err != nil {
		return nil, err
	}
	sort.Slice(ks, func(i, j int) bool { return ks[i].CreatedAt.Before(ks[j].CreatedAt) })
	now := time.Now()
	out := make([]apikey.JSON, len(ks))
	for i, k := range ks {
		out[i] = apikey.NewJSON(k, now)
	}
	return map[string]any{"data": out}, nil
}
