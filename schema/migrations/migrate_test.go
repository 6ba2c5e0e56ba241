package migrations_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"svc/lib/chpool"
	"svc/schema/chtest"
	"svc/schema/migrations"
)

func TestMigrateTwiceAndConcurrently(t *testing.T) {
	cfg := chtest.Config(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i := range errs {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = migrations.Migrate(ctx, cfg) }()
	}
	wg.Wait()
	conn, err := chpool.Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { chtest.Drop(t, conn, cfg.Database) })
	for i, err := range errs {
		if err != nil {
			t.Fatalf("concurrent runner %d: %v", i, err)
		}
	}
	if err := migrations.Migrate(ctx, cfg); err != nil {
		t.Fatalf("second run: %v", err)
	}
	ms, err := migrations.Migrations()
	if err != nil {
		t.Fatal(err)
	}
	var n uint64
	if err := conn.QueryRow(ctx, "SELECT uniqExact(version) FROM "+migrations.MigrationsTable).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if int(n) != len(ms) {
		t.Fatalf("recorded %d versions, want %d", n, len(ms))
	}
	for _, tbl := range []string{"events", "pixel_rollups_daily", "pixel_rollups_daily_mv", "pixel_rollups_daily_v"} {
		var c uint64
		if err := conn.QueryRow(ctx, "SELECT count() FROM system.tables WHERE database = ? AND name = ?", cfg.Database, tbl).Scan(&c); err != nil || c != 1 {
			t.Errorf("table %s: count %d, err %v", tbl, c, err)
		}
	}
}

func TestMigrateRefusesEditedMigration(t *testing.T) {
	cfg, conn := chtest.NewDB(t)
	ctx := context.Background()
	if err := conn.Exec(ctx, "ALTER TABLE "+migrations.MigrationsTable+" UPDATE checksum = 'x' WHERE version = 1"); err != nil {
		// 18.16 and later support ALTER UPDATE on MergeTree (mutations): an error is one.
		t.Fatalf("ALTER UPDATE of the migrations table: %v", err)
	}
	waitMutations(t, conn, cfg.Database)
	err := migrations.Migrate(ctx, cfg)
	if err == nil || !strings.Contains(err.Error(), "checksum") {
		t.Fatalf("want a checksum error, got %v", err)
	}
}

func waitMutations(t *testing.T, conn driver.Conn, db string) {
	t.Helper()
	for i := 0; i < 100; i++ {
		var n uint64
		if err := conn.QueryRow(context.Background(), "SELECT count() FROM system.mutations WHERE database = ? AND is_done = 0", db).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("mutation did not finish")
}

// TestRepeatedAddColumnCountsAsDone: a migration that adds a column to a table is safe to
// run again (by a concurrent runner, or after a run that did not record it): the server's
// answer to adding a column that exists (code 44 on 18.16, 15 on later releases) counts
// as done, and other failures of the statement do not.
func TestRepeatedAddColumnCountsAsDone(t *testing.T) {
	_, conn := chtest.NewDB(t)
	ctx := context.Background()
	if err := conn.Exec(ctx, "ALTER TABLE events ADD COLUMN drift_probe String"); err != nil {
		t.Fatal(err)
	}
	err := conn.Exec(ctx, "ALTER TABLE events ADD COLUMN drift_probe String")
	if err == nil || !migrations.AlreadyExists(err) {
		t.Fatalf("adding the column again: %v (code %d), want an already-exists answer", err, chpool.ErrorCode(err))
	}
	if err := conn.Exec(ctx, "ALTER TABLE events ADD COLUMN drift_probe_2 NoSuchType"); err == nil || migrations.AlreadyExists(err) {
		t.Fatalf("adding a column of an unknown type: %v, counted as already done", err)
	}
}
