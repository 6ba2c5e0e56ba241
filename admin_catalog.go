package main

import (
	"context"
	"errors"
	"flag"
	"io"
	"os"
	"strings"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"svc/lib/chpool"
	"svc/lib/ids"
	"svc/lib/settings"
	"svc/schema/catalog"
)

// catalogCommands load the catalog (schema/catalog): an import file, the showroom seed.
var catalogCommands = Commands{
	"import":        {Usage: "FILE --workspace ID (the JSON format is in schema/catalog/README.md)", Run: importCommand},
	"seed showroom": {Usage: "(deterministic; safe to run twice)", Run: seedCommand},
}

// openClickHouse connects to the service database from SVC_CLICKHOUSE_*.
func openClickHouse(ctx context.Context) (driver.Conn, error) {
	r := settings.New()
	cfg := chpool.ConfigFromEnv(r)
	if err := errors.Join(r.Err(), cfg.Validate()); err != nil {
		return nil, err
	}
	return chpool.Open(ctx, cfg)
}

func importCommand(ctx context.Context, e *Env, args []string) (any, error) {
	fs := flag.NewFlagSet("import", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	wsFlag := fs.String("workspace", "", "workspace id (org_… or UUID)")
	var file string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		file, args = args[0], args[1:]
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if file == "" && fs.NArg() == 1 {
		file = fs.Arg(0)
	} else if file == "" || fs.NArg() > 0 {
		return nil, errors.New("want exactly one FILE")
	}
	ws, err := WorkspaceArg(ctx, e.Keys, *wsFlag)
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	doc, err := catalog.ParseDocument(b)
	if err != nil {
		return nil, err
	}
	conn, err := openClickHouse(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	sum, ferrs, err := catalog.Import(ctx, conn, ws.ID, doc)
	if err != nil {
		return nil, err
	}
	if len(ferrs) > 0 {
		return nil, &catalog.ImportError{Errors: ferrs}
	}
	return map[string]any{"workspace_id": ids.Format(ids.Org, ws.ID), "workspace_id_uuid": ws.ID.String(), "imported": sum}, nil
}

func seedCommand(ctx context.Context, e *Env, args []string) (any, error) {
	if len(args) > 0 {
		return nil, errors.New("seed showroom takes no arguments")
	}
	conn, err := openClickHouse(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	return catalog.SeedShowroom(ctx, e.Keys, conn)
}
