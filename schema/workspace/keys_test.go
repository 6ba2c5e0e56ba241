package workspace_test

import (
	"context"
	"testing"

	"svc/lib/apikey"
	"svc/lib/limits"
	"svc/schema/apitest"
	"svc/schema/workspace"
)

// TestQuotasBounded: every writer of a key's limits (the application, svc admin) goes
// through the store, which refuses a quota past limits.MaxQuota: the windows' arithmetic
// runs in Lua's doubles.
func TestQuotasBounded(t *testing.T) {
	ctx := context.Background()
	s := workspace.NewStore(apitest.Redis(t))
	w, err := s.CreateWorkspace(ctx, "quotas", false)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.CreateKey(ctx, workspace.KeySpec{WorkspaceID: w.ID, Env: apikey.Live, Scopes: []string{"events:write"},
		Burst: 10, Daily: limits.MaxQuota + 1}); err == nil {
		t.Fatal("a daily quota past MaxQuota stored")
	}
	k, _, err := s.CreateKey(ctx, workspace.KeySpec{WorkspaceID: w.ID, Env: apikey.Live, Scopes: []string{"events:write"},
		Burst: limits.MaxQuota, Daily: limits.MaxQuota})
	if err != nil {
		t.Fatalf("quotas of MaxQuota: %v", err)
	}
	if _, err := s.SetLimits(ctx, k.ID, limits.MaxQuota+1, 0); err == nil {
		t.Fatal("a burst past MaxQuota set")
	}
	if got, _ := s.Key(ctx, k.ID); got.Burst != limits.MaxQuota {
		t.Fatalf("a refused change changed the key: %+v", got)
	}
}
