package rollups_test

import (
	"context"
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"svc/schema/chtest"
	"svc/schema/migrations"
	"svc/schema/rollups"
)

// TestEveryEventsViewIsARollupTable: every materialized view over events in the
// migrations has its table in rollups.RollupTables, so a rebuild (privacy erasure)
// covers it.
func TestEveryEventsViewIsARollupTable(t *testing.T) {
	ms, err := migrations.Migrations()
	if err != nil {
		t.Fatal(err)
	}
	mvRE := regexp.MustCompile(`(?is)CREATE\s+MATERIALIZED\s+VIEW\s+IF\s+NOT\s+EXISTS\s+\{db\}\.(\w+)\s+TO\s+\{db\}\.(\w+)\s+AS\s+.*\bFROM\s+\{db\}\.events\b`)
	known := map[string]string{}
	for _, rt := range rollups.RollupTables {
		known[rt.View] = rt.Name
	}
	found := 0
	for _, m := range ms {
		for _, st := range migrations.SplitStatements(m.SQL) {
			g := mvRE.FindStringSubmatch(st.SQL)
			if g == nil {
				continue
			}
			found++
			if known[g[1]] != g[2] {
				t.Errorf("migration %s: view %s writes %s, which rollups.RollupTables does not list", m.Name, g[1], g[2])
			}
		}
	}
	if found != len(rollups.RollupTables) {
		t.Errorf("%d views over events in the migrations, %d rollup tables listed", found, len(rollups.RollupTables))
	}
}

// TestRollupTablesMatchTheirViews: for every rollup table, rebuilding all of it from
// events with RebuildSQL gives exactly the rows its view wrote, column by column.
func TestRollupTablesMatchTheirViews(t *testing.T) {
	cfg, conn := chtest.NewDB(t)
	ctx := context.Background()
	// 2,000 events over 3 workspaces, 2 environments, 4 pixels, 5 days, 3 names,
	// 3 currencies, with and without consent and email, 50 people.
	seed := `INSERT INTO events (workspace_id, pixel_id, sandbox, key_id, event_id, event_name, occurred_at, event_date,
		value, has_value, currency, consent, has_email, email_sha256, request_id, received_at, inserted_at,
		kafka_topic, kafka_partition, kafka_offset, batch_index)
		SELECT toUUID(concat('00000000-0000-0000-0000-00000000000', toString(number % 3))),
		       toUUID(concat('10000000-0000-0000-0000-00000000000', toString(number % 4))), number % 2,
		       toUUID('22222222-2222-2222-2222-222222222222'), generateUUIDv4(),
		       arrayElement(['purchase', 'lead', 'view'], number % 3 + 1),
		       toDateTime('2026-11-01 00:00:00', 'UTC') + (number % 5) * 86400 + number,
		       toDate('2026-11-01') + number % 5,
		       toDecimal64(number % 97, 4) / 4, number % 2, arrayElement(['EUR', 'USD', ''], number % 3 + 1),
		       number % 5 != 0, number % 7 != 0, toFixedString(unhex(hex(sipHash128(toString(number % 50)))), 32),
		       'req_1', now(), now(), 'events.v1', 0, number, 0
		FROM system.numbers LIMIT 2000`
	if err := conn.Exec(ctx, seed); err != nil {
		t.Fatal(err)
	}
	for _, rt := range rollups.RollupTables {
		before := finalized(t, conn, cfg.Database, rt.Name)
		if len(before) < 10 {
			t.Fatalf("%s: only %d rows from the view", rt.Name, len(before))
		}
		if err := conn.Exec(ctx, "TRUNCATE TABLE "+cfg.Database+"."+rt.Name); err != nil {
			t.Fatal(err)
		}
		if err := conn.Exec(ctx, rt.RebuildSQL(cfg.Database, "1")); err != nil {
			t.Fatalf("%s: %v", rt.Name, err)
		}
		after := finalized(t, conn, cfg.Database, rt.Name)
		if !reflect.DeepEqual(before, after) {
			t.Fatalf("%s: rebuilt rows differ from the view's:\nview:    %v\nrebuilt: %v", rt.Name, before[:3], after[:min(3, len(after))])
		}
	}
}

// finalized reads every row of an aggregating table with its states merged (each
// AggregateFunction(f, …) column read as fMerge), grouped by the other columns, in key
// order; sums of Decimals as numbers (chtest.Table), not toString's text, which differs
// between versions (12.5000 on 18.16, 12.5 on 26.x).
func finalized(t *testing.T, conn driver.Conn, db, table string) [][]string {
	t.Helper()
	ctx := context.Background()
	rows, err := conn.Query(ctx, "SELECT name, type FROM system.columns WHERE database = ? AND table = ?", db, table)
	if err != nil {
		t.Fatal(err)
	}
	var keys, exprs []string
	for rows.Next() {
		var name, typ string
		if err := rows.Scan(&name, &typ); err != nil {
			t.Fatal(err)
		}
		if f, ok := strings.CutPrefix(typ, "AggregateFunction("); ok {
			f = f[:strings.IndexAny(f, ",)")]
			exprs = append(exprs, fmt.Sprintf("%sMerge(%s)", strings.TrimSpace(f), name))
			continue
		}
		keys = append(keys, name)
		exprs = append(exprs, name)
	}
	rows.Close()
	q := "SELECT " + strings.Join(exprs, ", ") + " FROM " + db + "." + table + " GROUP BY " + strings.Join(keys, ", ") +
		" ORDER BY " + strings.Join(keys, ", ")
	got, err := chtest.QueryTable(ctx, conn, q)
	if err != nil {
		t.Fatalf("%v\n%s", err, q)
	}
	return got.Rows
}
