package bench

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
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
