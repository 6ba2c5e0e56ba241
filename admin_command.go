package main

// The admin commands' common ground: a command, what commands share (Env), their
// arguments (ParseArgs, WorkspaceArg) and the JSON they print of a workspace or a
// pixel. Every admin_*.go builds on it; admin.go runs them.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"svc/app"
	"svc/lib/ids"
	"svc/schema"
	"svc/schema/workspace"
)

// Command is one admin command: "<noun> <verb>" → Run.
type Command struct {
	Usage string
	Run   func(ctx context.Context, e *Env, args []string) (any, error)
}

// Env is what commands share: the key store, where output goes, who runs them, the
// audit log and the base URL of sign-in links.
type Env struct {
	Keys      *workspace.Store
	Redis     redis.UniversalClient
	Out       io.Writer
	Who       string     // the operator, as the audit log names them
	Audit     *app.Audit // every change is written to it (runAdmin)
	PublicURL string     // SVC_PUBLIC_URL
}

// Commands maps "noun verb" to a command.
type Commands map[string]Command

// Merge returns the union of sets; it panics on a name in two of them (a programming
// error).
func Merge(sets ...Commands) Commands {
	all := Commands{}
	for _, set := range sets {
		for name, c := range set {
			if _, dup := all[name]; dup {
				panic("admin: duplicate command " + name)
			}
			all[name] = c
		}
	}
	return all
}

func (Commands Commands) split(args []string) (string, []string) {
	if len(args) >= 2 && !strings.HasPrefix(args[1], "-") {
		if _, ok := Commands[args[0]+" "+args[1]]; ok {
			return args[0] + " " + args[1], args[2:]
		}
		// Three-word commands ("seed showroom", "webhook endpoint create").
		if len(args) >= 3 {
			if _, ok := Commands[args[0]+" "+args[1]+" "+args[2]]; ok {
				return args[0] + " " + args[1] + " " + args[2], args[3:]
			}
		}
	}
	if len(args) >= 1 {
		if _, ok := Commands[args[0]]; ok {
			return args[0], args[1:]
		}
	}
	return strings.Join(args[:min(len(args), 2)], " "), nil
}

func (Commands Commands) usageError(name string) error {
	names := make([]string, 0, len(Commands))
	for n := range Commands {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	if name != "" {
		fmt.Fprintf(&b, "unknown admin command %q\n", name)
	}
	b.WriteString("usage:\n")
	for _, n := range names {
		fmt.Fprintf(&b, "  svc admin %s %s\n", n, Commands[n].Usage)
	}
	return errors.New(strings.TrimRight(b.String(), "\n"))
}

// ParseArgs parses args with fs and returns exactly positional leading (or trailing)
// arguments ("ID --flag v" and "--flag v ID" both work); anything else is an error.
func ParseArgs(fs *flag.FlagSet, args []string, positional int) ([]string, error) {
	fs.SetOutput(io.Discard)
	// Allow the positional argument first: "ID --flag v".
	var pos []string
	for len(args) > 0 && !strings.HasPrefix(args[0], "-") && len(pos) < positional {
		pos, args = append(pos, args[0]), args[1:]
	}
	if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
		var b strings.Builder // the flags, instead of "flag: help requested"
		fs.SetOutput(&b)
		fs.PrintDefaults()
		return nil, fmt.Errorf("%s takes:\n%s", fs.Name(), b.String())
	} else if err != nil {
		return nil, err
	}
	pos = append(pos, fs.Args()...)
	if len(pos) != positional {
		return nil, fmt.Errorf("want %d argument(s), got %d", positional, len(pos))
	}
	return pos, nil
}

// WorkspaceArg resolves a --workspace value (org_… or UUID) to an existing workspace.
func WorkspaceArg(ctx context.Context, ks *workspace.Store, raw string) (workspace.Workspace, error) {
	if raw == "" {
		return workspace.Workspace{}, errors.New("--workspace is required")
	}
	id, err := ids.Parse(ids.Org, raw)
	if err != nil {
		return workspace.Workspace{}, fmt.Errorf("--workspace %q: %v", raw, err)
	}
	w, err := ks.Workspace(ctx, id)
	if errors.Is(err, workspace.ErrNotFound) {
		return workspace.Workspace{}, fmt.Errorf("no workspace %s", ids.Format(ids.Org, id))
	}
	return w, err
}

// WorkspaceJSON is a workspace as printed.
type WorkspaceJSON struct {
	ID        string    `json:"id"`
	IDUUID    string    `json:"id_uuid"`
	Name      string    `json:"name"`
	Showroom  bool      `json:"showroom"`
	TimeZone  string    `json:"time_zone"` // the zone of its rollups' days
	CreatedAt time.Time `json:"created_at"`
}

// NewWorkspaceJSON formats w.
func NewWorkspaceJSON(w workspace.Workspace) WorkspaceJSON {
	return WorkspaceJSON{ids.Format(ids.Org, w.ID), w.ID.String(), w.Name, w.Showroom,
		workspace.EffectiveZone(w, "").Name, w.CreatedAt}
}

// PixelJSON is a pixel as printed.
type PixelJSON struct {
	ID              string `json:"id"`
	IDUUID          string `json:"id_uuid"`
	WorkspaceID     string `json:"workspace_id"`
	WorkspaceIDUUID string `json:"workspace_id_uuid"`
	Name            string `json:"name"`
	// TimeZone is the zone of the pixel's rollup days; TimeZoneSource says whose it is:
	// "pixel" (its own), "workspace" (inherited) or "default" (UTC).
	TimeZone       string    `json:"time_zone"`
	TimeZoneSource string    `json:"time_zone_source"`
	CreatedAt      time.Time `json:"created_at"`
}

// NewPixelJSON formats p of workspace w.
func NewPixelJSON(p workspace.Pixel, w workspace.Workspace) PixelJSON {
	z := workspace.EffectiveZone(w, p.TimeZone)
	return PixelJSON{ids.Format(ids.Pixel, p.ID), p.ID.String(), ids.Format(ids.Org, w.ID), w.ID.String(), p.Name,
		z.Name, z.Source, p.CreatedAt}
}

// zoneError says which argument holds an unknown zone; other errors pass unchanged.
func zoneError(arg string, err error) error {
	if errors.Is(err, schema.ErrUnknownZone) {
		return fmt.Errorf("%s: %w", arg, err)
	}
	return err
}
