package migrations_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"svc/lib/chpool"
	"svc/schema/chtest"
	"svc/schema/migrations"
)

// TestBackfill15m: events written before migration 0004 reach pixel_rollups_15m
// through its backfill, events written after through its materialized view, each once.
func TestBackfill15m(t *testing.T) {
	cfg := chtest.Config(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ms, err := migrations.Migrations()
	if err != nil {
		t.Fatal(err)
	}
	var before []migrations.Migration
	for _, m := range ms {
		if m.Version < 4 {
			before = append(before, m)
		}
	}
	boot, steps, err := migrations.Plan(before, cfg.Database, "")
	if err != nil {
		t.Fatal(err)
	}
	probe := cfg
	probe.Database = "default"
	conn, err := chpool.Open(ctx, probe)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { chtest.Drop(t, conn, cfg.Database) })
	for _, s := range boot {
		if err := conn.Exec(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	for _, st := range steps {
		for _, s := range st.Statements {
			if err := conn.Exec(ctx, s); err != nil {
				t.Fatal(err)
			}
		}
	}
	insert := func(n int, insertedAt string) {
		t.Helper()
		err := conn.Exec(ctx, `INSERT INTO `+cfg.Database+`.events (workspace_id, pixel_id, sandbox, event_id, event_name,
			occurred_at, event_date, value, has_value, currency, consent, has_email, email_sha256, inserted_at)
			SELECT toUUID('11111111-1111-1111-1111-111111111111'), toUUID('22222222-2222-2222-2222-222222222222'), 0,
			       generateUUIDv4(), 'purchase', toDateTime('2026-03-08 04:00:00', 'UTC') + number * 600, toDate('2026-03-08'),
			       toDecimal64(1.5, 4), 1, 'USD', 1, 1, toFixedString(toString(number % 3), 32), `+insertedAt+`
			FROM system.numbers LIMIT `+strconv.Itoa(n))
		if err != nil {
			t.Fatal(err)
		}
	}
	insert(20, "now() - 60") // before the view: only the backfill can count these
	if err := migrations.Migrate(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	insert(10, "now()") // after: the view counts them
	var events, people uint64
	q := `SELECT countMerge(events_state), uniqIfMerge(people_state) FROM ` + cfg.Database + `.pixel_rollups_15m`
	if err := conn.QueryRow(ctx, q).Scan(&events, &people); err != nil {
		t.Fatal(err)
	}
	if events != 30 || people != 3 {
		t.Fatalf("pixel_rollups_15m holds %d events and %d people, want 30 and 3", events, people)
	}
}
