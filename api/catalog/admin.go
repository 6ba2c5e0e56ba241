package catalog

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"svc/api/admin"
	"svc/api/ids"
	"svc/api/keys"
	"svc/api/problem"
	"svc/lib/settings"
	"svc/schema"
)

// AdminCommands are the catalog's admin commands (`svc admin import`, `svc admin seed
// showroom`); main.go hands them to admin.Main.
var AdminCommands = admin.Commands{
	"import":        {Usage: "FILE --workspace ID (the JSON format is in api/catalog/README.md)", Run: importCommand},
	"seed showroom": {Usage: "(deterministic; safe to run twice)", Run: seedCommand},
}

// openClickHouse connects to the service database from SVC_CLICKHOUSE_*.
func openClickHouse(ctx context.Context) (driver.Conn, error) {
	r := settings.New()
	cfg := schema.FromEnv(r)
	if err := errors.Join(r.Err(), cfg.Validate()); err != nil {
		return nil, err
	}
	return schema.Open(ctx, cfg)
}

// ImportError is returned by `svc admin import` when the file fails validation; it
// lists every problem.
type ImportError struct{ Errors []problem.FieldError }

func (e *ImportError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "the file has %d problem(s); nothing was written:", len(e.Errors))
	for _, fe := range e.Errors {
		fmt.Fprintf(&b, "\n  %s: %s (got %v)", fe.Field, fe.Rule, fe.Value)
	}
	return b.String()
}

func importCommand(ctx context.Context, e *admin.Env, args []string) (any, error) {
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
	ws, err := admin.WorkspaceArg(ctx, e.Keys, *wsFlag)
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	doc, err := ParseDocument(b)
	if err != nil {
		return nil, err
	}
	conn, err := openClickHouse(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	sum, ferrs, err := Import(ctx, conn, ws.ID, doc)
	if err != nil {
		return nil, err
	}
	if len(ferrs) > 0 {
		return nil, &ImportError{ferrs}
	}
	return map[string]any{"workspace_id": ids.Format(ids.Org, ws.ID), "workspace_id_uuid": ws.ID.String(), "imported": sum}, nil
}

// SeedResult is what `svc admin seed showroom` prints.
type SeedResult struct {
	WorkspaceID     string  `json:"workspace_id"`
	WorkspaceIDUUID string  `json:"workspace_id_uuid"`
	PixelID         string  `json:"pixel_id"`
	PixelIDUUID     string  `json:"pixel_id_uuid"`
	Name            string  `json:"name"`
	Imported        Summary `json:"imported"`
}

// showroomCreated is the showroom's fixed creation time (deterministic records).
var showroomCreated = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// SeedShowroom writes the showroom workspace and pixel (Redis) and its catalog
// (ClickHouse) under fixed ids. Running it again rewrites the same records.
func SeedShowroom(ctx context.Context, ks *keys.Store, conn driver.Conn) (SeedResult, error) {
	w, err := ks.PutWorkspace(ctx, keys.Workspace{ID: ShowroomWorkspace, Name: ShowroomName, Showroom: true, CreatedAt: showroomCreated})
	if err != nil {
		return SeedResult{}, err
	}
	if _, err := ks.PutPixel(ctx, keys.Pixel{ID: ShowroomPixel, WorkspaceID: w.ID, Name: "northwind-outdoor.example website",
		CreatedAt: showroomCreated}); err != nil {
		return SeedResult{}, err
	}
	b, ferrs := ShowroomDocument().Resolve(w.ID)
	if len(ferrs) > 0 {
		return SeedResult{}, &ImportError{ferrs} // a bug in ShowroomDocument; tests catch it
	}
	b.Account.CreatedAt = showroomCreated
	for i := range b.Plans {
		b.Plans[i].CreatedAt = showroomCreated
	}
	for i := range b.Lines {
		b.Lines[i].CreatedAt = showroomCreated
	}
	for i := range b.Campaigns {
		b.Campaigns[i].CreatedAt = showroomCreated
	}
	for i := range b.Studies {
		b.Studies[i].CreatedAt = showroomCreated
	}
	for i := range b.Findings {
		b.Findings[i].CreatedAt = showroomCreated
	}
	sum, _, err := Write(ctx, conn, w.ID, b)
	if err != nil {
		return SeedResult{}, err
	}
	return SeedResult{WorkspaceID: ids.Format(ids.Org, w.ID), WorkspaceIDUUID: w.ID.String(),
		PixelID: ids.Format(ids.Pixel, ShowroomPixel), PixelIDUUID: ShowroomPixel.String(), Name: w.Name, Imported: sum}, nil
}

func seedCommand(ctx context.Context, e *admin.Env, args []string) (any, error) {
	if len(args) > 0 {
		return nil, errors.New("seed showroom takes no arguments")
	}
	conn, err := openClickHouse(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	return SeedShowroom(ctx, e.Keys, conn)
}
