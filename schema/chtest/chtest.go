// Package chtest gives tests a private, migrated ClickHouse database on the local
// server (SVC_CLICKHOUSE_ADDR, default 127.0.0.1:9000).
//
// If ClickHouse cannot be reached, the test is skipped, unless CI=true, where it fails:
// CI must run every tier.
package chtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"svc/lib/chpool"
	"svc/lib/settings"
	"svc/schema/migrations"
)

// Config returns the server configuration from the environment with a fresh, unique
// database name (not yet created). It skips or fails the test if the server does not
// answer (see the package comment).
func Config(t testing.TB) chpool.Config {
	t.Helper()
	cfg := chpool.ConfigFromEnv(settings.New())
	cfg.Cluster = ""
	cfg.Database = uniqueName(t)
	probe := cfg
	probe.Database = "default"
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := chpool.Open(ctx, probe)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("ClickHouse at %s unreachable (CI=true, not skipping): %v", cfg.Addr, err)
		}
		t.Skipf("ClickHouse at %s unreachable: %v", cfg.Addr, err)
	}
	conn.Close()
	return cfg
}

// NewDB creates a uniquely named database, applies every migration to it and returns
// its configuration and an open connection. Cleanup closes the connection and drops
// the database (set SVC_TEST_KEEP_DB=1 to keep it for inspection).
func NewDB(t testing.TB) (chpool.Config, driver.Conn) {
	t.Helper()
	cfg := Config(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := migrations.Migrate(ctx, cfg); err != nil {
		t.Fatalf("migrate %s: %v", cfg.Database, err)
	}
	conn, err := chpool.Open(ctx, cfg)
	if err != nil {
		t.Fatalf("open %s: %v", cfg.Database, err)
	}
	t.Cleanup(func() { Drop(t, conn, cfg.Database) })
	return cfg, conn
}

// Drop drops database db (unless SVC_TEST_KEEP_DB=1) and closes conn.
func Drop(t testing.TB, conn driver.Conn, db string) {
	defer conn.Close()
	if settings.New().Bool("SVC_TEST_KEEP_DB") {
		t.Logf("keeping database %s", db)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+db); err != nil {
		t.Errorf("drop database %s: %v", db, err)
	}
}

var nonIdent = regexp.MustCompile(`[^a-z0-9_]+`)

func uniqueName(t testing.TB) string {
	n := nonIdent.ReplaceAllString(strings.ToLower(t.Name()), "_")
	if len(n) > 40 {
		n = n[:40]
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	return "test_" + strings.Trim(n, "_") + "_" + hex.EncodeToString(b[:])
}
