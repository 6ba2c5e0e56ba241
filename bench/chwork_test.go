package bench

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"svc/schema/chtest"
)

// noLogs skips the test, or fails it under CI=true (where make test starts ClickHouse
// with deploy/local/clickhouse.xml), when the server keeps no part_log or query_log: a
// server started before that configuration had them.
func noLogs(t *testing.T, ch string) {
	why := "ClickHouse at " + ch + " keeps no part_log or query_log (started before deploy/local/clickhouse.xml had them: make stop; make services)"
	if os.Getenv("CI") == "true" {
		t.Fatal(why)
	}
	t.Skip(why)
}

// Two INSERTs into a scratch events table with a view, and a merge: part_log's parts and
// merges of that database, and query_log's INSERTs, are what the run's line says.
func TestClickHouseWorkFromTheServersLogs(t *testing.T) {
	ch := envOr("BENCH_CLICKHOUSE_HTTP", "http://127.0.0.1:8123")
	db := fmt.Sprintf("bench_chwork_%d", time.Now().UnixNano())
	hc, _ := hostClient(ch, 1, 30*time.Second)
	exec := func(q string) { // in the database, logged (log_queries), as the consumer's session would be
		t.Helper()
		req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
		defer fasthttp.ReleaseRequest(req)
		defer fasthttp.ReleaseResponse(resp)
		req.SetRequestURI(ch + "/?database=" + db + "&log_queries=1")
		req.Header.SetMethod("POST")
		req.SetBodyString(q)
		if err := hc.DoTimeout(req, resp, 30*time.Second); err != nil || resp.StatusCode() != 200 {
			t.Fatalf("%s: %v %d %s", q, err, resp.StatusCode(), firstLine(resp.Body()))
		}
	}
	if err := chExec(hc, ch, "CREATE DATABASE "+db, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = chExec(hc, ch, "DROP DATABASE IF EXISTS "+db, 30*time.Second) })
	exec("CREATE TABLE events (d Date, x UInt64) ENGINE = MergeTree PARTITION BY toYYYYMM(d) ORDER BY x")
	exec("CREATE TABLE sums (d Date, n UInt64) ENGINE = SummingMergeTree PARTITION BY toYYYYMM(d) ORDER BY d")
	exec("CREATE MATERIALIZED VIEW mv TO sums AS SELECT d, count() AS n FROM events GROUP BY d")
	// A table of another database, written after the start, is not the run's.
	other := db + "_other"
	if err := chExec(hc, ch, "CREATE DATABASE "+other, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = chExec(hc, ch, "DROP DATABASE IF EXISTS "+other, 30*time.Second) })
	if err := chExec(hc, ch, "CREATE TABLE "+other+".t (x UInt64) ENGINE = MergeTree ORDER BY x", 30*time.Second); err != nil {
		t.Fatal(err)
	}

	l, err := newClickHouseLogs(ch, db)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(1100 * time.Millisecond) // part_log's times are seconds: keep the setup before l.from
	exec("INSERT INTO events (d, x) VALUES ('2026-11-29', 1), ('2026-11-29', 2), ('2026-12-01', 3)")
	exec("INSERT INTO events (d, x) VALUES ('2026-11-29', 4)")
	exec("OPTIMIZE TABLE events FINAL")
	if err := chExec(hc, ch, "INSERT INTO "+other+".t VALUES (1)", 30*time.Second); err != nil {
		t.Fatal(err)
	}

	w, err := l.read()
	if err != nil {
		t.Fatal(err)
	}
	if w == nil || !w.QueryLog {
		noLogs(t, ch)
	}
	// One part of events and one of sums an INSERT and month: 2 + 2, then 1 + 1.
	if w.PartsWritten != 6 {
		t.Errorf("parts written %d, want 6 (events and the view's, this database only)", w.PartsWritten)
	}
	// OPTIMIZE … FINAL merges November's two parts; December's one part is merged too
	// on some releases (FINAL on a one-part partition), never more than that.
	if w.Merges < 1 || w.Merges > 2 || w.MergedRows < 4 || w.MergedRows > 5 {
		t.Errorf("merges %d of %d rows, want November's 4 rows in 1 merge (at most December's too)", w.Merges, w.MergedRows)
	}
	if !w.QueryLog || w.Inserts < 2 {
		t.Errorf("query_log %v, %d INSERTs into events, want at least this test's 2", w.QueryLog, w.Inserts)
	}
	if w.UserSeconds < 0 || w.SystemSeconds < 0 || w.InsertSeconds < 0 {
		t.Errorf("negative times: %+v", w)
	}
	line := w.Line(4)
	for _, want := range []string{fmt.Sprintf("%d INSERTs into events", w.Inserts), "6 parts written", fmt.Sprintf("%d merges of %d rows", w.Merges, w.MergedRows), "µs/event"} {
		if !strings.Contains(line, want) {
			t.Errorf("line %q lacks %q", line, want)
		}
	}
}

func TestClickHouseWorkLineWithoutQueryLog(t *testing.T) {
	w := &ClickHouseWork{PartsWritten: 340, Merges: 12, MergedRows: 5_000_000, MergeSeconds: 17.9}
	line := w.Line(15_000_000)
	want := "INSERTs not logged (SVC_CLICKHOUSE_QUERY_LOG=1), 340 parts written, 12 merges of 5000000 rows over 17.9 s (wall)"
	if line != want {
		t.Errorf("line\n%q, want\n%q", line, want)
	}
	w = &ClickHouseWork{QueryLog: true, Inserts: 85, InsertSeconds: 16.2, UserSeconds: 5.7, SystemSeconds: 5.5}
	if line, want := w.Line(15_000_000), "85 INSERTs into events over 16.2 s, their CPU 11.20 s (user 5.70, system 5.50; 0.75 µs/event)"; !strings.HasPrefix(line, want) {
		t.Errorf("line\n%q, want it to start\n%q", line, want)
	}
}

func TestStorageFromMountinfo(t *testing.T) {
	s, dev, ok := parseMountinfo("36 35 98:0 / /mnt/data rw,relatime shared:1 - ext4 /dev/vdb rw")
	if !ok || s.Mount != "/mnt/data" || s.Type != "ext4" || s.Device != "/dev/vdb" || dev != "98:0" {
		t.Errorf("parsed %+v %q %v", s, dev, ok)
	}
	if _, _, ok := parseMountinfo("36 35 98:0 / /mnt"); ok {
		t.Error("a line without the separator parsed")
	}
	for _, c := range []struct {
		mount, path string
		in          bool
	}{{"/", "/work", true}, {"/work", "/work", true}, {"/work", "/work/main", true}, {"/work", "/workshop", false}} {
		if got := containsPath(c.mount, c.path); got != c.in {
			t.Errorf("containsPath(%q, %q) = %v", c.mount, c.path, got)
		}
	}
	if (Storage{Mount: "/", Type: "ext4", Device: "/dev/vda", NoJournal: true}).String() != "ext4 on /dev/vda at / (no journal)" {
		t.Error("String")
	}
	// This machine's working directory is on some filesystem.
	if s, ok := DescribeStorage("."); !ok || s.Type == "" || s.Mount == "" {
		t.Errorf("DescribeStorage(.) = %+v, %v", s, ok)
	}
}

// The logs' shapes: 18.16's (type a number, ProfileEvents as Names and Values arrays, no
// database of a query, part_log's event types NEW_PART…) on the local server, and a
// current release's (26.x in chDB: Enum types, ProfileEvents a Map, current_database),
// each as tables of a scratch database standing for system's, with the same rows: the
// run's database's two INSERTs, one of another database, a query started but not
// finished, a SELECT, and rows from before the run; its parts and merge, and another
// database's part.
var logShapes = map[string][2]string{
	"18.16": {`CREATE TABLE %s.query_log (type UInt8, event_time DateTime, query String, query_duration_ms UInt64,
ProfileEvents Nested(Names String, Values UInt64), event_date Date MATERIALIZED toDate(event_time)) ENGINE = MergeTree ORDER BY event_time`,
		`CREATE TABLE %s.part_log (event_type Enum8('NEW_PART' = 1, 'MERGE_PARTS' = 2, 'DOWNLOAD_PART' = 3, 'REMOVE_PART' = 4, 'MUTATE_PART' = 5),
event_time DateTime, database String, duration_ms UInt64, rows UInt64, event_date Date MATERIALIZED toDate(event_time)) ENGINE = MergeTree ORDER BY event_time`},
	"current": {`CREATE TABLE %s.query_log (type Enum8('QueryStart' = 1, 'QueryFinish' = 2, 'ExceptionBeforeStart' = 3, 'ExceptionWhileProcessing' = 4),
event_time DateTime, query String, query_duration_ms UInt64, current_database String,
ProfileEvents Map(LowCardinality(String), UInt64), event_date Date MATERIALIZED toDate(event_time)) ENGINE = MergeTree ORDER BY event_time`,
		`CREATE TABLE %s.part_log (event_type Enum8('NewPart' = 1, 'MergeParts' = 2, 'DownloadPart' = 3, 'RemovePart' = 4, 'MutatePart' = 5, 'MovePart' = 6),
event_time DateTime, database String, duration_ms UInt64, rows UInt64, event_date Date MATERIALIZED toDate(event_time)) ENGINE = MergeTree ORDER BY event_time`},
}

// logRows fills the stand-in tables in database s: query_log rows as (type, age in
// seconds, query, duration ms, database, user µs, system µs).
func logRows(shape, s string) []string {
	type q struct {
		typ        int
		age        int
		query      string
		ms         int
		db         string
		user, syst int
	}
	qs := []q{
		{2, 0, "INSERT INTO events (a, b) VALUES", 1500, "db1", 2_000_000, 500_000},
		{2, 0, "INSERT INTO events (a) VALUES", 700, "db1", 1_000_000, 0},
		{2, 0, "INSERT INTO events (a) VALUES", 400, "db2", 300_000, 100_000},
		{1, 0, "INSERT INTO events (a) VALUES", 0, "db1", 0, 0},
		{2, 0, "SELECT count() FROM events", 90, "db1", 50_000, 0},
		{2, 1000, "INSERT INTO events (a) VALUES", 800, "db1", 9_000_000, 9_000_000},
	}
	var out []string
	for _, r := range qs {
		at := fmt.Sprintf("now() - %d", r.age)
		if shape == "18.16" {
			out = append(out, fmt.Sprintf(`INSERT INTO %s.query_log SELECT %d, %s, '%s', %d, ['OSCPUVirtualTimeMicroseconds', 'UserTimeMicroseconds', 'SystemTimeMicroseconds'], [%d, %d, %d]`,
				s, r.typ, at, r.query, r.ms, r.user+r.syst, r.user, r.syst))
		} else {
			out = append(out, fmt.Sprintf(`INSERT INTO %s.query_log SELECT %d, %s, '%s', %d, '%s', map('UserTimeMicroseconds', %d, 'SystemTimeMicroseconds', %d)`,
				s, r.typ, at, r.query, r.ms, r.db, r.user, r.syst))
		}
	}
	for _, p := range []struct {
		typ, age int
		db       string
		ms, rows int
	}{{1, 0, "db1", 10, 100}, {1, 0, "db1", 12, 200}, {1, 0, "db1", 9, 50}, {2, 0, "db1", 2500, 300}, {1, 0, "db2", 5, 7}, {2, 1000, "db1", 9000, 9000}} {
		out = append(out, fmt.Sprintf(`INSERT INTO %s.part_log SELECT %d, now() - %d, '%s', %d, %d`, s, p.typ, p.age, p.db, p.ms, p.rows))
	}
	return out
}

// checkLogShape reads the stand-in logs in database s for db1 through query and checks
// what they say: exact, and db2's INSERT counted only where the log names no database.
func checkLogShape(t *testing.T, shape, s string, exec func(string) error, query func(string) (string, error)) {
	t.Helper()
	for _, ddl := range logShapes[shape] {
		if err := exec(fmt.Sprintf(ddl, s)); err != nil {
			t.Fatal(err)
		}
	}
	l, err := startClickHouseLogs(query, s, "db1")
	if err != nil {
		t.Fatal(err)
	}
	for _, ins := range logRows(shape, s) {
		if err := exec(ins); err != nil {
			t.Fatal(err)
		}
	}
	w, err := l.read()
	if err != nil {
		t.Fatal(err)
	}
	want := ClickHouseWork{QueryLog: true, Inserts: 2, InsertSeconds: 2.2, UserSeconds: 3, SystemSeconds: 0.5,
		PartsWritten: 3, Merges: 1, MergeSeconds: 2.5, MergedRows: 300}
	if shape == "18.16" { // no database in its query_log: db2's INSERT is counted too
		want.Inserts, want.InsertSeconds, want.UserSeconds, want.SystemSeconds = 3, 2.6, 3.3, 0.6
	}
	if w == nil || *w != want {
		t.Errorf("%s: read %+v, want %+v", shape, w, want)
	}
}

func TestClickHouseWorkOn1816sLogs(t *testing.T) {
	ch := envOr("BENCH_CLICKHOUSE_HTTP", "http://127.0.0.1:8123")
	hc, err := hostClient(ch, 1, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	s := fmt.Sprintf("bench_logshape_%d", time.Now().UnixNano())
	exec := func(q string) error { return chExec(hc, ch, q, 30*time.Second) }
	if err := exec("CREATE DATABASE " + s); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = exec("DROP DATABASE IF EXISTS " + s) })
	if v, _ := chQuery(hc, ch, "SELECT version()", 30*time.Second); !strings.HasPrefix(v, "18.") {
		t.Logf("the local server is %s, not 18.16: its columns are checked in 18.16's shape all the same", strings.TrimSpace(v))
	}
	checkLogShape(t, "18.16", s, exec, func(q string) (string, error) { return chQuery(hc, ch, q, 30*time.Second) })
}

func TestClickHouseWorkOnCurrentLogs(t *testing.T) {
	c := chtest.NewChDB(t)
	query := func(q string) (string, error) { // TSV, as the HTTP interface answers FORMAT TSV
		tab, err := c.Query(strings.TrimSuffix(q, " FORMAT TSV"))
		if err != nil {
			return "", err
		}
		var b strings.Builder
		for _, r := range tab.Rows {
			b.WriteString(strings.Join(r, "\t") + "\n")
		}
		return b.String(), nil
	}
	if err := c.Exec("CREATE DATABASE s"); err != nil {
		t.Fatal(err)
	}
	checkLogShape(t, "current", "s", func(q string) error { return c.Exec(q) }, query)
}
