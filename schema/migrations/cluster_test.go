package migrations

import (
	"context"
	"regexp"
	"strings"
	"testing"
)

// TestClusteredVariant checks the generated clustered SQL for every table of every
// migration: a Replicated engine on the _local table, a Distributed table under the
// plain name, ON CLUSTER everywhere, materialized views wired local to local.
func TestClusteredVariant(t *testing.T) {
	ms, err := Migrations()
	if err != nil {
		t.Fatal(err)
	}
	_, single, err := Plan(ms, "svc", "")
	if err != nil {
		t.Fatal(err)
	}
	boot, steps, err := Plan(ms, "svc", "prod")
	if err != nil {
		t.Fatal(err)
	}
	var all []string
	all = append(all, boot...)
	for _, st := range steps {
		all = append(all, st.Statements...)
	}
	joined := strings.Join(all, ";\n")
	for _, s := range all {
		if strings.HasPrefix(s, "INSERT INTO ") { // a backfill runs once, from the runner's node
			continue
		}
		if !strings.Contains(s, " ON CLUSTER prod") {
			t.Errorf("statement without ON CLUSTER:\n%s", s)
		}
	}
	// Every MergeTree table of the single-node schema.
	tableRE := regexp.MustCompile(`(?s)CREATE TABLE IF NOT EXISTS svc\.(\w+).*?ENGINE = (\w*MergeTree)`)
	var tables []string
	for _, st := range single {
		for _, s := range st.Statements {
			if m := tableRE.FindStringSubmatch(s); m != nil {
				tables = append(tables, m[1])
				local := "CREATE TABLE IF NOT EXISTS svc." + m[1] + "_local ON CLUSTER prod"
				if !strings.Contains(joined, local) {
					t.Errorf("%s: no %s", m[1], local)
				}
				eng := "ENGINE = Replicated" + m[2] + "('/clickhouse/tables/{shard}/svc/" + m[1] + "_local', '{replica}'"
				if !strings.Contains(joined, eng) {
					t.Errorf("%s: no %s", m[1], eng)
				}
				dist := "CREATE TABLE IF NOT EXISTS svc." + m[1] + " ON CLUSTER prod AS svc." + m[1] + "_local\nENGINE = Distributed(prod, 'svc', '" + m[1] + "_local', "
				if !strings.Contains(joined, dist) {
					t.Errorf("%s: no Distributed table %q", m[1], dist)
				}
			}
		}
	}
	if len(tables) < 2 {
		t.Fatalf("found tables %v, want at least events and pixel_rollups_daily", tables)
	}
	if regexp.MustCompile(`ENGINE = (\w*)MergeTree`).FindAllStringSubmatch(joined, -1) != nil {
		for _, m := range regexp.MustCompile(`ENGINE = (\w*)MergeTree`).FindAllStringSubmatch(joined, -1) {
			if !strings.HasPrefix(m[1], "Replicated") {
				t.Errorf("non-replicated engine left: %s", m[0])
			}
		}
	}
	if !strings.Contains(joined, "ENGINE = Distributed(prod, 'svc', 'events_local', kafka_partition)") {
		t.Error("events must be sharded by kafka_partition")
	}
	mv := "CREATE MATERIALIZED VIEW IF NOT EXISTS svc.pixel_rollups_daily_mv ON CLUSTER prod\nTO svc.pixel_rollups_daily_local"
	if !strings.Contains(joined, mv) || !strings.Contains(joined, "FROM svc.events_local") {
		t.Errorf("materialized view not wired local to local")
	}
	if !strings.Contains(joined, "FROM svc.pixel_rollups_daily\nGROUP BY") {
		t.Errorf("the analyst view must read the Distributed rollup table")
	}
	mv15 := "CREATE MATERIALIZED VIEW IF NOT EXISTS svc.pixel_rollups_15m_mv ON CLUSTER prod\nTO svc.pixel_rollups_15m_local"
	if !strings.Contains(joined, mv15) {
		t.Errorf("the 15-minute materialized view not wired local to local")
	}
	if !strings.Contains(joined, "ENGINE = Distributed(prod, 'svc', 'pixel_rollups_15m_local', cityHash64(toString(pixel_id)))") {
		t.Error("pixel_rollups_15m must be sharded by pixel")
	}
	// 18.16's hash functions refuse UUID arguments: no Distributed table may hash a bare
	// column (every INSERT through it would fail).
	if m := regexp.MustCompile(`Distributed\([^)]*cityHash64\(\w+\)\)`).FindString(joined); m != "" {
		t.Errorf("a Distributed table hashes a bare column: %s", m)
	}
	// The backfill reads and writes the Distributed tables, once, from the runner's node.
	backfill := regexp.MustCompile(`(?s)INSERT INTO svc\.pixel_rollups_15m\s+SELECT.*FROM svc\.events\s+WHERE inserted_at <.*database = 'svc' AND name = 'pixel_rollups_15m_mv'`)
	if !backfill.MatchString(joined) {
		t.Error("the 15-minute backfill is missing or rewritten")
	}
}

func TestClusteredRejectsUnknownStatements(t *testing.T) {
	r := newRenderer("svc", "prod")
	if _, err := r.render([]Statement{{SQL: "INSERT INTO {db}.x (a) VALUES (1)"}}); err == nil {
		t.Fatal("want an error for an INSERT that is not INSERT … SELECT")
	}
	if _, err := r.render([]Statement{{SQL: "UPDATE {db}.x SET a = 1"}}); err == nil {
		t.Fatal("want an error for a statement the rewriter does not know")
	}
	if _, err := r.render([]Statement{{SQL: "CREATE MATERIALIZED VIEW IF NOT EXISTS {db}.v ENGINE = MergeTree ORDER BY a AS SELECT 1"}}); err == nil {
		t.Fatal("want an error for a materialized view without TO")
	}
}

func TestSplitStatements(t *testing.T) {
	got := SplitStatements("-- c\n-- cluster: shard_by=x\nCREATE TABLE a (x UInt8)\nENGINE = MergeTree ORDER BY x\n;\n\nCREATE VIEW b AS SELECT 1;\n")
	if len(got) != 2 || got[0].ShardBy != "x" || got[1].ShardBy != "" || got[1].SQL != "CREATE VIEW b AS SELECT 1" {
		t.Fatalf("%+v", got)
	}
}

// svc migrate refuses a stray word ("svc migrate print", "svc migrate clustered") rather
// than applying the single-server schema.
func TestMigrateRefusesArguments(t *testing.T) {
	var out strings.Builder
	for _, args := range [][]string{{"print"}, {"clustered"}, {"--print", "extra"}} {
		if err := migrateMain(context.Background(), args, &out); err == nil || !strings.Contains(err.Error(), "no arguments") {
			t.Fatalf("svc migrate %v: %v, want a refusal", args, err)
		}
	}
}
