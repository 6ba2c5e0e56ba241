package migrations

import (
	"bufio"
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"svc/lib/chpool"
)

// Migration files live in migrations/ as NNNN_name.sql and are applied in version order.
// Each file holds one or more statements; a statement ends with a line whose text ends
// in ";". Lines starting with "--" are comments; a comment "-- cluster: shard_by=EXPR"
// before a CREATE TABLE sets the sharding key of its Distributed table in the clustered
// variant (default rand()). {db} stands for the database name.
//
// Every statement must be idempotent: CREATE ... IF NOT EXISTS, DROP ... IF EXISTS, or
// a statement whose repeat fails with an "already exists" error (alreadyExists), which the
// runner treats as success. ClickHouse has no locks, so this is what makes concurrent
// runners safe: each runs every statement not yet recorded, and both succeed.
//
//go:embed *.sql
var migrationFS embed.FS

// MigrationsTable records applied migrations: version, name, checksum of the file.
const MigrationsTable = "schema_migrations"

// Migration is one embedded migration file.
type Migration struct {
	Version  int
	Name     string // file name without the .sql suffix
	SQL      string
	Checksum string // hex SHA-256 of the file
}

var fileRE = regexp.MustCompile(`^(\d{4})_[a-z0-9_]+\.sql$`)

// Migrations returns the embedded migrations in version order. It fails on a badly
// named file or a duplicate version.
func Migrations() ([]Migration, error) {
	return loadMigrations(migrationFS, ".")
}

func loadMigrations(fsys fs.FS, dir string) ([]Migration, error) {
	ents, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, err
	}
	var ms []Migration
	seen := map[int]string{}
	for _, e := range ents {
		m := fileRE.FindStringSubmatch(e.Name())
		if m == nil {
			return nil, fmt.Errorf("migration file %q: want NNNN_lower_snake.sql", e.Name())
		}
		v, _ := strconv.Atoi(m[1])
		if prev, ok := seen[v]; ok {
			return nil, fmt.Errorf("migration version %04d used twice: %s and %s", v, prev, e.Name())
		}
		seen[v] = e.Name()
		b, err := fs.ReadFile(fsys, path.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		sum := sha256.Sum256(b)
		ms = append(ms, Migration{
			Version:  v,
			Name:     strings.TrimSuffix(e.Name(), ".sql"),
			SQL:      string(b),
			Checksum: hex.EncodeToString(sum[:]),
		})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].Version < ms[j].Version })
	return ms, nil
}

// Statement is one SQL statement of a migration, before {db} substitution.
type Statement struct {
	SQL     string // without comments and without the final ";"
	ShardBy string // from a "-- cluster: shard_by=EXPR" comment, or ""
}

// SplitStatements splits a migration file into statements (see the file format above).
func SplitStatements(sql string) []Statement {
	var out []Statement
	var cur []string
	shard := ""
	sc := bufio.NewScanner(strings.NewReader(sql))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), " \t\r")
		t := strings.TrimSpace(line)
		if strings.HasPrefix(t, "--") {
			if rest, ok := strings.CutPrefix(strings.TrimSpace(t[2:]), "cluster: shard_by="); ok {
				shard = strings.TrimSpace(rest)
			}
			continue
		}
		end := strings.HasSuffix(t, ";")
		if end {
			line = strings.TrimSuffix(line, ";")
		}
		if strings.TrimSpace(line) != "" {
			cur = append(cur, line)
		}
		if end {
			if len(cur) > 0 {
				out = append(out, Statement{SQL: strings.Join(cur, "\n"), ShardBy: shard})
			}
			cur, shard = nil, ""
		}
	}
	if len(cur) > 0 {
		out = append(out, Statement{SQL: strings.Join(cur, "\n"), ShardBy: shard})
	}
	return out
}

// bootstrap creates the database and the migrations table; it runs before every
// migration run and is not itself recorded.
const bootstrapSQL = `
CREATE DATABASE IF NOT EXISTS {db}
;
CREATE TABLE IF NOT EXISTS {db}.` + MigrationsTable + `
(
    version    UInt32,
    name       String,
    checksum   String,
    applied_at DateTime('UTC'),
    applied_by String
)
ENGINE = ReplacingMergeTree
ORDER BY version
;
`

// Step is a migration rendered for one database (and, optionally, one cluster).
type Step struct {
	Migration
	Statements []string // ready to execute
}

// Plan renders the bootstrap statements and every migration for database db. With a
// non-empty cluster it renders the clustered variant (see Clustered).
func Plan(ms []Migration, db, cluster string) (bootstrap []string, steps []Step, err error) {
	r := newRenderer(db, cluster)
	if bootstrap, err = r.render(SplitStatements(bootstrapSQL)); err != nil {
		return nil, nil, fmt.Errorf("bootstrap: %w", err)
	}
	for _, m := range ms {
		st, err := r.render(SplitStatements(m.SQL))
		if err != nil {
			return nil, nil, fmt.Errorf("migration %s: %w", m.Name, err)
		}
		steps = append(steps, Step{Migration: m, Statements: st})
	}
	return bootstrap, steps, nil
}

// SQLScript renders the whole schema (bootstrap and every migration) for database db as
// one script for clickhouse-client --multiquery; cluster "" gives the single-node
// schema, otherwise the clustered variant. The deploy tooling calls this.
func SQLScript(db, cluster string) (string, error) {
	ms, err := Migrations()
	if err != nil {
		return "", err
	}
	boot, steps, err := Plan(ms, db, cluster)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for _, s := range boot {
		b.WriteString(s + ";\n\n")
	}
	for _, st := range steps {
		fmt.Fprintf(&b, "-- %s\n", st.Name)
		for _, s := range st.Statements {
			b.WriteString(s + ";\n\n")
		}
	}
	return b.String(), nil
}

// alreadyExists reports whether err is what a repeated idempotent DDL statement may
// return when another runner (or an earlier run that did not get to record the
// migration) created the object a moment earlier: TABLE_ALREADY_EXISTS (57),
// DATABASE_ALREADY_EXISTS (82), DUPLICATE_COLUMN (15); and ClickHouse 18.16's answer to
// ADD COLUMN of a column that exists, ILLEGAL_COLUMN (44) "column with this name already
// exists" (18.16 has no ADD COLUMN IF NOT EXISTS).
func alreadyExists(err error) bool {
	var ex *clickhouse.Exception
	if !errors.As(err, &ex) {
		return false
	}
	switch ex.Code {
	case 57, 82, 15:
		return true
	case 44:
		return strings.Contains(ex.Message, "column with this name already exists")
	}
	return false
}

// Migrate creates c.Database if missing and applies every embedded migration not yet
// recorded in schema_migrations, in order. It is safe to run twice and from several
// processes at once. It fails if a recorded migration's file has changed since.
func Migrate(ctx context.Context, c chpool.Config) error {
	if err := c.Validate(); err != nil {
		return err
	}
	ms, err := Migrations()
	if err != nil {
		return err
	}
	boot, steps, err := Plan(ms, c.Database, c.Cluster)
	if err != nil {
		return err
	}
	conn, err := chpool.OpenDatabase(ctx, c, "default")
	if err != nil {
		return err
	}
	defer conn.Close()
	for _, s := range boot {
		if err := execDDL(ctx, conn, s); err != nil {
			return err
		}
	}
	applied, err := appliedMigrations(ctx, conn, c.Database)
	if err != nil {
		return err
	}
	for _, st := range steps {
		if sum, ok := applied[uint32(st.Version)]; ok {
			if sum != st.Checksum {
				return fmt.Errorf("migration %s was applied with checksum %s but the file now has %s: add a new migration instead of editing an applied one", st.Name, sum, st.Checksum)
			}
			continue
		}
		if err := applyStep(ctx, conn, c.Database, st); err != nil {
			return err
		}
	}
	return nil
}

func applyStep(ctx context.Context, conn driver.Conn, db string, st Step) error {
	for _, s := range st.Statements {
		if err := execDDL(ctx, conn, s); err != nil {
			return fmt.Errorf("migration %s: %w", st.Name, err)
		}
	}
	host, _ := os.Hostname()
	b, err := conn.PrepareBatch(ctx, "INSERT INTO "+db+"."+MigrationsTable+
		" (version, name, checksum, applied_at, applied_by)")
	if err == nil {
		err = b.Append(uint32(st.Version), st.Name, st.Checksum, time.Now().UTC(), fmt.Sprintf("%s:%d", host, os.Getpid()))
		if err == nil {
			err = b.Send()
		} else {
			_ = b.Abort()
		}
	}
	if err != nil {
		return fmt.Errorf("record migration %s: %w", st.Name, err)
	}
	return nil
}

// execDDL runs one idempotent statement, retrying twice after a short pause (a busy
// server or concurrent DDL on 18.16 can fail a statement that succeeds on repeat).
func execDDL(ctx context.Context, conn driver.Conn, stmt string) error {
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return fmt.Errorf("%w (after: %v)\nstatement:\n%s", ctx.Err(), err, stmt)
			case <-time.After(time.Duration(attempt) * 200 * time.Millisecond):
			}
		}
		err = conn.Exec(ctx, stmt)
		if err == nil || alreadyExists(err) {
			return nil
		}
	}
	return fmt.Errorf("%w\nstatement:\n%s", err, stmt)
}

// appliedMigrations returns version → checksum of recorded migrations.
func appliedMigrations(ctx context.Context, conn driver.Conn, db string) (map[uint32]string, error) {
	rows, err := conn.Query(ctx, "SELECT version, any(checksum) FROM "+db+"."+MigrationsTable+" GROUP BY version")
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", MigrationsTable, err)
	}
	defer rows.Close()
	out := map[uint32]string{}
	for rows.Next() {
		var v uint32
		var sum string
		if err := rows.Scan(&v, &sum); err != nil {
			return nil, err
		}
		out[v] = sum
	}
	return out, rows.Err()
}
