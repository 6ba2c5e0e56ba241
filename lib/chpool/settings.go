package chpool

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// The settings every query of a pool carries, and so every INSERT the service makes
// (DESIGN.md, "Exactly once: the argument"). Each is sent only to a server that knows
// it: clickhouse-go marks every setting important, and a server refuses an important
// setting it does not know (18.16 refuses any unknown setting). Which ones a server
// knows is read from its system.settings when the pool opens (probeSQL).
//
// What each one is for:
//
//   - async_insert = 0: an INSERT is written before it returns, and runs in
//     system.processes until then. With asynchronous inserts (the default from 26.2
//     on) the server may queue the rows and write them after the client gave up and
//     after the query left system.processes, which the consumer's read-back and the
//     privacy fence look at.
//   - insert_deduplicate = 0, deduplicate_insert = 'disable' (26.2 on: it overrides
//     insert_deduplicate), deduplicate_insert_select = 'disable' (the same for INSERT …
//     SELECT), deduplicate_blocks_in_dependent_materialized_views = 0: a Replicated
//     table of the clustered schema never drops a block because an identical one was
//     inserted before. The single-node schema (plain MergeTree) has no deduplication,
//     and no argument of the service relies on it; a privacy rebuild that re-inserts
//     the block it inserted before (a resumed run) must land.
//   - parallel_distributed_insert_select = 0: an INSERT … SELECT from a Distributed
//     table into another runs on the server it was sent to and places its rows by the
//     target's sharding key, as on 18.16 (from 25.7 on the default, 2, has every shard
//     insert its own rows into its own table).
//   - distributed_foreground_insert = 1, or by its older name insert_distributed_sync
//     (the only one 18.16 knows; 26.x keeps it as an alias): an INSERT into a
//     Distributed table returns once every shard has its rows.
//   - max_insert_block_size = 16M rows (every version): one batch INSERT stays one
//     block, and so one part per partition.

// setting is one setting of a pool's queries.
type setting struct {
	name  string
	value any
}

// guarded lists the settings sent to a server that knows them, in order. Of two
// names of one setting (the first the current one), only the first known is sent.
var guarded = [][]setting{
	{{"async_insert", 0}},
	{{"insert_deduplicate", 0}},
	{{"deduplicate_insert", "disable"}},
	{{"deduplicate_insert_select", "disable"}},
	{{"deduplicate_blocks_in_dependent_materialized_views", 0}},
	{{"parallel_distributed_insert_select", 0}},
	{{"distributed_foreground_insert", 1}, {"insert_distributed_sync", 1}},
}

// maxInsertBlockSize keeps one batch INSERT one block on the server.
const maxInsertBlockSize = 16 << 20

// probeSQL lists the settings of guarded that the server knows.
var probeSQL = func() string {
	var names []string
	for _, alts := range guarded {
		for _, s := range alts {
			names = append(names, "'"+s.name+"'")
		}
	}
	return "SELECT name FROM system.settings WHERE name IN (" + strings.Join(names, ", ") + ")"
}()

// ProbeSQL is the query Open runs to learn which of the settings it sends the server
// knows: it returns their names.
func ProbeSQL() string { return probeSQL }

// QuerySettings returns the settings a pool sends with every query to a server that
// knows the settings named in known (the answer to ProbeSQL). It fails when the server
// knows no name of the synchronous Distributed insert, which every supported version
// has.
func QuerySettings(known []string) (clickhouse.Settings, error) {
	has := map[string]bool{}
	for _, n := range known {
		has[n] = true
	}
	out := clickhouse.Settings{"max_insert_block_size": maxInsertBlockSize}
	for _, alts := range guarded {
		for _, s := range alts {
			if has[s.name] {
				out[s.name] = s.value
				break
			}
		}
	}
	if _, ok := out["distributed_foreground_insert"]; !ok {
		if _, ok := out["insert_distributed_sync"]; !ok {
			return nil, errors.New("the server knows neither distributed_foreground_insert nor insert_distributed_sync")
		}
	}
	return out, nil
}

// SettingsOf returns the settings a pool from Open sends with every query, or false
// for a connection Open did not return.
func SettingsOf(conn driver.Conn) (clickhouse.Settings, bool) {
	p, ok := conn.(pool)
	if !ok {
		return nil, false
	}
	out := clickhouse.Settings{}
	for k, v := range p.settings {
		out[k] = v
	}
	return out, true
}

// knownSettings runs ProbeSQL on conn.
func knownSettings(ctx context.Context, conn driver.Conn) ([]string, error) {
	rows, err := conn.Query(ctx, probeSQL)
	if err != nil {
		return nil, fmt.Errorf("read system.settings: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, rows.Err()
}
