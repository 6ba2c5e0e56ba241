// Command svc runs the service's roles and its admin commands.
//
//	svc dev        every role and an embedded Kafka broker behind one address
//	svc ingest     the fasthttp edge: POST /events onto Kafka
//	svc rollup     the Kafka consumer group writing events into ClickHouse
//	svc api        the read API
//	svc webhooks   inbound receiver and outbound delivery worker
//	svc app        the application: web screens under /app
//	svc broker     the embedded Kafka broker alone
//	svc migrate    apply the ClickHouse schema
//	svc admin ...  workspaces, pixels, keys, users, webhooks, imports, seed data
//	svc config     the settings and their effective values
//	svc bench ...  load generator and reports
//
// Configuration comes from SVC_* environment variables, every one declared in
// lib/settings/table.go. This file lists the commands; roles.go assembles each role
// command's process from the role packages (as VictoriaMetrics' and Jaeger's mains do).
package main

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"sort"
	"syscall"

	"svc/api/docs"
	"svc/bench"
	"svc/lib/logs"
	"svc/schema/migrations"
)

// changelog is CHANGELOG.md, the one source of the changelog developer page.
//
//go:embed CHANGELOG.md
var changelog []byte

// screens are the application's screenshots its browser tests saved, the one copy the
// developer page "application" shows.
//
//go:embed app/testdata/screens/*.png
var screens embed.FS

func init() {
	docs.UseChangelog(changelog)
	sub, err := fs.Sub(screens, "app/testdata/screens")
	if err != nil {
		panic(err)
	}
	docs.UseScreens(sub)
}

// subcommand is one command of svc: it gets its arguments (without its name) and a
// context that is cancelled on SIGINT or SIGTERM. A role (a long-running process) writes
// only JSON log lines on stderr (lib/logs), its final error included; the tools (admin,
// migrate, config, bench) write for people.
type subcommand struct {
	summary string
	run     func(ctx context.Context, args []string) error
	role    bool
}

var subcommands = map[string]subcommand{
	"dev":      {"every role and an embedded Kafka broker behind one address", roleCommand("dev"), true},
	"ingest":   {"the fasthttp edge: POST /events onto Kafka", roleCommand("ingest"), true},
	"rollup":   {"the Kafka consumer group writing events into ClickHouse", roleCommand("rollup"), true},
	"api":      {"the read API", roleCommand("api"), true},
	"webhooks": {"inbound receiver and outbound delivery worker", roleCommand("webhooks"), true},
	"app":      {"the application: web screens under /app (sign-in, API keys, pixels)", roleCommand("app"), true},
	"broker":   {"the embedded Kafka broker alone (SVC_EMBEDDED_KAFKA_ADDR)", brokerMain, true},
	"admin":    {"workspaces, pixels, keys, webhooks, imports, seeds (run without arguments for the list)", adminMain, false},
	"migrate":  {"apply the ClickHouse schema (--print, --clustered --cluster NAME)", migrations.MigrateMain, false},
	"config":   {"every SVC_* setting and its effective value; with a command, check its settings (--markdown: the README table)", configMain, false},
	"bench":    {"load generator and reports", bench.Main, false},
}

// adminMain is `svc admin`: the admin package's commands and the webhooks role's.
func adminMain(ctx context.Context, args []string) error {
	return runAdmin(ctx, args, Builtin, webhookCommands)
}

func main() {
	if len(os.Args) < 2 {
		printUsage()
		os.Exit(2)
	}
	if a := os.Args[1]; a == "-h" || a == "--help" || a == "help" { // asked for: not an error
		printUsage()
		os.Exit(0)
	}
	cmd, ok := subcommands[os.Args[1]]
	if !ok {
		fmt.Fprintf(os.Stderr, "svc: unknown command %q\n", os.Args[1])
		printUsage()
		os.Exit(2)
	}
	// The roles allocate mostly short-lived request and batch buffers over a small live
	// heap: collecting at 200% heap growth instead of Go's 100% cut svc's CPU per event
	// by about 6% at 300,000 events/s (bench/HISTORY.md). A GOGC in the environment wins.
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(200)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := cmd.run(ctx, os.Args[2:]); err != nil {
		if cmd.role {
			logs.New(slog.LevelInfo).With(logs.RoleKey, os.Args[1]).Error("stopped with an error", "err", err.Error())
		} else {
			fmt.Fprintf(os.Stderr, "svc %s: %v\n", os.Args[1], err)
		}
		os.Exit(1)
	}
}

// printUsage lists the commands on stderr.
func printUsage() {
	fmt.Fprintln(os.Stderr, "usage: svc <command> [arguments]\n\ncommands:")
	names := make([]string, 0, len(subcommands))
	for n := range subcommands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(os.Stderr, "  %-10s %s\n", n, subcommands[n].summary)
	}
}
