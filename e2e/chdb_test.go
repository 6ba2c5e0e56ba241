package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"svc/lib/chpool"
	"svc/privacy"
	"svc/schema"
	"svc/schema/apitest"
	"svc/schema/chtest"
	"svc/schema/erasure"
	"svc/schema/migrations"
	"svc/schema/rollups"
	"svc/schema/sink"
	"svc/schema/workspace"
)

// TestCurrentClickHouseAnswersAsTheLocalServer runs the statements the service builds
// on the local ClickHouse 18.16 and on ClickHouse 26.x in-process (chDB), over the same
// rows, and compares the answers (decimals as numbers: chtest.Table):
//
//   - the pool's settings, chosen from 26.x's own system.settings, are accepted;
//   - the single-node migrations give the same tables, engines and column types;
//   - the same INSERT … SELECT gives the same events, and the views the same rollups;
//   - the 0004 backfill (INSERT … SELECT) adds the same rollup rows;
//   - the rollup reads (rollups.QueryDaily) in UTC, in Asia/Kathmandu (+05:45) and from
//     the 15-minute table, with paging, and the consumer's read-back (sink.MaxOffsets,
//     chpool.RunningQueries) answer the same;
//   - an erasure by the privacy worker (its UPDATE, the rebuild's DELETE and INSERT …
//     SELECT, every query it sent) leaves the same events and rollups, and raw-event
//     retention (its DELETE) the same events.
//
// The server-side hazards of a current server (asynchronous inserts, replicated
// deduplication) are not something chDB shows: lib/chpool's tests and
// TestRebuildTwiceOnReplicas (make test-scale) cover them.
func TestCurrentClickHouseAnswersAsTheLocalServer(t *testing.T) {
	ch := chtest.NewChDB(t)
	cfg, conn := chtest.NewDB(t)
	db, ctx := cfg.Database, context.Background()
	t.Logf("ClickHouse %s (chDB) against the local server", ch.Version())
	same := func(what, sql string, args ...any) {
		t.Helper()
		old, err := chtest.QueryTable(ctx, conn, sql, args...)
		if err != nil {
			t.Fatalf("%s on the local server: %v\n%s", what, err, sql)
		}
		bound, err := chtest.Bind(sql, args...)
		if err != nil {
			t.Fatal(err)
		}
		cur, err := ch.Query(bound)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if !strings.Contains(sql, "ORDER BY") { // rows in any order
			old, cur = old.Sorted(), cur.Sorted()
		}
		if d := chtest.Diff(old, cur); d != "" {
			t.Errorf("%s: ClickHouse %s answers otherwise:\n%s\nstatement:\n%s", what, ch.Version(), d, bound)
		}
	}
	replay := func(what string, tap *chtest.Tap, compare bool) {
		t.Helper()
		stmts := tap.Take()
		if len(stmts) == 0 {
			t.Fatalf("%s sent no statement", what)
		}
		for _, s := range stmts {
			if compare {
				same(what, s.SQL, s.Args...)
				continue
			}
			bound, err := s.Bound()
			if err != nil {
				t.Fatal(err)
			}
			if s.Exec {
				err = ch.Exec(bound)
			} else {
				_, err = ch.Query(bound)
			}
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
		}
	}

	useSettings(t, ch)
	migrate(t, ch, db)
	if err := ch.Exec("USE " + db); err != nil { // the pool's database
		t.Fatal(err)
	}
	same("tables", "SELECT name, engine FROM system.tables WHERE database = ? ORDER BY name", db)
	same("columns", "SELECT table, name, type FROM system.columns WHERE database = ? ORDER BY table, name", db)

	ws, px1, px2 := uuid.New(), uuid.New(), uuid.New()
	ins := eventsInsert(db, ws, px1, px2)
	if err := conn.Exec(ctx, ins); err != nil {
		t.Fatal(err)
	}
	if err := ch.Exec(ins); err != nil {
		t.Fatal(err)
	}
	same("events", "SELECT "+eventColumns+" FROM "+db+".events ORDER BY kafka_partition, kafka_offset")
	sameRollups := func(what string) {
		t.Helper()
		for _, tb := range rollups.RollupTables {
			same(what+": "+tb.Name, rollupFinal(db, tb.Name))
		}
	}
	sameRollups("the views")
	backfill := backfillSQL(t, db)
	if err := conn.Exec(ctx, backfill); err != nil {
		t.Fatal(err)
	}
	if err := ch.Exec(backfill); err != nil {
		t.Fatal(err)
	}
	sameRollups("the 0004 backfill")

	tap := chtest.NewTap(conn)
	reads := func(when string) {
		t.Helper()
		for _, q := range []rollups.DailyQuery{
			{Pixel: schema.UUID(px1), Limit: 1000},
			{Pixel: schema.UUID(px2), Limit: 4, EventName: "purchase"},
			{Pixel: schema.UUID(px1), Limit: 1000, Buckets: true},
			{Pixel: schema.UUID(px1), TimeZone: "Asia/Kathmandu", Limit: 1000},
			{Pixel: schema.UUID(px1), TimeZone: "Asia/Kathmandu", Limit: 5},
			{Pixel: schema.UUID(px2), TimeZone: "Asia/Kathmandu", Limit: 1000,
				From: time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC), To: time.Date(2026, 3, 4, 0, 0, 0, 0, time.UTC)},
		} {
			q.Workspace = schema.UUID(ws)
			page, err := rollups.QueryDaily(ctx, tap, q)
			if err != nil {
				t.Fatal(err)
			}
			if len(page) == 0 {
				t.Fatalf("%s: no rows for %+v", when, q)
			}
			if q.Limit < 10 { // the next page, after a cursor
				c := page[len(page)-1].Cursor()
				q.After = &c
				if _, err := rollups.QueryDaily(ctx, tap, q); err != nil {
					t.Fatal(err)
				}
			}
			replay(when+": rollup read "+q.TimeZone, tap, true)
		}
	}
	reads("before the erasure")
	if _, err := sink.MaxOffsets(ctx, tap, "events", topicLabel, []int32{0, 1, 2, 3, 9}); err != nil {
		t.Fatal(err)
	}
	replay("the consumer's read-back", tap, true)
	// What runs on the local server depends on other tests: the statement only has to
	// run.
	if _, err := chpool.RunningQueries(ctx, tap, schema.InsertQueryPrefix); err != nil {
		t.Fatal(err)
	}
	replay("the running rollup INSERTs", tap, false)

	// The privacy worker erases person3 on the local server; every statement it sent
	// runs on chDB too, mutations waited for (mutations_sync).
	rdb := apitest.Redis(t)
	pc := privacy.Config{Poll: 20 * time.Millisecond, Batch: 100, MutationTimeout: time.Minute, HoldLease: time.Minute,
		RetentionInterval: time.Hour, KeepIdentities: 192 * time.Hour}
	w := privacy.NewWorker(pc, tap, rdb, cfg, nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
	w.Completed = func(context.Context, *erasure.Erasure) error { return nil }
	e := &erasure.Erasure{ID: uuid.New(), Workspace: ws, Email: sha256.Sum256([]byte("person3@example.com")),
		Stage: erasure.StagePending, RequestedAt: time.Now().UTC().Truncate(time.Second), RequestID: "req_chdb"}
	if err := erasure.Write(ctx, conn, time.Now(), e); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = rdb.HDel(context.Background(), "svc:privacy:{ids}", ws.String()+":"+hex.EncodeToString(e.Email[:])).Err()
	})
	if err := w.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if got, err := erasure.Get(ctx, conn, ws, e.ID); err != nil || got.Status() != erasure.StatusCompleted || len(got.Days) == 0 {
		t.Fatalf("erasure on the local server: %+v, %v", got, err)
	}
	if err := ch.Exec("SET mutations_sync = 2"); err != nil {
		t.Fatal(err)
	}
	replay("the privacy worker", tap, false)
	same("events after the erasure", "SELECT "+eventColumns+" FROM "+db+".events ORDER BY kafka_partition, kafka_offset")
	sameRollups("after the erasure")
	reads("after the erasure")

	// Raw-event retention: 8 days on 2026-03-12 removes the days before 2026-03-04.
	ret := workspace.NewRetention(rdb)
	if err := ret.Set(ctx, ws, 8); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ret.Set(context.Background(), ws, 0) })
	w.Now = func() time.Time { return time.Date(2026, 3, 12, 12, 0, 0, 0, time.UTC) }
	if n, err := w.ApplyRetention(ctx); err != nil || n == 0 {
		t.Fatalf("retention removed %d rows: %v", n, err)
	}
	replay("raw-event retention", tap, false)
	same("events after retention", "SELECT "+eventColumns+" FROM "+db+".events ORDER BY kafka_partition, kafka_offset")
}

// useSettings applies to chDB the settings a pool sends to a 26.x server, chosen from
// its own system.settings, and checks that every setting lib/chpool guards is one it
// knows and runs with.
func useSettings(t *testing.T, ch *chtest.ChDB) {
	t.Helper()
	known, err := ch.Query(chpool.ProbeSQL())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range known.Rows {
		names = append(names, r[0])
	}
	set, err := chpool.QuerySettings(names)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for k, v := range set {
		lit := fmt.Sprint(v)
		if s, ok := v.(string); ok {
			lit = "'" + s + "'"
		}
		if err := ch.Exec("SET " + k + " = " + lit); err != nil {
			t.Fatal(err)
		}
		want = append(want, k+"="+fmt.Sprint(v))
	}
	sort.Strings(want)
	for _, n := range []string{"async_insert", "deduplicate_insert", "deduplicate_insert_select",
		"deduplicate_blocks_in_dependent_materialized_views", "parallel_distributed_insert_select", "distributed_foreground_insert"} {
		if _, ok := set[n]; !ok {
			t.Errorf("ClickHouse %s knows no %s: the pool would not send it (%v)", ch.Version(), n, want)
		}
	}
	var in []string
	for k := range set {
		in = append(in, "'"+k+"'")
	}
	now, err := ch.Query("SELECT name, value FROM system.settings WHERE name IN (" + strings.Join(in, ", ") + ") ORDER BY name")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range now.Rows {
		got = append(got, r[0]+"="+r[1])
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("ClickHouse %s runs with %v, want %v", ch.Version(), got, want)
	}
}

// migrate applies the single-node schema of database db to chDB, statement by
// statement, as migrations.Migrate does.
func migrate(t *testing.T, ch *chtest.ChDB, db string) {
	t.Helper()
	ms, err := migrations.Migrations()
	if err != nil {
		t.Fatal(err)
	}
	boot, steps, err := migrations.Plan(ms, db, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.Exec(boot...); err != nil {
		t.Fatal(err)
	}
	for _, st := range steps {
		if err := ch.Exec(st.Statements...); err != nil {
			t.Fatalf("migration %s: %v", st.Name, err)
		}
	}
}

// backfillSQL is the INSERT … SELECT of migration 0004 for database db.
func backfillSQL(t *testing.T, db string) string {
	t.Helper()
	ms, err := migrations.Migrations()
	if err != nil {
		t.Fatal(err)
	}
	_, steps, err := migrations.Plan(ms, db, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range steps {
		for _, s := range st.Statements {
			if strings.HasPrefix(strings.TrimSpace(s), "INSERT INTO") {
				return s
			}
		}
	}
	t.Fatal("no INSERT … SELECT in the migrations")
	return ""
}

const topicLabel = "events.v1@0011223344556677"

// eventColumns reads every column of events as text that compares (the digest in hex).
const eventColumns = `workspace_id, pixel_id, sandbox, key_id, event_id, event_name, occurred_at, event_date, value,
	has_value, currency, consent, has_email, hex(email_sha256), request_id, received_at, inserted_at, kafka_topic,
	kafka_partition, kafka_offset, batch_index`

// eventsInsert writes 240 events of workspace ws over pixels px1 and px2, every 2689 s
// from 2026-03-01 00:00 UTC (about seven days, crossing quarter hours and Kathmandu's
// day boundaries), with three names, three currencies, values such as 7.35, nine
// people, some without consent or email, on four partitions: the same rows on every
// server version.
func eventsInsert(db string, ws, px1, px2 uuid.UUID) string {
	return fmt.Sprintf(`INSERT INTO %s.events (workspace_id, pixel_id, sandbox, key_id, event_id, event_name, occurred_at,
	event_date, value, has_value, currency, consent, has_email, email_sha256, request_id, received_at, inserted_at,
	kafka_topic, kafka_partition, kafka_offset, batch_index)
SELECT toUUID('%s'), if(number %% 3 = 0, toUUID('%s'), toUUID('%s')), toUInt8(number %% 17 = 0),
	toUUID('00000000-0000-4000-8000-00000000000b'),
	toUUID(concat('00000000-0000-4000-8000-', substring(concat('000000000000', hex(number)), length(hex(number)) + 1))),
	['purchase', 'lead', 'view'][number %% 3 + 1],
	toDateTime('2026-03-01 00:00:00', 'UTC') + number * 2689,
	toDate(toDateTime('2026-03-01 00:00:00', 'UTC') + number * 2689, 'UTC'),
	toDecimal64(concat(toString(number %% 13), '.', toString(number %% 10), '5'), 4), toUInt8(number %% 4 != 0),
	['EUR', 'USD', ''][intDiv(number, 3) %% 3 + 1], toUInt8(number %% 5 != 0), toUInt8(number %% 5 != 0 AND number %% 7 != 0),
	if(number %% 5 != 0 AND number %% 7 != 0, SHA256(concat('person', toString(number %% 9), '@example.com')), toFixedString('', 32)),
	concat('req_', toString(intDiv(number, 10))),
	toDateTime('2026-03-01 00:00:30', 'UTC') + number * 2689, toDateTime('2026-03-08 00:00:00', 'UTC'),
	'%s', toInt32(number %% 4), toInt64(intDiv(number, 4)), toUInt8(0)
FROM system.numbers LIMIT 240`, db, ws, px2, px1, topicLabel)
}

// rollupFinal reads every row of a rollup table with its states merged.
func rollupFinal(db, table string) string {
	if table == "pixel_accepted_minutes" { // the alerts' counts per minute of reception
		keys := "workspace_id, sandbox, pixel_id, minute, event_date"
		return "SELECT " + keys + ", countMerge(events_state), maxMerge(last_state) FROM " + db + "." + table +
			" GROUP BY " + keys + " ORDER BY " + keys
	}
	day := "event_date"
	if table == "pixel_rollups_15m" {
		day = "bucket"
	}
	keys := "workspace_id, sandbox, pixel_id, " + day + ", event_name, currency"
	return "SELECT " + keys + ", countMerge(events_state), sumMerge(consented_state), sumMerge(value_state), " +
		"uniqIfMerge(people_state) FROM " + db + "." + table + " GROUP BY " + keys + " ORDER BY " + keys
}
