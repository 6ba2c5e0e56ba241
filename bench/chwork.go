package bench

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// ClickHouse's share of a run, from its own logs. The CPU per event counts ClickHouse's
// process as one number; system.query_log and system.part_log split it into the INSERTs
// into the events table (each runs the materialized views on its own thread, so their
// CPU is the views' too) and the merges in the run's database. The local server keeps
// part_log always and logs every query with SVC_CLICKHOUSE_QUERY_LOG=1
// (deploy/local/services.sh); current releases log every query by default, and keep
// part_log where the server's configuration has it. Without part_log the report has no
// such line.
//
// part_log rows carry their database, so merges and parts are the run's own. 18.16's
// query_log names no database: the INSERTs counted are every INSERT INTO events the
// server finished from the run's start, the run's only where nothing else writes such
// rows (as in `make bench`); a server that records the database (current releases)
// is asked for the run's database.

// ClickHouseWork is what ClickHouse's logs say it did for a run.
type ClickHouseWork struct {
	// Inserts is the INSERTs into events (query_log); InsertSeconds their summed
	// duration; UserSeconds and SystemSeconds the CPU of their threads (ProfileEvents).
	Inserts       int64   `json:"inserts"`
	InsertSeconds float64 `json:"insert_s"`
	UserSeconds   float64 `json:"insert_user_s"`
	SystemSeconds float64 `json:"insert_system_s"`
	// QueryLog is false when the server had no query_log or logged none of the INSERTs
	// (the fields above are then 0).
	QueryLog bool `json:"query_log"`
	// PartsWritten is the parts INSERTs wrote in the run's database (the events
	// table's and each view's); Merges, MergeSeconds (wall time, summed) and MergedRows
	// its merges (part_log).
	PartsWritten int64   `json:"parts_written"`
	Merges       int64   `json:"merges"`
	MergeSeconds float64 `json:"merge_s"`
	MergedRows   int64   `json:"merged_rows"`
}

// clickHouseLogs reads a run's ClickHouseWork from a server's logs.
type clickHouseLogs struct {
	query  func(stmt string) (string, error) // a statement's answer, TSV
	system string                            // the logs' database: "system"
	db     string                            // the run's database
	from   int64                             // the run's start, the server's Unix time
}

// watchClickHouseWork notes the server's time before a run; the function it returns
// reads the run's ClickHouseWork into rep after it (nothing when db or ch is empty, the
// server keeps no part_log, or nothing was written: `svc ingest` alone).
func watchClickHouseWork(ch, db string) func(rep *Report) {
	if ch == "" || db == "" {
		return func(*Report) {}
	}
	l, err := newClickHouseLogs(ch, db)
	if err != nil {
		return func(*Report) {}
	}
	return func(rep *Report) {
		w, err := l.read()
		if err != nil {
			rep.Notes = append(rep.Notes, "ClickHouse's logs could not be read: "+err.Error())
			return
		}
		if w != nil && (w.PartsWritten > 0 || w.Inserts > 0) { // nothing written: a target without a consumer
			rep.ClickHouse = w
		}
	}
}

// newClickHouseLogs starts reading the logs of the server at HTTP address ch for
// database db from now.
func newClickHouseLogs(ch, db string) (*clickHouseLogs, error) {
	hc, err := hostClient(ch, 1, 30*time.Second)
	if err != nil {
		return nil, err
	}
	query := func(stmt string) (string, error) {
		hc.CloseIdleConnections() // the server closes them after keep_alive_timeout (3 s)
		return chQuery(hc, ch, stmt, 30*time.Second)
	}
	return startClickHouseLogs(query, "system", db)
}

// startClickHouseLogs starts reading the logs in database system through query.
func startClickHouseLogs(query func(string) (string, error), system, db string) (*clickHouseLogs, error) {
	l := &clickHouseLogs{query: query, system: system, db: strings.ReplaceAll(db, "'", "")}
	out, err := query("SELECT toUnixTimestamp(now()) FORMAT TSV")
	if err != nil {
		return nil, err
	}
	l.from, err = strconv.ParseInt(strings.TrimSpace(out), 10, 64)
	return l, err
}

// read flushes the server's logs and reads them; nil, nil when it keeps no part_log.
func (l *clickHouseLogs) read() (*ClickHouseWork, error) {
	if _, err := l.query("SYSTEM FLUSH LOGS"); err != nil {
		return nil, err
	}
	logs, err := l.columns()
	if err != nil || !logs.partLog {
		return nil, err
	}
	w := &ClickHouseWork{}
	out, err := l.query(fmt.Sprintf(`SELECT countIf(CAST(event_type AS Int8) = 1),
countIf(CAST(event_type AS Int8) = 2), sumIf(duration_ms, CAST(event_type AS Int8) = 2) / 1000,
sumIf(rows, CAST(event_type AS Int8) = 2) FROM %s.part_log
WHERE database = '%s' AND %s FORMAT TSV`, l.system, l.db, l.since()))
	if err != nil {
		return nil, err
	}
	if err := scanTSV(out, &w.PartsWritten, &w.Merges, &w.MergeSeconds, &w.MergedRows); err != nil {
		return nil, fmt.Errorf("part_log: %w", err)
	}
	if !logs.queryLog {
		return w, nil
	}
	out, err = l.query(l.insertsQuery(logs))
	if err != nil {
		return nil, err
	}
	if err := scanTSV(out, &w.Inserts, &w.InsertSeconds, &w.UserSeconds, &w.SystemSeconds); err != nil {
		return nil, fmt.Errorf("query_log: %w", err)
	}
	// Parts written by no logged INSERT: the server keeps query_log but did not log the
	// service's sessions (log_queries off).
	w.QueryLog = w.Inserts > 0 || w.PartsWritten == 0
	return w, nil
}

// logTables is what the server keeps of the logs, from system.columns.
type logTables struct {
	partLog, queryLog bool
	// byDatabase: query_log has current_database (current releases; not 18.16).
	byDatabase bool
	// profileMap: query_log's ProfileEvents is a Map (21.x and later), not 18.16's Names
	// and Values arrays.
	profileMap bool
}

// columns reads which logs the server keeps and what its query_log has.
func (l *clickHouseLogs) columns() (logTables, error) {
	var t logTables
	out, err := l.query(`SELECT table, name, type FROM system.columns WHERE database = '` + l.system + `'
AND table IN ('part_log', 'query_log') AND name IN ('event_time', 'current_database', 'ProfileEvents') FORMAT TSV`)
	if err != nil {
		return t, err
	}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Split(line, "\t")
		if len(f) != 3 {
			continue
		}
		switch table, name := f[0], f[1]; {
		case name == "event_time" && table == "part_log":
			t.partLog = true
		case name == "event_time" && table == "query_log":
			t.queryLog = true
		case name == "current_database" && table == "query_log":
			t.byDatabase = true
		case name == "ProfileEvents" && table == "query_log":
			t.profileMap = strings.HasPrefix(f[2], "Map(")
		}
	}
	return t, nil
}

// since selects the rows logged from the run's start; the day first, the logs' sorting
// key (event_date, event_time), so that a long log is not read whole.
func (l *clickHouseLogs) since() string {
	return fmt.Sprintf("event_date >= toDate(toDateTime(%d)) AND event_time >= toDateTime(%d)", l.from, l.from)
}

// insertsQuery is the statement that sums the run's INSERTs into events.
func (l *clickHouseLogs) insertsQuery(logs logTables) string {
	event := func(name string) string {
		if logs.profileMap {
			return "ProfileEvents['" + name + "']"
		}
		return "ProfileEvents.Values[indexOf(ProfileEvents.Names, '" + name + "')]"
	}
	where := "CAST(type AS Int8) = 2 AND " + l.since() + " AND query LIKE 'INSERT INTO events %'"
	if logs.byDatabase {
		where += " AND current_database = '" + l.db + "'"
	}
	return fmt.Sprintf("SELECT count(), sum(query_duration_ms) / 1000, sum(%s) / 1e6, sum(%s) / 1e6 FROM %s.query_log WHERE %s FORMAT TSV",
		event("UserTimeMicroseconds"), event("SystemTimeMicroseconds"), l.system, where)
}

// scanTSV reads one TSV row into dst (*int64 or *float64 each).
func scanTSV(out string, dst ...any) error {
	f := strings.Split(strings.TrimSpace(out), "\t")
	if len(f) != len(dst) {
		return fmt.Errorf("%d values, want %d: %q", len(f), len(dst), firstLine([]byte(out)))
	}
	for i, d := range dst {
		var err error
		switch d := d.(type) {
		case *int64:
			*d, err = strconv.ParseInt(f[i], 10, 64)
		case *float64:
			*d, err = strconv.ParseFloat(f[i], 64)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// Line is the summary's line: the INSERTs' CPU (and per accepted event), the parts
// they wrote, the merges.
func (w *ClickHouseWork) Line(accepted int64) string {
	var b strings.Builder
	if w.QueryLog {
		fmt.Fprintf(&b, "%d INSERTs into events over %.1f s, their CPU %.2f s (user %.2f, system %.2f", w.Inserts,
			w.InsertSeconds, w.UserSeconds+w.SystemSeconds, w.UserSeconds, w.SystemSeconds)
		if accepted > 0 {
			fmt.Fprintf(&b, "; %.2f µs/event", 1e6*(w.UserSeconds+w.SystemSeconds)/float64(accepted))
		}
		b.WriteString("), ")
	} else {
		b.WriteString("INSERTs not logged (SVC_CLICKHOUSE_QUERY_LOG=1), ")
	}
	fmt.Fprintf(&b, "%d parts written, %d merges of %d rows over %.1f s (wall)", w.PartsWritten, w.Merges, w.MergedRows, w.MergeSeconds)
	return b.String()
}
