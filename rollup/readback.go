package rollup

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"svc/lib/chpool"
	"svc/schema"
	"svc/schema/migrations"
	"svc/schema/sink"
)

// readBack is how the consumer learns what ClickHouse holds, for its exactly-once
// steps: which rollup INSERTs are still running anywhere they could land, and the
// highest stored Kafka offset per partition.
type readBack interface {
	// runningInserts returns the ids of the rollup INSERTs running now.
	runningInserts(ctx context.Context) ([]string, error)
	// maxOffsets returns, for each of parts with rows of topic, the highest stored offset.
	maxOffsets(ctx context.Context, topic string, parts []int32) (map[int32]int64, error)
	// close releases what it opened (not the consumer's connection).
	close()
}

// newReadBack returns the single server's read-back (the consumer's own connection),
// or with cfg.ClickHouse.Cluster set the replicas' (see replicaReadBack).
func newReadBack(cfg Config, conn driver.Conn) readBack {
	return newReadBackOf(cfg, conn, cfg.Table, schema.InsertQueryPrefix)
}

// newReadBackOf is newReadBack for the inserts of another table, whose query ids
// start with prefix (the rejections' consumer: rejections.go).
func newReadBackOf(cfg Config, conn driver.Conn, table, prefix string) readBack {
	if cfg.ClickHouse.Cluster == "" {
		return serverReadBack{conn: conn, table: table, prefix: prefix}
	}
	return &replicaReadBack{cfg: cfg.ClickHouse, conn: conn, table: table + migrations.LocalSuffix, prefix: prefix,
		conns: map[string]driver.Conn{}}
}

// serverReadBack reads a single server: the table the consumer inserts into.
type serverReadBack struct {
	conn   driver.Conn
	table  string
	prefix string // of the inserts' query ids
}

func (s serverReadBack) runningInserts(ctx context.Context) ([]string, error) {
	return chpool.RunningQueries(ctx, s.conn, s.prefix)
}

func (serverReadBack) close() {}

func (s serverReadBack) maxOffsets(ctx context.Context, topic string, parts []int32) (map[int32]int64, error) {
	return sink.MaxOffsets(ctx, s.conn, s.table, topic, parts)
}

// replicaReadBack reads every replica of the cluster directly (a connection per
// replica, addresses from system.clusters), because an INSERT through the Distributed
// table lands on one replica of its shard and reaches the others only by replication:
//
//   - running inserts are those of every replica that answers (an INSERT on a server
//     that does not answer was cut with its connection, or will never be seen);
//   - a partition's stored offset is the highest over the replicas of every shard, and
//     it counts only when, for every shard, every replica answered or one that answered
//     has caught up with the shard's replication log (no insert waiting in its queue):
//     a part that exists only on a replica that is down is then in the log, or it
//     was never committed to ZooKeeper and the replica drops it when it restarts.
//
// Otherwise maxOffsets fails and the consumer retries until the replica is back.
type replicaReadBack struct {
	cfg    chpool.Config
	conn   driver.Conn
	table  string // the local table behind the Distributed one
	prefix string // of the inserts' query ids

	mu    sync.Mutex
	conns map[string]driver.Conn // replica address → connection
}

// replica is one replica of the cluster.
type replica struct {
	shard int
	addr  string
}

func (r *replicaReadBack) replicas(ctx context.Context) ([]replica, error) {
	rows, err := r.conn.Query(ctx, "SELECT shard_num, host_name, port FROM system.clusters WHERE cluster = ?", r.cfg.Cluster)
	if err != nil {
		return nil, fmt.Errorf("list the replicas of %s: %w", r.cfg.Cluster, err)
	}
	defer rows.Close()
	var out []replica
	for rows.Next() {
		var shard uint32
		var host string
		var port uint16
		if err := rows.Scan(&shard, &host, &port); err != nil {
			return nil, err
		}
		out = append(out, replica{shard: int(shard), addr: net.JoinHostPort(host, strconv.Itoa(int(port)))})
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("cluster %s is not in system.clusters of the server", r.cfg.Cluster)
	}
	return out, nil
}

// replicaConn returns the connection to addr, opening it on first use.
func (r *replicaReadBack) replicaConn(ctx context.Context, addr string) (driver.Conn, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if c, ok := r.conns[addr]; ok {
		return c, nil
	}
	cfg := r.cfg
	cfg.Addr, cfg.MaxOpenConns, cfg.DialTimeout = addr, 2, min(cfg.DialTimeout, 2*time.Second)
	c, err := chpool.Open(ctx, cfg)
	if err != nil {
		return nil, err
	}
	r.conns[addr] = c
	return c, nil
}

// onEach calls fn on every replica that can be reached and returns the replicas and
// the errors of those that could not (by address).
func (r *replicaReadBack) onEach(ctx context.Context, fn func(ctx context.Context, rp replica, conn driver.Conn) error) ([]replica, map[string]error, error) {
	reps, err := r.replicas(ctx)
	if err != nil {
		return nil, nil, err
	}
	failed := map[string]error{}
	for _, rp := range reps {
		conn, err := r.replicaConn(ctx, rp.addr)
		if err == nil {
			err = fn(ctx, rp, conn)
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil, nil, ctx.Err()
			}
			failed[rp.addr] = err
		}
	}
	return reps, failed, nil
}

func (r *replicaReadBack) runningInserts(ctx context.Context) ([]string, error) {
	var ids []string
	_, _, err := r.onEach(ctx, func(ctx context.Context, _ replica, conn driver.Conn) error {
		got, err := chpool.RunningQueries(ctx, conn, r.prefix)
		ids = append(ids, got...)
		return err
	})
	return ids, err
}

// replicaState is what maxOffsets learns from one replica.
type replicaState struct {
	caughtUp bool
	max      map[int32]int64
}

func (r *replicaReadBack) maxOffsets(ctx context.Context, topic string, parts []int32) (map[int32]int64, error) {
	states := map[string]replicaState{}
	reps, failed, err := r.onEach(ctx, func(ctx context.Context, rp replica, conn driver.Conn) error {
		up, err := r.caughtUp(ctx, conn)
		if err != nil {
			return err
		}
		m, err := sink.MaxOffsets(ctx, conn, r.table, topic, parts)
		if err != nil {
			return err
		}
		states[rp.addr] = replicaState{caughtUp: up, max: m}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if err := complete(reps, states, failed); err != nil {
		return nil, err
	}
	out := map[int32]int64{}
	for _, st := range states {
		for p, o := range st.max {
			if cur, ok := out[p]; !ok || o > cur {
				out[p] = o
			}
		}
	}
	return out, nil
}

// complete reports a shard whose stored rows may not all be visible: a replica did not
// answer and none of those that did has caught up.
func complete(reps []replica, states map[string]replicaState, failed map[string]error) error {
	byShard := map[int][]replica{}
	for _, rp := range reps {
		byShard[rp.shard] = append(byShard[rp.shard], rp)
	}
	var errs []error
	for shard, rs := range byShard {
		var down []string
		caught := false
		for _, rp := range rs {
			if st, ok := states[rp.addr]; ok {
				caught = caught || st.caughtUp
			} else {
				down = append(down, fmt.Sprintf("%s (%v)", rp.addr, failed[rp.addr]))
			}
		}
		if len(down) > 0 && !caught {
			sort.Strings(down)
			errs = append(errs, fmt.Errorf("shard %d: replica %s cannot be read and no other replica has caught up with the shard's log", shard, strings.Join(down, ", ")))
		}
	}
	return errors.Join(errs...)
}

// caughtUp reports whether the replica on conn has every part committed to its
// shard's replication log: its session is alive, it has copied every log entry into
// its queue, and no insert waits in the queue.
func (r *replicaReadBack) caughtUp(ctx context.Context, conn driver.Conn) (bool, error) {
	return tableCaughtUp(ctx, conn, r.cfg.Database, r.table)
}

// visible says whether every part inserted before the call into tables (their
// Distributed names) is seen by a read through them, whichever replica it is sent to:
// every replica answers and has caught up with each table's replication log (local
// tables: the name with migrations.LocalSuffix). (One server writes an INSERT's views
// inside it: its rows are read at once.)
func (r *replicaReadBack) visible(ctx context.Context, tables ...string) (bool, error) {
	all := true
	_, failed, err := r.onEach(ctx, func(ctx context.Context, _ replica, conn driver.Conn) error {
		for _, t := range tables {
			up, err := tableCaughtUp(ctx, conn, r.cfg.Database, t+migrations.LocalSuffix)
			if err != nil {
				return err
			}
			if !up {
				all = false
			}
		}
		return nil
	})
	if err != nil {
		return false, err
	}
	return all && len(failed) == 0, nil
}

// tableCaughtUp is caughtUp for the local table of database db at conn.
func tableCaughtUp(ctx context.Context, conn driver.Conn, db, table string) (bool, error) {
	var expired uint8
	var insertsQueued uint32
	var logMax, logPointer uint64
	var zkPath string
	err := conn.QueryRow(ctx, "SELECT is_session_expired, inserts_in_queue, log_max_index, log_pointer, zookeeper_path "+
		"FROM system.replicas WHERE database = ? AND table = ?", db, table).
		Scan(&expired, &insertsQueued, &logMax, &logPointer, &zkPath)
	if err != nil {
		return false, fmt.Errorf("replication state of %s: %w", table, err)
	}
	if expired != 0 || insertsQueued > 0 {
		return false, nil
	}
	if logPointer > logMax {
		return true, nil
	}
	if logPointer > 0 || logMax > 0 {
		return false, nil
	}
	// Both 0: an empty log (caught up), or one entry not copied yet.
	var entries uint64
	if err := conn.QueryRow(ctx, "SELECT count() FROM system.zookeeper WHERE path = ?", zkPath+"/log").Scan(&entries); err != nil {
		return false, fmt.Errorf("replication log of %s: %w", table, err)
	}
	return entries == 0, nil
}

// close closes the replica connections.
func (r *replicaReadBack) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for addr, c := range r.conns {
		c.Close()
		delete(r.conns, addr)
	}
}
