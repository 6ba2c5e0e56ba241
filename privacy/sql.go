package privacy

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/google/uuid"

	"svc/schema"
)

// Every statement here is rendered from typed values only (UUIDs, digests as \x
// escapes, dates, integers): nothing a client sent reaches SQL as text.

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
	return "ALTER TABLE " + t.db + "." + name + schema.LocalSuffix + " ON CLUSTER " + t.cluster
}

// scope is the identities of a batch of erasures, merged by (workspace, environment,
// digest): the latest request time and any suppression win.
type scope map[scopeKey]Identity

type scopeKey struct {
	ws      uuid.UUID
	sandbox bool
	email   [32]byte
}

func (s scope) add(e *Erasure) {
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
// the identities and received at or before its cutoff.
func (s scope) cond() string {
	keys := make([]string, 0, len(s))
	cut := make([]string, 0, 2*len(s)+1)
	for k, id := range s {
		tuple := "(" + uuidLit(k.ws) + ", " + u8Lit(k.sandbox) + ", " + digestLit(k.email) + ")"
		keys = append(keys, tuple)
		at := id.RequestedAt
		if id.Suppress {
			at = farFuture
		}
		cut = append(cut, "(workspace_id, sandbox, email_sha256) = "+tuple, "toDateTime("+strconv.FormatInt(at, 10)+")")
	}
	cut = append(cut, "toDateTime(0)")
	return "has_email = 1 AND (workspace_id, sandbox, email_sha256) IN (" + strings.Join(keys, ", ") +
		") AND received_at <= multiIf(" + strings.Join(cut, ", ") + ")"
}

// slice is one (workspace, environment, pixel, day) of the rollups.
type slice struct {
	ws      uuid.UUID
	sandbox bool
	pixel   uuid.UUID
	day     time.Time
}

// slicesCond selects rows of the given slices, with day the expression of a row's
// UTC day (event_date on events, RollupTable.Day on a rollup table).
func slicesCond(ss []slice, day string) string {
	ts := make([]string, len(ss))
	for i, s := range ss {
		ts[i] = "(" + uuidLit(s.ws) + ", " + u8Lit(s.sandbox) + ", " + uuidLit(s.pixel) + ", " + dateLit(s.day) + ")"
	}
	return "(workspace_id, sandbox, pixel_id, " + day + ") IN (" + strings.Join(ts, ", ") + ")"
}

func count(ctx context.Context, conn driver.Conn, q string) (uint64, error) {
	var n uint64
	if err := conn.QueryRow(ctx, q).Scan(&n); err != nil {
		return 0, fmt.Errorf("privacy: %w\n%s", err, q)
	}
	return n, nil
}

// mutate runs an ALTER … UPDATE/DELETE (asynchronous on ClickHouse 18.16: the
// statement returns once the mutation is queued) and waits until the count query,
// which selects what the mutation must change, answers 0 through the plain
// (Distributed, when clustered) table: that is the mutation done on every shard.
func mutate(ctx context.Context, conn driver.Conn, alter, remaining string, poll time.Duration) error {
	if err := conn.Exec(ctx, alter); err != nil {
		return fmt.Errorf("privacy: %w\n%s", err, alter)
	}
	for {
		n, err := count(ctx, conn, remaining)
		if err != nil {
			return err
		}
		if n == 0 {
			return nil
		}
		if !sleep(ctx, poll) {
			return fmt.Errorf("privacy: mutation not done (%d rows left): %w\n%s", n, ctx.Err(), alter)
		}
	}
}
