package rollup

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"svc/lib/chpool"
	"svc/lib/settings"
	"svc/schema"
	"svc/schema/chtest"
	"svc/schema/migrations"
	"svc/schema/sink"
)

// TestReadBackNeedsAReplicaThatHasEverything: a stored offset read while a replica is
// down counts only if another replica of its shard has caught up with the shard's log
// (else the down replica may hold the last part alone).
func TestReadBackNeedsAReplicaThatHasEverything(t *testing.T) {
	reps := []replica{{1, "a1"}, {1, "a2"}, {2, "b1"}, {2, "b2"}}
	up := func(caught bool) replicaState { return replicaState{caughtUp: caught} }
	down := map[string]error{"a2": fmt.Errorf("connection refused")}
	for _, c := range []struct {
		name   string
		states map[string]replicaState
		failed map[string]error
		ok     bool
	}{
		{"all answer, none caught up", map[string]replicaState{"a1": up(false), "a2": up(false), "b1": up(false), "b2": up(false)}, nil, true},
		{"one down, its sibling caught up", map[string]replicaState{"a1": up(true), "b1": up(false), "b2": up(false)}, down, true},
		{"one down, its sibling behind", map[string]replicaState{"a1": up(false), "b1": up(true), "b2": up(true)}, down, false},
		{"a whole shard down", map[string]replicaState{"a1": up(true), "a2": up(true)}, map[string]error{"b1": fmt.Errorf("x"), "b2": fmt.Errorf("y")}, false},
	} {
		err := complete(reps, c.states, c.failed)
		if (err == nil) != c.ok {
			t.Errorf("%s: err %v, want ok=%v", c.name, err, c.ok)
		}
		if err != nil && !strings.Contains(err.Error(), "shard") {
			t.Errorf("%s: %v does not name the shard", c.name, err)
		}
	}
}

// clusterConfig returns the ClickHouse cluster of SVC_CLICKHOUSE_CLUSTER and
// SVC_CLICKHOUSE_ADDR (make test-scale), or skips.
func clusterConfig(t *testing.T) chpool.Config {
	cfg := chpool.ConfigFromEnv(settings.New())
	cfg.Addr, cfg.Cluster = os.Getenv("SVC_CLICKHOUSE_ADDR"), os.Getenv("SVC_CLICKHOUSE_CLUSTER")
	if cfg.Cluster == "" || len(cfg.Addrs()) < 2 {
		t.Skip("needs SVC_CLICKHOUSE_CLUSTER and the cluster's servers in SVC_CLICKHOUSE_ADDR (make test-scale)")
	}
	cfg.Database = fmt.Sprintf("svc_rb_%d", time.Now().UnixNano())
	ctx := context.Background()
	if err := migrations.Migrate(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c, err := chpool.Open(ctx, cfg)
		if err == nil {
			c.Exec(ctx, "DROP DATABASE IF EXISTS "+cfg.Database+" ON CLUSTER "+cfg.Cluster)
			c.Close()
		}
	})
	return cfg
}

// TestReplicaReadBack, on the local ClickHouse cluster: rows inserted through the
// Distributed table as the consumer inserts them are read back per partition from the
// replicas, and a replica whose fetches are stopped is seen as behind until it has
// fetched the shard's new part.
func TestReplicaReadBack(t *testing.T) {
	t0 := time.Now()
	cfg := clusterConfig(t)
	t.Logf("migrated in %.1fs", time.Since(t0).Seconds())
	ctx := context.Background()
	conn, err := chpool.Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rb := newReadBack(Config{Table: "events", ClickHouse: cfg}, conn).(*replicaReadBack)
	defer rb.close()
	reps, err := rb.replicas(ctx)
	if err != nil || len(reps) < 4 {
		t.Fatalf("replicas %v, %v", reps, err)
	}
	// Stop fetches everywhere: the replica of each shard that the insert does not write
	// to falls behind.
	conns := map[replica]driver.Conn{}
	for _, rp := range reps {
		c, err := rb.replicaConn(ctx, rp.addr)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Exec(ctx, "SYSTEM STOP FETCHES"); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Exec(context.Background(), "SYSTEM START FETCHES") })
		conns[rp] = c
	}
	s := sink.New(conn, "events", schema.TopicEvents)
	bs := chtest.Batches(8)
	for i := range bs {
		s.Add(&bs[i], int32(i%4), int64(100+i))
	}
	// The pool's settings make the INSERT synchronous through the Distributed table.
	if err := s.Flush(ctx, time.Now()); err != nil {
		t.Fatal(err)
	}
	got, err := rb.maxOffsets(ctx, schema.TopicEvents, []int32{0, 1, 2, 3, 9})
	if err != nil {
		t.Fatal(err)
	}
	want := map[int32]int64{0: 104, 1: 105, 2: 106, 3: 107}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("max offsets %v, want %v", got, want)
	}
	behind := map[int]int{}
	for rp, c := range conns {
		up, err := rb.caughtUp(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		if !up {
			behind[rp.shard]++
		}
	}
	if len(behind) != 2 {
		t.Fatalf("replicas behind per shard with fetches stopped: %v; want one or more in each shard", behind)
	}
	// The rollups the views wrote are not on every replica either: no watermark may be
	// published over them.
	if vis, err := rb.visible(ctx, watermarkTables...); err != nil || vis {
		t.Fatalf("rollups visible from every replica with fetches stopped: %v (%v), want false", vis, err)
	}
	for _, c := range conns {
		if err := c.Exec(ctx, "SYSTEM START FETCHES"); err != nil {
			t.Fatal(err)
		}
	}
	t1 := time.Now()
	defer func() { t.Logf("caught up in %.1fs", time.Since(t1).Seconds()) }()
	deadline := time.Now().Add(30 * time.Second)
	for rp, c := range conns {
		for {
			up, err := rb.caughtUp(ctx, c)
			if err == nil && up {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("replica %s never caught up (%v)", rp.addr, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	for {
		vis, err := rb.visible(ctx, watermarkTables...)
		if err == nil && vis {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the rollups never visible from every replica after fetches started (%v)", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
