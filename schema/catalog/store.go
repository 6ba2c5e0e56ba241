package catalog

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/google/uuid"
)

// Cond is one filter of a list: SQL with one "?" for Arg, over a column of the table,
// e.g. {"status = ?", "live"} or {"plan_id = toUUID(?)", id.String()}. SQL is always a
// constant of this package or its callers, never built from input; Arg is bound.
type Cond struct {
	SQL string
	Arg any
}

// ListQuery selects one page of a list, in id order.
type ListQuery struct {
	Where []Cond
	// After resumes strictly after this id (keyset paging); uuid.Nil starts at the
	// beginning.
	After uuid.UUID
	// Offset skips rows after After (offset paging); 0 for none.
	Offset int
	Limit  int // 1..paging.MaxLimit+1
}

// table describes how one object kind is stored and scanned.
type table[T any] struct {
	name  string   // table name
	id    string   // id column
	scope []string // key columns before the id (besides workspace_id), e.g. plan_id
	cols  string   // select list in scan order (every column is of the table)
	scan  func(driver.Rows) (T, error)
}

// list returns a page of t in workspace. Key conditions go inside the FINAL subquery,
// every other condition outside it: filtering before the collapse could surface an
// older version of a row.
func list[T any](ctx context.Context, conn driver.Conn, t table[T], ws uuid.UUID, keyConds []Cond, q ListQuery) ([]T, error) {
	lim, err := limitClause(q.Limit, q.Offset)
	if err != nil {
		return nil, err
	}
	var b strings.Builder
	args := []any{ws.String()}
	fmt.Fprintf(&b, "SELECT %s FROM (SELECT %s FROM %s FINAL WHERE workspace_id = toUUID(?)", t.cols, t.cols, t.name)
	for _, c := range keyConds {
		b.WriteString(" AND " + c.SQL)
		args = append(args, c.Arg)
	}
	b.WriteString(") WHERE 1")
	for _, c := range q.Where {
		b.WriteString(" AND " + c.SQL)
		args = append(args, c.Arg)
	}
	if q.After != uuid.Nil {
		b.WriteString(" AND " + t.id + " > toUUID(?)")
		args = append(args, q.After.String())
	}
	b.WriteString(" ORDER BY " + t.id + lim)
	rows, err := conn.Query(ctx, b.String(), args...)
	if err != nil {
		return nil, fmt.Errorf("catalog: %s: %w", t.name, err)
	}
	defer rows.Close()
	out := make([]T, 0, min(q.Limit, 64))
	for rows.Next() {
		v, err := t.scan(rows)
		if err != nil {
			return nil, fmt.Errorf("catalog: %s: %w", t.name, err)
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// get returns the object id of t in workspace, or ErrNotFound.
func get[T any](ctx context.Context, conn driver.Conn, t table[T], ws, id uuid.UUID) (T, error) {
	var zero T
	rows, err := list(ctx, conn, t, ws, []Cond{{t.id + " = toUUID(?)", id.String()}}, ListQuery{Limit: 1})
	if err != nil {
		return zero, err
	}
	if len(rows) == 0 {
		return zero, ErrNotFound
	}
	return rows[0], nil
}

// insert writes n rows into table's cols in one INSERT; row(i) returns row i's values
// in column order.
func insert(ctx context.Context, conn driver.Conn, table string, cols []string, n int, row func(i int) []any) error {
	if n == 0 {
		return nil
	}
	b, err := conn.PrepareBatch(ctx, "INSERT INTO "+table+" ("+strings.Join(cols, ", ")+")")
	if err != nil {
		return fmt.Errorf("catalog: %s: %w", table, err)
	}
	defer b.Abort()
	for i := range n {
		if err := b.Append(row(i)...); err != nil {
			return fmt.Errorf("catalog: %s: %w", table, err)
		}
	}
	if err := b.Send(); err != nil {
		return fmt.Errorf("catalog: %s: %w", table, err)
	}
	return nil
}

// stamp returns the created and updated times of a write: created defaults to now.
func stamp(created time.Time) (time.Time, time.Time) {
	now := time.Now().UTC().Truncate(time.Second)
	if created.IsZero() {
		return now, now
	}
	return created.UTC().Truncate(time.Second), now
}

func day0(t time.Time) time.Time {
	if t.IsZero() {
		return minDay
	}
	return Day(t)
}
