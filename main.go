// Command svc runs the service's roles and its admin commands.
//
//	svc dev        every role and an embedded Kafka broker behind one address
//	svc ingest     the fasthttp edge: POST /events onto Kafka
//	svc rollup     the Kafka consumer group writing events into ClickHouse
//	svc api        the read API
//	svc webhooks   inbound receiver and outbound delivery worker
//	svc broker     the embedded Kafka broker alone
//	svc migrate    apply the ClickHouse schema
//	svc admin ...  workspaces, pixels, keys, webhooks, imports, seed data
//	svc bench ...  load generator and reports
//
// Configuration comes from SVC_* environment variables (README.md lists them all).
package main

import (
	"context"
	_ "embed"
	"fmt"
	"os"
	"os/signal"
	"runtime/debug"
	"sort"
	"syscall"

	"svc/api"
	"svc/api/admin"
	"svc/api/docs"
	"svc/api/mcp"
	"svc/api/read"
	"svc/bench"
	"svc/ingest"
	"svc/lib/logs"
	"svc/lib/settings"
	"svc/rollup"
	"svc/schema"
	"svc/schema/broker"
	"svc/webhooks"
)

// changelog is CHANGELOG.md, the one source of the changelog developer page.
//
//go:embed CHANGELOG.md
var changelog []byte

func init() { docs.UseChangelog(changelog) }

// command is one subcommand: it gets its arguments (without its name) and a context that
// is cancelled on SIGINT or SIGTERM. A role (a long-running process) writes only JSON
// log lines on stderr (api/logs), its final error included; the tools (admin, migrate,
// bench) write for people.
type command struct {
	summary string
	run     func(ctx context.Context, args []string) error
	role    bool
}

var commands = map[string]command{
	"dev":      {"every role and an embedded Kafka broker behind one address", devMain, true},
	"ingest":   {"the fasthttp edge: POST /events onto Kafka", ingest.Main, true},
	"broker":   {"the embedded Kafka broker alone (SVC_EMBEDDED_KAFKA_ADDR)", brokerMain, true},
	"admin":    {"workspaces, pixels, keys, webhooks, imports, seeds (run without arguments for the list)", admin.Main, false},
	"migrate":  {"apply the ClickHouse schema (--print, --clustered --cluster NAME)", schema.MigrateMain, false},
	"rollup":   {"the Kafka consumer group writing events into ClickHouse", rollup.Main, true},
	"webhooks": {"inbound receiver and outbound delivery worker", webhooks.Main, true},
	"api":      {"the read API", read.Main, true},
	"bench":    {"load generator and reports", bench.Main, false},
}

// brokerMain runs the embedded broker alone, for several processes to share.
func brokerMain(ctx context.Context, _ []string) error {
	log := api.NewLogger().With(logs.RoleKey, "broker")
	logs.Install(log)
	r := settings.New()
	bc := broker.FromEnv(r)
	if err := r.Err(); err != nil {
		return err
	}
	bc.Brokers, bc.Log = nil, log
	if err := bc.Validate(); err != nil {
		return err
	}
	b, err := broker.StartEmbedded(bc)
	if err != nil {
		return err
	}
	log.Info("listening", "addrs", b.Addrs())
	<-ctx.Done()
	b.Close()
	log.Info("stopped")
	return nil
}

// devMain runs every role in one process behind SVC_HTTP_ADDR, routing by path as a
// production load balancer would, with an embedded broker unless SVC_KAFKA_BROKERS is set.
func devMain(ctx context.Context, _ []string) error {
	return api.Main(ctx, "dev", devRoles)
}

// devRoles builds every role on p: the broker first (it closes last), then the edge,
// webhooks, the read API with docs and MCP, and the rollup consumer. Each is built on
// p.As(its name), so its log lines name it; the HTTP server's own lines say dev.
func devRoles(ctx context.Context, p *api.Process) ([]api.Role, error) {
	r := settings.New()
	bcfg, icfg, rcfg := broker.FromEnv(r), ingest.ConfigFromEnv(r), rollup.FromEnv(r)
	if err := r.Err(); err != nil {
		return nil, err
	}
	bcfg.Log, rcfg.Log = p.RoleLog("broker"), p.RoleLog("rollup")
	seeds, brk, err := broker.Role(bcfg)
	if err != nil {
		return nil, err
	}
	roles := []api.Role{brk}
	edge, err := ingest.Start(p.As("ingest"), bcfg, seeds, icfg)
	if err != nil {
		return roles, err
	}
	roles = append(roles, edge.Role())
	wh, err := webhooks.FromEnv(ctx, p.As("webhooks"))
	if err != nil {
		return roles, err
	}
	rd, err := read.FromEnv(ctx, p.As("api"))
	if err != nil {
		return roles, err
	}
	return append(roles, wh, rd, docs.Role(), mcp.Role(), rollup.NewRole(rcfg, seeds, p.Registry, p.Redis)), nil
}

func main() {
	if len(os.Args) < 2 || os.Args[1] == "-h" || os.Args[1] == "--help" || os.Args[1] == "help" {
		usage()
		os.Exit(2)
	}
	cmd, ok := commands[os.Args[1]]
	if !ok {
		fmt.Fprintf(os.Stderr, "svc: unknown command %q\n", os.Args[1])
		usage()
		os.Exit(2)
	}
	// The roles allocate mostly short-lived request and batch buffers over a small live
	// heap: collecting at 200% heap growth instead of Go's 100% cut svc's CPU per event
	// by about 6% at 300,000 events/s (bench/README.md). A GOGC in the environment wins.
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(200)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := cmd.run(ctx, os.Args[2:]); err != nil {
		if cmd.role {
			api.NewLogger().With(logs.RoleKey, os.Args[1]).Error("stopped with an error", "err", err.Error())
		} else {
			fmt.Fprintf(os.Stderr, "svc %s: %v\n", os.Args[1], err)
		}
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: svc <command> [arguments]\n\ncommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(os.Stderr, "  %-10s %s\n", n, commands[n].summary)
	}
}
