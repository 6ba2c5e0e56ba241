package chpool_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/ClickHouse/clickhouse-go/v2"

	"svc/lib/chpool"
	"svc/schema/chtest"
)

func render(s clickhouse.Settings) string {
	var out []string
	for k, v := range s {
		out = append(out, fmt.Sprintf("%s=%v", k, v))
	}
	sort.Strings(out)
	return strings.Join(out, " ")
}

// QuerySettings sends each setting only to a server that knows it, and every one a
// server knows. The names each server knows are the answers of ProbeSQL on the servers
// themselves: 18.16 here (TestPoolSendsExactlyTheSettingsTheServerKnows), 26.7 through
// chDB (e2e/chdb_test.go).
func TestQuerySettingsPerServer(t *testing.T) {
	for _, c := range []struct {
		name  string
		known []string
		want  string
	}{
		{"18.16: no asynchronous inserts, no parallel INSERT SELECT",
			[]string{"insert_deduplicate", "insert_distributed_sync"},
			"insert_deduplicate=0 insert_distributed_sync=1 max_insert_block_size=16777216"},
		{"asynchronous inserts without 26.2's deduplicate_insert, the old name of the synchronous Distributed insert",
			[]string{"async_insert", "insert_deduplicate", "deduplicate_blocks_in_dependent_materialized_views",
				"parallel_distributed_insert_select", "insert_distributed_sync"},
			"async_insert=0 deduplicate_blocks_in_dependent_materialized_views=0 insert_deduplicate=0 " +
				"insert_distributed_sync=1 max_insert_block_size=16777216 parallel_distributed_insert_select=0"},
		{"26.2 on: deduplicate_insert overrides insert_deduplicate; both names of the Distributed setting",
			[]string{"async_insert", "insert_deduplicate", "deduplicate_insert", "deduplicate_insert_select",
				"deduplicate_blocks_in_dependent_materialized_views", "parallel_distributed_insert_select",
				"distributed_foreground_insert", "insert_distributed_sync"},
			"async_insert=0 deduplicate_blocks_in_dependent_materialized_views=0 deduplicate_insert=disable " +
				"deduplicate_insert_select=disable distributed_foreground_insert=1 insert_deduplicate=0 " +
				"max_insert_block_size=16777216 parallel_distributed_insert_select=0"},
	} {
		got, err := chpool.QuerySettings(c.known)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if render(got) != c.want {
			t.Errorf("%s:\n got  %s\n want %s", c.name, render(got), c.want)
		}
	}
	if _, err := chpool.QuerySettings([]string{"async_insert"}); err == nil {
		t.Error("a server without a synchronous Distributed insert was accepted")
	}
}

// changed returns the settings a query on conn runs with that differ from the server's
// defaults, as the query itself sees them.
func changed(t *testing.T, q string, scan func(q string) ([][2]string, error)) string {
	t.Helper()
	rows, err := scan(q)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range rows {
		out = append(out, r[0]+"="+r[1])
	}
	sort.Strings(out)
	return strings.Join(out, " ")
}

// Every query of a pool, an INSERT … SELECT included, runs with exactly the settings
// QuerySettings chose for the server's known settings: on 18.16 the two it knows and
// none it would refuse. Before the settings were chosen per server, the pool sent
// max_insert_block_size only and the consumer and the privacy rebuild added
// insert_distributed_sync themselves: this test failed with "the pool sends
// max_insert_block_size=16777216, want insert_deduplicate=0 insert_distributed_sync=1
// max_insert_block_size=16777216".
func TestPoolSendsExactlyTheSettingsTheServerKnows(t *testing.T) {
	_, conn := chtest.NewDB(t)
	ctx := context.Background() // no deadline: clickhouse-go would add max_execution_time
	sent, ok := chpool.SettingsOf(conn)
	if !ok {
		t.Fatal("chtest's connection is not a chpool pool")
	}
	rows, err := conn.Query(ctx, chpool.ProbeSQL())
	if err != nil {
		t.Fatal(err)
	}
	var known []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		known = append(known, n)
	}
	rows.Close()
	want, err := chpool.QuerySettings(known)
	if err != nil {
		t.Fatal(err)
	}
	if render(sent) != render(want) {
		t.Fatalf("the pool sends %s, want %s", render(sent), render(want))
	}
	scan := func(q string) ([][2]string, error) {
		rows, err := conn.Query(ctx, q)
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		var out [][2]string
		for rows.Next() {
			var r [2]string
			if err := rows.Scan(&r[0], &r[1]); err != nil {
				return nil, err
			}
			out = append(out, r)
		}
		return out, rows.Err()
	}
	// The server's own profile changes settings too (load_balancing, max_memory_usage):
	// look at those the pool may send.
	ours := "changed AND (name = 'max_insert_block_size' OR name IN (" + chpool.ProbeSQL() + "))"
	if got := changed(t, "SELECT name, value FROM system.settings WHERE "+ours, scan); got != render(want) {
		t.Errorf("a SELECT runs with %s, want %s", got, render(want))
	}
	// An INSERT … SELECT records the settings it runs with itself.
	if err := conn.Exec(ctx, "CREATE TABLE seen (name String, value String) ENGINE = Memory"); err != nil {
		t.Fatal(err)
	}
	if err := conn.Exec(ctx, "INSERT INTO seen (name, value) SELECT name, value FROM system.settings WHERE "+ours); err != nil {
		t.Fatal(err)
	}
	if got := changed(t, "SELECT name, value FROM seen", scan); got != render(want) {
		t.Errorf("an INSERT runs with %s, want %s", got, render(want))
	}
}
