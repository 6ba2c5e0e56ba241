package chtest

import (
	"context"
	"sync"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// Tap is a connection that records every statement it passes on to the connection it
// wraps (a real server's): its text and arguments, in order. A test hands it to the
// service's code in place of the pool and runs the statements the service sent on
// another server (chDB) as well. Batches (PrepareBatch) pass without a record.
type Tap struct {
	driver.Conn

	mu    sync.Mutex
	stmts []Statement
}

// Statement is one statement a Tap passed on.
type Statement struct {
	Exec bool // sent with Exec (answers nothing); else a query
	SQL  string
	Args []any
}

// Bound is s with its arguments bound (Bind).
func (s Statement) Bound() (string, error) { return Bind(s.SQL, s.Args...) }

// NewTap wraps conn.
func NewTap(conn driver.Conn) *Tap { return &Tap{Conn: conn} }

// Take returns the statements recorded since the last Take.
func (t *Tap) Take() []Statement {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := t.stmts
	t.stmts = nil
	return out
}

func (t *Tap) record(exec bool, q string, args []any) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.stmts = append(t.stmts, Statement{Exec: exec, SQL: q, Args: args})
}

func (t *Tap) Exec(ctx context.Context, q string, args ...any) error {
	t.record(true, q, args)
	return t.Conn.Exec(ctx, q, args...)
}

func (t *Tap) Query(ctx context.Context, q string, args ...any) (driver.Rows, error) {
	t.record(false, q, args)
	return t.Conn.Query(ctx, q, args...)
}

func (t *Tap) QueryRow(ctx context.Context, q string, args ...any) driver.Row {
	t.record(false, q, args)
	return t.Conn.QueryRow(ctx, q, args...)
}

func (t *Tap) Select(ctx context.Context, dest any, q string, args ...any) error {
	t.record(false, q, args)
	return t.Conn.Select(ctx, dest, q, args...)
}
