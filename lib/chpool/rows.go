package chpool

import (
	"context"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// Row is one row of a query's answer, to scan.
type Row interface{ Scan(dest ...any) error }

// EachRow runs query with args on conn and calls row for each row of the answer, in
// order; the first error (the query's, a row's, or the answer's) stops it and is
// returned.
func EachRow(ctx context.Context, conn driver.Conn, query string, args []any, row func(Row) error) error {
	rows, err := conn.Query(ctx, query, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := row(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}
