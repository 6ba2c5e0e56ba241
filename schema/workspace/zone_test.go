package workspace_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"

	"svc/schema"
	"svc/schema/apitest"
	"svc/schema/workspace"
)

func TestTimeZones(t *testing.T) {
	ctx := context.Background()
	s := workspace.NewStore(apitest.Redis(t))
	now := time.Now()
	s.Now = func() time.Time { return now }
	w, err := s.PutWorkspace(ctx, workspace.Workspace{ID: uuid.New(), Name: "zones", TimeZone: "America/New_York", CreatedAt: now})
	if err != nil {
		t.Fatal(err)
	}
	p, err := s.CreatePixel(ctx, w.ID, "inherits")
	if err != nil {
		t.Fatal(err)
	}
	own, err := s.PutPixel(ctx, workspace.Pixel{ID: uuid.New(), WorkspaceID: w.ID, Name: "own", TimeZone: "Asia/Kathmandu"})
	if err != nil {
		t.Fatal(err)
	}
	zone := func(p workspace.Pixel) workspace.Zone {
		t.Helper()
		z, err := s.TimeZone(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		return z
	}
	if z := zone(p); z != (workspace.Zone{Name: "America/New_York", Source: "workspace"}) {
		t.Fatalf("inheriting pixel: %+v", z)
	}
	if z := zone(own); z != (workspace.Zone{Name: "Asia/Kathmandu", Source: "pixel"}) {
		t.Fatalf("pixel with its own zone: %+v", z)
	}

	// This process sees its own change at once.
	if _, err := s.SetPixelTimeZone(ctx, own.ID, ""); err != nil {
		t.Fatal(err)
	}
	if z := zone(own); z != (workspace.Zone{Name: "America/New_York", Source: "workspace"}) {
		t.Fatalf("a cleared pixel zone inherits again: %+v", z)
	}
	// Another process (its own cache) sees the change within workspace.ZoneTTL.
	other := workspace.NewStore(apitest.Redis(t))
	other.Now = s.Now
	if _, err := other.SetWorkspaceTimeZone(ctx, w.ID, "Europe/Berlin"); err != nil {
		t.Fatal(err)
	}
	if z := zone(p); z.Name != "America/New_York" {
		t.Fatalf("within the TTL the cached zone stays: %+v", z)
	}
	now = now.Add(workspace.ZoneTTL)
	if z := zone(p); z != (workspace.Zone{Name: "Europe/Berlin", Source: "workspace"}) {
		t.Fatalf("after the TTL: %+v", z)
	}
	if z := zone(own); z != (workspace.Zone{Name: "Europe/Berlin", Source: "workspace"}) {
		t.Fatalf("after the TTL: %+v", z)
	}
	if got, _ := s.Workspace(ctx, w.ID); got.Name != "zones" || got.TimeZone != "Europe/Berlin" {
		t.Fatalf("set-time-zone lost other fields: %+v", got)
	}

	// A workspace without a zone is UTC; bad zones are refused everywhere.
	plain, _ := s.CreateWorkspace(ctx, "plain", false)
	pp, _ := s.CreatePixel(ctx, plain.ID, "p")
	if z := zone(pp); z != (workspace.Zone{Name: "UTC", Source: "default"}) {
		t.Fatalf("default: %+v", z)
	}
	for _, err := range []error{
		errOf(s.SetWorkspaceTimeZone(ctx, w.ID, "Mars/Olympus")),
		errOf(s.SetPixelTimeZone(ctx, p.ID, "Local")),
		errOf(s.PutWorkspace(ctx, workspace.Workspace{ID: uuid.New(), Name: "x", TimeZone: "+05:45"})),
		errOf(s.PutPixel(ctx, workspace.Pixel{ID: uuid.New(), WorkspaceID: w.ID, TimeZone: "asia/kathmandu"})),
	} {
		if !errors.Is(err, schema.ErrUnknownZone) {
			t.Errorf("bad zone: %v", err)
		}
	}
	if _, err := s.SetWorkspaceTimeZone(ctx, uuid.New(), "UTC"); !errors.Is(err, workspace.ErrNotFound) {
		t.Errorf("unknown workspace: %v", err)
	}
	if _, err := s.SetWorkspaceTimeZone(ctx, w.ID, ""); err == nil {
		t.Error("an empty workspace zone was accepted")
	}
}

func errOf[T any](_ T, err error) error { return err }
