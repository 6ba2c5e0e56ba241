package catalog

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"svc/lib/ids"
	"svc/lib/problem"
	"svc/schema/workspace"
)

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
func SeedShowroom(ctx context.Context, ks *workspace.Store, conn driver.Conn) (SeedResult, error) {
	w, err := ks.PutWorkspace(ctx, workspace.Workspace{ID: ShowroomWorkspace, Name: ShowroomName, Showroom: true, CreatedAt: showroomCreated})
	if err != nil {
		return SeedResult{}, err
	}
	if _, err := ks.PutPixel(ctx, workspace.Pixel{ID: ShowroomPixel, WorkspaceID: w.ID, Name: "northwind-outdoor.example website",
		CreatedAt: showroomCreated}); err != nil {
		return SeedResult{}, err
	}
	b, ferrs := ShowroomDocument().Resolve(w.ID)
	if len(ferrs) > 0 {
		return SeedResult{}, &ImportError{Errors: ferrs} // a bug in ShowroomDocument; tests catch it
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
