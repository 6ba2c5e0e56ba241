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
	"svc/api/env"
	"svc/api/mcp"
	"svc/api/read"
	"svc/bench"
	"svc/ingest"
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
// is cancelled on SIGINT or SIGTERM.
type command struct {
	summary string
	run     func(ctx context.Context, args []string) error
}

var commands = map[string]command{
	"dev":      {"every role and an embedded Kafka broker behind one address", devMain},
	"ingest":   {"the fasthttp edge: POST /events onto Kafka", ingest.Main},
	"broker":   {"the embedded Kafka broker alone (SVC_EMBEDDED_KAFKA_ADDR)", brokerMain},
	"admin":    {"workspaces, pixels, keys, webhooks, imports, seeds (run without arguments for the list)", admin.Main},
	"migrate":  {"apply the ClickHouse schema (--print, --clustered --cluster NAME)", schema.MigrateMain},
	"rollup":   {"the Kafka consumer group writing events into ClickHouse", rollup.Main},
	"webhooks": {"inbound receiver and outbound delivery worker", webhooks.Main},
	"api":      {"the read API", read.Main},
	"bench":    {"load generator and reports", bench.Main},
}

// brokerMain runs the embedded broker alone, for several processes to share.
func brokerMain(ctx context.Context, _ []string) error {
	r := env.New()
	bc := broker.FromEnv(r)
	if err := r.Err(); err != nil {
		return err
	}
	bc.Brokers = nil
	if err := bc.Validate(); err != nil {
		return err
	}
	b, err := broker.StartEmbedded(bc)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "svc broker: listening on %v\n", b.Addrs())
	<-ctx.Done()
	b.Close()
	return nil
}

// devMain runs every role in one process behind SVC_HTTP_ADDR, routing by path as a
// production load balancer would, with an embedded broker unless SVC_KAFKA_BROKERS is set.
func devMain(ctx context.Context, _ []string) error {
	return api.Main(ctx, devRoles)
}

// devRoles builds every role on p: the broker first (it closes last), then the edge,
// webhooks, the read API with docs and MCP, and the rollup consumer.
func devRoles(ctx context.Context, p *api.Process) ([]api.Role, error) {
	r := env.New()
	bcfg, icfg, rcfg := broker.FromEnv(r), ingest.ConfigFromEnv(r), rollup.FromEnv(r)
	if err := r.Err(); err != nil {
		return nil, err
	}
	seeds, brk, err := broker.Role(bcfg)
	if err != nil {
		return nil, err
	}
	roles := []api.Role{brk}
	edge, err := ingest.Start(p, bcfg, seeds, icfg)
	if err != nil {
		return roles, err
	}
	roles = append(roles, edge.Role())
	wh, err := webhooks.FromEnv(ctx, p)
	if err != nil {
		return roles, err
	}
	rd, err := read.FromEnv(ctx, p)
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
		fmt.Fprintf(os.Stderr, "svc %s: %v\n", os.Args[1], err)
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
