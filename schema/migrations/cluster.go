package migrations

import (
	"fmt"
	"regexp"
	"strings"
)

// The clustered variant is generated from the same migration files by rewriting each
// statement (see Clustered for the rules). A statement kind the rewriter does not know
// is an error, so a new migration that cannot be clustered fails the schema tests.

var (
	reCreateDB    = regexp.MustCompile(`(?is)^\s*CREATE\s+DATABASE\s+IF\s+NOT\s+EXISTS\s+\{db\}\s*$`)
	reCreateTable = regexp.MustCompile(`(?is)^\s*CREATE\s+TABLE\s+IF\s+NOT\s+EXISTS\s+\{db\}\.(\w+)\s*(\(.*\))\s*ENGINE\s*=\s*(\w*MergeTree)\s*(?:\(([^)]*)\))?(.*)$`)
	reCreateMV    = regexp.MustCompile(`(?is)^\s*CREATE\s+MATERIALIZED\s+VIEW\s+IF\s+NOT\s+EXISTS\s+\{db\}\.(\w+)\s+TO\s+\{db\}\.(\w+)\s+AS\s+(.*)$`)
	reCreateView  = regexp.MustCompile(`(?is)^\s*CREATE\s+VIEW\s+IF\s+NOT\s+EXISTS\s+\{db\}\.(\w+)\s+AS\s+(.*)$`)
	reAlter       = regexp.MustCompile(`(?is)^\s*ALTER\s+TABLE\s+\{db\}\.(\w+)\s+(.*)$`)
	reDrop        = regexp.MustCompile(`(?is)^\s*DROP\s+(TABLE|VIEW)\s+IF\s+EXISTS\s+\{db\}\.(\w+)\s*$`)
	reTableRef    = regexp.MustCompile(`\{db\}\.(\w+)\b`)
	reInsert      = regexp.MustCompile(`(?is)^\s*INSERT\s+INTO\s+\{db\}\.\w+\s+SELECT\s`)
)

// LocalSuffix names the per-shard ReplicatedMergeTree table behind each Distributed
// table in the clustered variant.
const LocalSuffix = "_local"

type renderer struct {
	db, cluster string
	local       map[string]bool // MergeTree-family tables seen so far
}

func newRenderer(db, cluster string) *renderer {
	return &renderer{db: db, cluster: cluster, local: map[string]bool{}}
}

func (r *renderer) render(stmts []Statement) ([]string, error) {
	var out []string
	for _, s := range stmts {
		if r.cluster == "" {
			out = append(out, r.subst(s.SQL))
			continue
		}
		cs, err := r.clustered(s)
		if err != nil {
			return nil, err
		}
		for _, c := range cs {
			out = append(out, r.subst(c))
		}
	}
	return out, nil
}

func (r *renderer) subst(sql string) string { return strings.ReplaceAll(sql, "{db}", r.db) }

// Clustered rewrites one single-node statement into its clustered form:
//
//   - CREATE DATABASE: adds ON CLUSTER.
//   - CREATE TABLE t ... ENGINE = XMergeTree(args): becomes t_local ON CLUSTER with
//     ENGINE = ReplicatedXMergeTree('/clickhouse/tables/{shard}/<db>/t_local',
//     '{replica}', args), plus t ON CLUSTER AS t_local ENGINE = Distributed(cluster,
//     db, t_local, shard_by) (shard_by from the "-- cluster: shard_by=" comment, else
//     rand()). {shard} and {replica} are the servers' macros.
//   - CREATE MATERIALIZED VIEW v TO t AS SELECT ... FROM s: ON CLUSTER, and every
//     MergeTree table it names becomes its _local table, so that each shard rolls up
//     its own rows.
//   - CREATE VIEW: ON CLUSTER; it reads the Distributed tables.
//   - ALTER TABLE t: applied ON CLUSTER to t_local, and to t as well for column changes.
//   - DROP TABLE|VIEW IF EXISTS t: ON CLUSTER, and t_local too for a MergeTree table.
//   - INSERT INTO t SELECT ... (a backfill): unchanged. It runs once, on the node the
//     runner is connected to, and reads and writes the Distributed tables.
func (r *renderer) clustered(s Statement) ([]string, error) {
	oc := " ON CLUSTER " + r.cluster
	if reCreateDB.MatchString(s.SQL) {
		return []string{"CREATE DATABASE IF NOT EXISTS {db}" + oc}, nil
	}
	if m := reCreateTable.FindStringSubmatch(s.SQL); m != nil {
		name, cols, engine, args, rest := m[1], m[2], m[3], strings.TrimSpace(m[4]), m[5]
		r.local[name] = true
		ln := name + LocalSuffix
		params := fmt.Sprintf("'/clickhouse/tables/{shard}/{db}/%s', '{replica}'", ln)
		if args != "" {
			params += ", " + args
		}
		shard := shardKey(s.ShardBy)
		return []string{
			fmt.Sprintf("CREATE TABLE IF NOT EXISTS {db}.%s%s\n%s\nENGINE = Replicated%s(%s)\n%s", ln, oc, cols, engine, params, strings.TrimSpace(rest)),
			fmt.Sprintf("CREATE TABLE IF NOT EXISTS {db}.%s%s AS {db}.%s\nENGINE = Distributed(%s, '{db}', '%s', %s)", name, oc, ln, r.cluster, ln, shard),
		}, nil
	}
	if m := reCreateMV.FindStringSubmatch(s.SQL); m != nil {
		return []string{fmt.Sprintf("CREATE MATERIALIZED VIEW IF NOT EXISTS {db}.%s%s\nTO {db}.%s\nAS %s",
			m[1], oc, r.localName(m[2]), r.localRefs(m[3]))}, nil
	}
	if m := reCreateView.FindStringSubmatch(s.SQL); m != nil {
		return []string{fmt.Sprintf("CREATE VIEW IF NOT EXISTS {db}.%s%s\nAS %s", m[1], oc, m[2])}, nil
	}
	if m := reAlter.FindStringSubmatch(s.SQL); m != nil {
		name, rest := m[1], m[2]
		if !r.local[name] {
			return []string{fmt.Sprintf("ALTER TABLE {db}.%s%s %s", name, oc, rest)}, nil
		}
		out := []string{fmt.Sprintf("ALTER TABLE {db}.%s%s%s %s", name, LocalSuffix, oc, rest)}
		if isColumnChange(rest) {
			out = append(out, fmt.Sprintf("ALTER TABLE {db}.%s%s %s", name, oc, rest))
		}
		return out, nil
	}
	if m := reDrop.FindStringSubmatch(s.SQL); m != nil {
		out := []string{fmt.Sprintf("DROP %s IF EXISTS {db}.%s%s", m[1], m[2], oc)}
		if r.local[m[2]] {
			out = append(out, fmt.Sprintf("DROP TABLE IF EXISTS {db}.%s%s%s", m[2], LocalSuffix, oc))
		}
		return out, nil
	}
	if reInsert.MatchString(s.SQL) {
		return []string{s.SQL}, nil
	}
	return nil, fmt.Errorf("clustered variant: statement kind not supported (want CREATE DATABASE|TABLE|MATERIALIZED VIEW ... TO|VIEW IF NOT EXISTS {db}.x, ALTER TABLE {db}.x, DROP TABLE|VIEW IF EXISTS {db}.x, INSERT INTO {db}.x SELECT):\n%s", s.SQL)
}

func (r *renderer) localName(t string) string {
	if r.local[t] {
		return t + LocalSuffix
	}
	return t
}

func (r *renderer) localRefs(sql string) string {
	return reTableRef.ReplaceAllStringFunc(sql, func(ref string) string {
		return "{db}." + r.localName(strings.TrimPrefix(ref, "{db}."))
	})
}

func isColumnChange(alter string) bool {
	u := strings.ToUpper(strings.TrimSpace(alter))
	for _, p := range []string{"ADD COLUMN", "DROP COLUMN", "MODIFY COLUMN", "COMMENT COLUMN"} {
		if strings.HasPrefix(u, p) {
			return true
		}
	}
	return false
}

// reHashOfColumn matches a hash function applied to one column: cityHash64(pixel_id).
var reHashOfColumn = regexp.MustCompile(`\b(cityHash64|sipHash64|intHash64)\((\w+)\)`)

// shardKey is the Distributed table's sharding expression for a "-- cluster: shard_by="
// value (rand() when there is none). A hash of one column hashes its text form:
// ClickHouse 18.16's hash functions refuse a UUID argument ("Unexpected type UUID of
// argument of function cityHash64"), which made every INSERT through such a Distributed
// table fail; toString works on 18.16 and current releases alike.
func shardKey(shardBy string) string {
	if shardBy == "" {
		return "rand()"
	}
	return reHashOfColumn.ReplaceAllString(shardBy, "$1(toString($2))")
}
