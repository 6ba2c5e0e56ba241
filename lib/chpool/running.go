package chpool

import (
	"context"
	"fmt"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// RunningQueries returns the ids of the queries conn's server runs now whose id starts
// with prefix. A query that a Distributed table forwards to this server runs under a
// query id of its own; it is reported under the id of the query that started it
// (initial_query_id), so a caller waiting for its own queries sees those parts too.
func RunningQueries(ctx context.Context, conn driver.Conn, prefix string) ([]string, error) {
	rows, err := conn.Query(ctx, "SELECT if(initial_query_id != '', initial_query_id, query_id) FROM system.processes "+
		"WHERE startsWith(query_id, ?) OR startsWith(initial_query_id, ?)", prefix, prefix)
	if err != nil {
		return nil, fmt.Errorf("list running queries: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		out = append(out, id)
	}
	return out, rows.Err()
}

// UInt8 is b as ClickHouse stores a flag (UInt8 0 or 1; 18.16 has no Bool type).
func UInt8(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}
