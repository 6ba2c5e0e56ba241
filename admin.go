package main

// `svc admin`, the operator's side of the application's screens: workspaces, pixels and
// API keys (admin.go), the application's users and audit log (admin_users.go), time
// zones, retention, the catalog's imports and the showroom seed, webhook endpoints and
// deliveries (admin_*.go). Every command prints one JSON object on stdout, or exits
// non-zero with a message on stderr. Secrets are printed only on creation and rotation,
// never logged.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	json "github.com/goccy/go-json"
	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"svc/app"
	"svc/lib/apikey"
	"svc/lib/httpserver"
	"svc/lib/ids"
	"svc/lib/process"
	"svc/lib/settings"
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

// Builtin are this package's commands: the key screens (workspaces, pixels, keys, their
// time zones, raw-event retention) and the catalog's loading (imports, the showroom
// seed). The webhooks role's live in its package; main.go hands every set to Main.
var Builtin = Merge(timeZoneCommands, retentionCommands, alertCommands, catalogCommands, userCommands, Commands{
	"workspace create": {"--name NAME [--showroom] [--time-zone ZONE]", workspaceCreate},
	"pixel create":     {"--workspace ID [--name NAME] [--time-zone ZONE]", pixelCreate},
	"key create":       {"--workspace ID --env live|sandbox --scopes a,b [--expires RFC3339] [--allow CIDR,...] [--version V] [--burst N] [--daily N]", keyCreate},
	"key revoke":       {"ID", keyRevoke},
	"key rotate":       {"ID --overlap DURATION", keyRotate},
	"key set-limits":   {"ID [--burst N] [--daily N]", keySetLimits},
	"key list":         {"--workspace ID", keyList},
})

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
