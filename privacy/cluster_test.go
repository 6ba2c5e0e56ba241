package privacy

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/google/uuid"

	"svc/lib/chpool"
	"svc/lib/settings"
	"svc/schema/apitest"
	"svc/schema/chtest"
	"svc/schema/erasure"
	"svc/schema/migrations"
)

// TestRebuildTwiceOnReplicas, on the local ClickHouse cluster (make test-scale): the
// rollups of the clustered schema (ReplicatedAggregatingMergeTree behind Distributed
// tables) equal the events after a rebuild, and still after the same rebuild once more,
// as a worker that died after inserting and before recording "recomputed" runs it again
// when it resumes. The second rebuild deletes the rows and inserts the very blocks the
// first inserted. A Replicated table drops a block identical to one it holds the hash
// of (18.16: the last 100 blocks, up to 7 days; 26.7: 10,000, an hour), so before
// every INSERT was sent with insert_deduplicate = 0 (lib/chpool) the second re-insert
// was silently dropped and the rebuilt days lost every row: this test failed with
// "after the second rebuild: pixel_rollups_daily has 0 rows, want 16".
func TestRebuildTwiceOnReplicas(t *testing.T) {
	cfg, conn := clusterDB(t)
	ctx := context.Background()
	ws, px1, px2 := uuid.New(), uuid.New(), uuid.New()
	insertEvents(t, conn, cfg.Database, ws, px1, px2)
	w := NewWorker(testConfig(), conn, apitest.Redis(t), cfg, nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
	want := fromEvents(t, conn, cfg)
	if len(want.Rows) != 16 {
		t.Fatalf("the events give %d rollup rows, want 16", len(want.Rows))
	}
	for _, when := range []string{"after the first rebuild", "after the second rebuild"} {
		if err := w.rebuild(ctx, eventSlices(ws, px1, px2)); err != nil {
			t.Fatal(err)
		}
		got := rollupRows(t, conn, cfg)
		if d := chtest.Diff(want, got); d != "" {
			t.Fatalf("%s: pixel_rollups_daily has %d rows, want %d:\n%s", when, len(got.Rows), len(want.Rows), d)
		}
	}
}

// TestRepairOnReplicas, on the local ClickHouse cluster (make test-scale): an INSERT
// through the Distributed table whose events part one shard wrote before a view there
// failed leaves that shard's rollups short; registered and ended unsure as the consumer
// does, it is repaired by the worker's run, and the rollups equal the events again.
func TestRepairOnReplicas(t *testing.T) {
	cfg, conn := clusterDB(t)
	ctx := context.Background()
	db, oc := cfg.Database, " ON CLUSTER "+cfg.Cluster
	if err := conn.Exec(ctx, "CREATE MATERIALIZED VIEW "+db+".aaa_fail_mv"+oc+" ENGINE = Memory AS SELECT throwIf(kafka_offset = 100) AS failed FROM "+db+".events_local"); err != nil {
		t.Fatal(err)
	}
	ws, px1, px2 := uuid.New(), uuid.New(), uuid.New()
	rdb := apitest.Redis(t)
	w := NewWorker(testConfig(), conn, rdb, cfg, nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
	p := "svc:privacy:{" + db + "}:"
	t.Cleanup(func() {
		rdb.Del(context.Background(), p+"flushes", p+"inserts", p+"repairs", p+"holds", p+"holdgen", p+"lock")
	})
	ss := eventSlices(ws, px1, px2)
	if _, err := w.Fence.Begin(ctx, "svc-rollup-cut", ss, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := insertEventsErr(conn, db, ws, px1, px2); err == nil {
		t.Fatal("the INSERT through the failing view succeeded")
	}
	if err := w.Fence.EndUnsure(ctx, "svc-rollup-cut"); err != nil {
		t.Fatal(err)
	}
	if err := conn.Exec(ctx, "DROP TABLE "+db+".aaa_fail_mv"+oc); err != nil {
		t.Fatal(err)
	}
	want := fromEvents(t, conn, cfg)
	if got := rollupRows(t, conn, cfg); chtest.Diff(want, got) == "" {
		t.Fatal("the failed INSERT left the rollups equal to the events: nothing to repair")
	}
	if err := w.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if got := rollupRows(t, conn, cfg); chtest.Diff(want, got) != "" {
		t.Fatalf("after the repair: pixel_rollups_daily differs from the events:\n%s", chtest.Diff(want, got))
	}
	if u, err := w.Fence.Unsure(ctx); err != nil || len(u) != 0 {
		t.Fatalf("left to repair after the run: %v %v", u, err)
	}
}

// clusterDB migrates a new database with the clustered schema on the local cluster and
// returns its pool (dropped at the end).
func clusterDB(t *testing.T) (chpool.Config, driver.Conn) {
	t.Helper()
	cfg := chpool.ConfigFromEnv(settings.New())
	cfg.Addr, cfg.Cluster = os.Getenv("SVC_CLICKHOUSE_ADDR"), os.Getenv("SVC_CLICKHOUSE_CLUSTER")
	if cfg.Cluster == "" || len(cfg.Addrs()) < 2 {
		t.Skip("needs SVC_CLICKHOUSE_CLUSTER and the cluster's servers in SVC_CLICKHOUSE_ADDR (make test-scale)")
	}
	cfg.Database = fmt.Sprintf("svc_rebuild_%d", time.Now().UnixNano())
	ctx := context.Background()
	if err := migrations.Migrate(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	conn, err := chpool.Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn.Exec(context.Background(), "DROP DATABASE IF EXISTS "+cfg.Database+" ON CLUSTER "+cfg.Cluster)
		conn.Close()
	})
	return cfg, conn
}

func testConfig() Config {
	return Config{Poll: 20 * time.Millisecond, Batch: 100, MutationTimeout: time.Minute, HoldLease: time.Minute,
		RetentionInterval: time.Hour, KeepIdentities: 192 * time.Hour}
}

// insertEvents writes 240 events over two pixels and four days (2026-03-01..04), at
// Kafka offsets 0..239, through the Distributed table as the consumer writes them (the
// views fill the rollups on each shard).
func insertEvents(t *testing.T, conn driver.Conn, db string, ws, px1, px2 uuid.UUID) {
	t.Helper()
	if err := insertEventsErr(conn, db, ws, px1, px2); err != nil {
		t.Fatal(err)
	}
}

func insertEventsErr(conn driver.Conn, db string, ws, px1, px2 uuid.UUID) error {
	return conn.Exec(context.Background(), fmt.Sprintf(`INSERT INTO %s.events (workspace_id, pixel_id, sandbox, event_id, event_name,
		occurred_at, event_date, value, has_value, currency, consent, has_email, email_sha256, received_at, inserted_at,
		kafka_topic, kafka_partition, kafka_offset)
	SELECT toUUID('%s'), if(number %% 2 = 0, toUUID('%s'), toUUID('%s')), 0, toUUID('%s'), ['purchase', 'lead'][intDiv(number, 2) %% 2 + 1],
		toDateTime('2026-03-01 00:00:00', 'UTC') + number * 1400, toDate(toDateTime('2026-03-01 00:00:00', 'UTC') + number * 1400, 'UTC'),
		toDecimal64(concat(toString(number %% 13), '.25'), 4), 1, 'EUR', 1, 1, SHA256(toString(number %% 9)),
		toDateTime('2026-03-01 00:00:00', 'UTC') + number * 1400, now(), 'events.v1', toInt32(number %% 4), toInt64(number)
	FROM system.numbers LIMIT 240`, db, ws, px1, px2, uuid.New()))
}

// eventSlices are the pixel-days insertEvents writes.
func eventSlices(ws, px1, px2 uuid.UUID) []erasure.Slice {
	var ss []erasure.Slice
	for d := 0; d < 4; d++ {
		for _, px := range []uuid.UUID{px1, px2} {
			ss = append(ss, erasure.Slice{Workspace: ws, PixelDay: erasure.PixelDay{Pixel: px, Date: time.Date(2026, 3, 1+d, 0, 0, 0, 0, time.UTC)}})
		}
	}
	return ss
}

// syncReplicas waits until every replica of the cluster has fetched every part of the
// tables the test reads, so that a read through the Distributed tables sees them all.
func syncReplicas(t *testing.T, cfg chpool.Config) {
	t.Helper()
	for _, addr := range cfg.Addrs() {
		c := cfg
		c.Addr, c.MaxOpenConns = addr, 1
		conn, err := chpool.Open(context.Background(), c)
		if err != nil {
			t.Fatal(err)
		}
		for _, tb := range []string{"events", "pixel_rollups_daily"} {
			if err := conn.Exec(context.Background(), "SYSTEM SYNC REPLICA "+c.Database+"."+tb+migrations.LocalSuffix); err != nil {
				t.Fatal(err)
			}
		}
		conn.Close()
	}
}

const rollupKeys = "workspace_id, sandbox, pixel_id, event_date, event_name, currency"

// fromEvents aggregates the events as the daily rollup holds them.
func fromEvents(t *testing.T, conn driver.Conn, cfg chpool.Config) chtest.Table {
	t.Helper()
	syncReplicas(t, cfg)
	got, err := chtest.QueryTable(context.Background(), conn, "SELECT "+rollupKeys+", count(), sum(consent), sum(value), "+
		"uniqIf(email_sha256, consent = 1 AND has_email = 1) FROM "+cfg.Database+".events GROUP BY "+rollupKeys+" ORDER BY "+rollupKeys)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// rollupRows reads the daily rollup with its states merged.
func rollupRows(t *testing.T, conn driver.Conn, cfg chpool.Config) chtest.Table {
	t.Helper()
	syncReplicas(t, cfg)
	got, err := chtest.QueryTable(context.Background(), conn, "SELECT "+rollupKeys+", countMerge(events_state), "+
		"sumMerge(consented_state), sumMerge(value_state), uniqIfMerge(people_state) FROM "+cfg.Database+
		".pixel_rollups_daily GROUP BY "+rollupKeys+" ORDER BY "+rollupKeys)
	if err != nil {
		t.Fatal(err)
	}
	return got
}
