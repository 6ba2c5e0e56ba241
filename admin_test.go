package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"svc/schema/apitest"
	"svc/schema/catalog"
	"svc/schema/chtest"
	"svc/schema/workspace"
)

func TestAdminImportCommand(t *testing.T) {
	cfg, conn := chtest.NewDB(t)
	t.Setenv("SVC_CLICKHOUSE_DB", cfg.Database)
	ks := workspace.NewStore(apitest.Redis(t))
	ctx := context.Background()
	w, err := ks.CreateWorkspace(ctx, "import test", false)
	if err != nil {
		t.Fatal(err)
	}
	readme, _ := os.ReadFile("schema/catalog/README.md") // the documented example
	_, rest, _ := strings.Cut(string(readme), "## Import file")
	_, rest, _ = strings.Cut(rest, "```json\n")
	doc, _, _ := strings.Cut(rest, "```")
	file := filepath.Join(t.TempDir(), "plan.json")
	if err := os.WriteFile(file, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := Builtin["import"]
	e := &Env{Keys: ks, Out: &bytes.Buffer{}}
	out, err := cmd.Run(ctx, e, []string{file, "--workspace", "org_" + w.ID.String()})
	if err != nil {
		t.Fatal(err)
	}
	if s := out.(map[string]any)["imported"].(catalog.Summary); s.Plans != 1 || s.Lines != 1 || s.Findings != 1 || s.PlanActuals != 1 {
		t.Fatalf("summary %+v", s)
	}
	if ps, _ := catalog.ListPlans(ctx, conn, w.ID, catalog.ListQuery{Limit: 10}); len(ps) != 1 || ps[0].Name != "Holiday Season 2026" {
		t.Fatalf("plans %+v", ps)
	}
	bad := filepath.Join(t.TempDir(), "bad.json")
	_ = os.WriteFile(bad, []byte(`{"campaigns":[{"name":"c","plan_id":"pln_00000000-0000-0000-0000-000000000009","objective":"awareness",
		"status":"active","start_date":"2026-01-01","end_date":"2026-01-02","budget":1,"currency":"EUR"}]}`), 0o600)
	if _, err := cmd.Run(ctx, e, []string{bad, "--workspace", w.ID.String()}); err == nil || !strings.Contains(err.Error(), "campaigns[0].plan_id: exists") {
		t.Fatalf("a campaign of an unknown plan: %v", err)
	}
	for _, args := range [][]string{{file}, {"--workspace", w.ID.String()}, {file, "--workspace", "org_nope"}, {"/nonexistent", "--workspace", w.ID.String()}} {
		if _, err := cmd.Run(ctx, e, args); err == nil {
			t.Errorf("import %v succeeded", args)
		}
	}
}
