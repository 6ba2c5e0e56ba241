package privacy

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/google/uuid"

	"svc/lib/process"
	"svc/schema/erasure"
	"svc/schema/migrations"
)

// Every statement here is rendered from typed values only (UUIDs, digests as \x
// escapes, dates, integers): nothing a client sent reaches SQL as text. Statements
// carry digests, so no error or log line quotes one: errors name tables, never
// statements; the worker's log line passes the server's text through logs.RedactSQL
// (a syntax error would quote the statement); and clickhouse-go's own lines, which
// under SVC_LOG_LEVEL=debug carry every statement, go through logs.ClickHouse, which
// redacts every SQL string literal.

func uuidLit(u uuid.UUID) string { return "toUUID('" + u.String() + "')" }

func digestLit(d [32]byte) string {
	var b strings.Builder
	b.Grow(2 + 4*32)
	b.WriteByte('\'')
	for _, c := range d {
		fmt.Fprintf(&b, "\\x%02x", c)
	}
	b.WriteByte('\'')
	return b.String()
}

func dateLit(t time.Time) string { return "toDate('" + t.UTC().Format("2006-01-02") + "')" }

func u8Lit(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// target names the tables a job works on: the plain names for reads and inserts, and
// for mutations the per-shard tables ON CLUSTER when the schema is clustered.
type target struct {
	db, cluster string
}

func (t target) table(name string) string { return t.db + "." + name }

// alter is the head of an ALTER of table name.
func (t target) alter(name string) string {
	if t.cluster == "" {
		return "ALTER TABLE " + t.db + "." + name
	}
	return "ALTER TABLE " + t.db + "." + name + migrations.LocalSuffix + " ON CLUSTER " + t.cluster
}

// scope is the identities of a batch of erasures, merged by (workspace, environment,
// digest): the latest request time and any suppression win.
type scope map[scopeKey]erasure.Identity

type scopeKey struct {
	ws      uuid.UUID
	sandbox bool
	email   [32]byte
}

func (s scope) add(e *erasure.Erasure) {
	k := scopeKey{e.Workspace, e.Sandbox, e.Email}
	id := e.Identity()
	if cur, ok := s[k]; ok {
		id.RequestedAt = max(id.RequestedAt, cur.RequestedAt)
		id.Suppress = id.Suppress || cur.Suppress
	}
	s[k] = id
}

// farFuture stands for "every event" in a cutoff (suppressed identities).
const farFuture = int64(4102444800) // 2100-01-01

// cond is the condition over events that selects the rows in scope: carrying one of
// the identities and received at or before its cutoff. The cutoff of a row is looked up
// with transform over a hash of its (digest, workspace, environment), computed by the
// server on both sides: one hash lookup per row, where a multiIf over a batch of 100
// identities took four to six times as long on 20 million rows (18.16). A hash
// collision could only pick another identity's cutoff for a row that already matched
// one of the identities exactly (the IN before it).
func (s scope) cond() string {
	keys := make([]string, 0, len(s))
	from := make([]string, 0, len(s))
	to := make([]string, 0, len(s))
	for k, id := range s {
		keys = append(keys, "("+uuidLit(k.ws)+", "+u8Lit(k.sandbox)+", "+digestLit(k.email)+")")
		from = append(from, "cityHash64(toFixedString("+digestLit(k.email)+", 32), toString("+uuidLit(k.ws)+"), toUInt8("+u8Lit(k.sandbox)+"))")
		at := id.RequestedAt
		if id.Suppress {
			at = farFuture
		}
		to = append(to, "toUInt32("+strconv.FormatInt(at, 10)+")")
	}
	return "has_email = 1 AND (workspace_id, sandbox, email_sha256) IN (" + strings.Join(keys, ", ") + ")" +
		" AND toUInt32(received_at) <= transform(cityHash64(email_sha256, toString(workspace_id), sandbox), [" +
		strings.Join(from, ", ") + "], [" + strings.Join(to, ", ") + "], toUInt32(0))"
}

// slicesCond selects rows of the given slices, with day the expression of a row's
// UTC day (event_date on events, RollupTable.Day on a rollup table).
func slicesCond(ss []erasure.Slice, day string) string {
	ts := make([]string, len(ss))
	for i, s := range ss {
		ts[i] = "(" + uuidLit(s.Workspace) + ", " + u8Lit(s.Sandbox) + ", " + uuidLit(s.Pixel) + ", " + dateLit(s.Date) + ")"
	}
	return "(workspace_id, sandbox, pixel_id, " + day + ") IN (" + strings.Join(ts, ", ") + ")"
}

func count(ctx context.Context, conn driver.Conn, q string) (uint64, error) {
	var n uint64
	if err := conn.QueryRow(ctx, q).Scan(&n); err != nil {
		return 0, fmt.Errorf("privacy: count: %w", err)
	}
	return n, nil
}

// mutation is one ALTER … UPDATE or DELETE, with the count of rows it must still
// change (read through the plain table: Distributed when clustered, so it covers
// every shard).
type mutation struct {
	table     string // the table mutated (plain name)
	alter     string
	remaining string
}

// errLateRows: rows the mutation must change appeared after it was queued (a mutation
// covers only the parts that existed then).
var errLateRows = errors.New("privacy: rows in scope arrived after the mutation was queued")

// mutate queues m (asynchronous on ClickHouse 18.16: the ALTER returns once the
// mutation is queued) and waits until m.remaining answers 0. If rows remain while the
// server has no unfinished mutation of the table, they arrived after the mutation:
// with requeue it queues m again, else it returns errLateRows for the caller to plan
// again (the late rows may be on days it did not plan).
func (t target) mutate(ctx context.Context, conn driver.Conn, m mutation, poll time.Duration, requeue bool) error {
	if err := conn.Exec(ctx, m.alter); err != nil {
		return fmt.Errorf("privacy: mutation of %s: %w", m.table, err)
	}
	queued := time.Now()
	for {
		n, err := count(ctx, conn, m.remaining)
		if err != nil {
			return err
		}
		if n == 0 {
			return nil
		}
		pending, err := t.pendingMutations(ctx, conn, m.table)
		if err != nil {
			return err
		}
		// Clustered, this server sees only its shard's mutations: give the others a
		// minute before calling what remains late.
		if pending == 0 && (t.cluster == "" || time.Since(queued) > time.Minute) {
			// Counted before the check: a mutation that finished in between leaves rows
			// only if they are late. Count once more to be sure.
			if n, err = count(ctx, conn, m.remaining); err != nil || n == 0 {
				return err
			}
			if !requeue {
				return errLateRows
			}
			if err := conn.Exec(ctx, m.alter); err != nil {
				return fmt.Errorf("privacy: mutation of %s: %w", m.table, err)
			}
			queued = time.Now()
		}
		if !process.Sleep(ctx, poll) {
			return fmt.Errorf("privacy: mutation of %s not done (%d rows left): %w", m.table, n, ctx.Err())
		}
	}
}

// pendingMutations counts the unfinished mutations of table on the server this
// connection reaches (its shard's replica when clustered).
func (t target) pendingMutations(ctx context.Context, conn driver.Conn, table string) (uint64, error) {
	if t.cluster != "" {
		table += migrations.LocalSuffix
	}
	var n uint64
	err := conn.QueryRow(ctx, "SELECT count() FROM system.mutations WHERE database = ? AND table = ? AND is_done = 0", t.db, table).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("privacy: read system.mutations: %w", err)
	}
	return n, nil
}
