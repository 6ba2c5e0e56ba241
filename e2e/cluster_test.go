package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"svc/lib/limits"
	"svc/schema/apitest"
)

// clusters are the distributed engines `make test-scale` starts: a Redis Cluster
// (SVC_REDIS_CLUSTER) and a ClickHouse cluster (SVC_CLICKHOUSE_CLUSTER, its servers in
// SVC_CLICKHOUSE_ADDR), both from deploy/local.
type clusters struct {
	redisSeeds []string
	chAddrs    []string // every ClickHouse server, host:port
	chCluster  string
}

func clustersOrSkip(t *testing.T) clusters {
	c := clusters{chCluster: os.Getenv("SVC_CLICKHOUSE_CLUSTER")}
	if s := os.Getenv("SVC_REDIS_CLUSTER"); s != "" {
		c.redisSeeds = strings.Split(s, ",")
	}
	if s := os.Getenv("SVC_CLICKHOUSE_ADDR"); s != "" {
		c.chAddrs = strings.Split(s, ",")
	}
	if len(c.redisSeeds) == 0 || c.chCluster == "" || len(c.chAddrs) < 2 {
		t.Skip("needs SVC_REDIS_CLUSTER, SVC_CLICKHOUSE_CLUSTER and the cluster's servers in SVC_CLICKHOUSE_ADDR (make test-scale)")
	}
	return c
}

// script runs a deploy/local script with the caller's environment (its SVC_DATA_DIR
// locates the clusters' pid files), not the test instance's.
func script(t *testing.T, args ...string) {
	t.Helper()
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Dir = ".." // the scripts' paths are from the repository's root
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// port returns the port of host:port.
func port(addr string) string {
	_, p, _ := net.SplitHostPort(addr)
	return p
}

// rotate returns addrs starting at the i-th: each process prefers another server.
func rotate(addrs []string, i int) string {
	i %= len(addrs)
	return strings.Join(append(append([]string{}, addrs[i:]...), addrs[:i]...), ",")
}

// redisMasterOf returns the address of the master that holds key's slot.
func redisMasterOf(t *testing.T, seeds []string, key string) string {
	t.Helper()
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: seeds})
	defer rdb.Close()
	slots, err := rdb.ClusterSlots(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	slot := apitest.Slot(key)
	for _, s := range slots {
		if slot >= int(s.Start) && slot <= int(s.End) && len(s.Nodes) > 0 {
			return s.Nodes[0].Addr
		}
	}
	t.Fatalf("no master holds slot %d", slot)
	return ""
}

// outage returns the longest run without a 202, in the load's 250 ms buckets between
// seconds from and to after its start.
func (l *load) outage(from, to float64) time.Duration {
	longest, run := 0, 0
	for i := int(from * 4); i < int(to*4) && i < len(l.buckets); i++ {
		if l.buckets[i].Load() == 0 {
			run++
			longest = max(longest, run)
		} else {
			run = 0
		}
	}
	return time.Duration(longest) * 250 * time.Millisecond
}

// since is the time since the load started, in seconds.
func (l *load) since() float64 { return time.Since(l.start).Seconds() }

// waitResumed waits until at least n more events are accepted, or d passes.
func (l *load) waitResumed(n int64, d time.Duration) bool {
	from := l.accepted.Load()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if l.accepted.Load() >= from+n {
			return true
		}
		time.Sleep(50 * time.Millisecond)
	}
	return false
}

// TestScaleOnClusters: the scale-out test over the distributed engines. Two edges and
// two consumers (separate processes, one embedded broker, four partitions) run over a
// Redis Cluster of three masters and three replicas and a ClickHouse cluster of two
// shards × two replicas with the clustered schema. Under load the test kills (SIGKILL)
// one edge and one consumer, then the Redis master that holds the API key's rate-limit
// windows and idempotency records (its replica is promoted), then the ClickHouse
// replica the surviving consumer writes through; it restarts both. Every event
// answered 202 is then in the events table exactly once (each event_id once: the load
// repeats some, in later batches and on two edges at once), on both replicas of its
// shard, in the daily rollups, and in GET /pixel-rollups.
func TestScaleOnClusters(t *testing.T) {
	cl := clustersOrSkip(t)
	begin := time.Now()
	in := newInstance(t)
	db := in.getenv("SVC_CLICKHOUSE_DB")
	t.Cleanup(func() {
		chQueryOn(port(cl.chAddrs[0]), "DROP DATABASE IF EXISTS "+db+" ON CLUSTER "+cl.chCluster)
	})
	brokerAddr := in.getenv("SVC_EMBEDDED_KAFKA_ADDR")
	in.env = append(in.env, "SVC_KAFKA_PARTITIONS=4", "SVC_ROLLUP_BATCH_INTERVAL=200ms", "SVC_IDEMPOTENCY_PENDING_TTL=3s")
	in.spawn(t, "broker")
	in.run("migrate")
	t.Logf("clustered schema applied in %.1fs", time.Since(begin).Seconds())
	s := &scaleSetup{in: in}
	s.provision(t, 8)
	kafka := "SVC_KAFKA_BROKERS=" + brokerAddr
	s.edges = []*proc{in.spawn(t, "ingest", kafka), in.spawn(t, "ingest", kafka)}
	// Each consumer prefers a server of another shard; the second one's is killed below.
	s.consumers = []*proc{
		in.spawn(t, "rollup", kafka, "SVC_CLICKHOUSE_ADDR="+rotate(cl.chAddrs, 0)),
		in.spawn(t, "rollup", kafka, "SVC_CLICKHOUSE_ADDR="+rotate(cl.chAddrs, 2)),
	}
	reader := in.spawn(t, "api", "SVC_CLICKHOUSE_ADDR="+rotate(cl.chAddrs, 1))
	// The privacy worker repairs the rollups of an INSERT cut between its parts (the
	// ClickHouse server killed below may be running one).
	worker := in.spawn(t, "webhooks", "SVC_CLICKHOUSE_ADDR="+rotate(cl.chAddrs, 1), "SVC_PRIVACY_POLL=200ms")
	for _, p := range append(append(s.edges, s.consumers...), reader, worker) {
		p.WaitReady(t, 60*time.Second)
	}
	started := time.Now()
	t.Logf("set up in %.1fs", time.Since(begin).Seconds())

	l := s.startLoad(t, 4)
	time.Sleep(3 * time.Second)
	l.killEdge(0)
	s.consumers[0].Kill()
	gap, gaps := in.failoverGap(time.Now(), 20*time.Second)
	t.Logf("edge and consumer killed at %.1fs; the consumer's partitions consumed again after %.1fs (%s)", 3.0, gap.Seconds(), formatGaps(gaps))
	if gap > 10*time.Second {
		t.Errorf("the killed consumer's partitions were consumed again only after %.1fs; want within 10 s", gap.Seconds())
	}

	master := redisMasterOf(t, cl.redisSeeds, limits.Keys(s.keyID)[0])
	redisKilled := l.since()
	script(t, "deploy/local/redis-cluster.sh", "kill", port(master))
	time.Sleep(time.Second)
	if !l.waitResumed(200, 30*time.Second) {
		t.Fatalf("no 202 for 30 s after the Redis master %s was killed", master)
	}
	resumed := l.since()
	chNode, chAddr := "s2r1", cl.chAddrs[2]
	script(t, "deploy/local/clickhouse-cluster.sh", "kill", chNode)
	chKilled := l.since()
	time.Sleep(4 * time.Second)
	script(t, "deploy/local/clickhouse-cluster.sh", "up")
	script(t, "deploy/local/redis-cluster.sh", "up")
	time.Sleep(3 * time.Second)
	l.finish()
	if t.Failed() {
		return
	}
	t.Logf("Redis master %s killed at %.1fs: longest run without a 202 %.1fs, load resumed by %.1fs; ClickHouse %s (%s) killed at %.1fs, restarted 4 s later",
		master, redisKilled, l.outage(redisKilled, resumed+1).Seconds(), resumed, chNode, chAddr, chKilled)

	want := l.stored()
	logs := func() string {
		return "consumer log:\n" + s.consumers[1].Output() + "\nedge log:\n" + s.edges[1].Output()
	}
	in.waitExact(t, want, 120*time.Second, logs)
	checkReplicas(t, cl, db, want)
	checkRollups(t, in, db, want)
	checkReadAPI(t, s, l, reader)
	t.Logf("stored %d events of %d accepted (%d copies of an event_id dropped) in %.0fs of load; events table, both replicas of each shard, the rollups and GET /pixel-rollups agree; %d repairs of an unsure INSERT's rollups; whole test %.0fs",
		want, l.accepted.Load(), l.copies.Load(), l.since(), strings.Count(worker.Output(), "rollups repaired after unsure inserts"), time.Since(started).Seconds())
}

// checkReplicas waits until the two replicas of each shard hold the same rows, and the
// shards together hold want events with distinct ids.
func checkReplicas(t *testing.T, cl clusters, db string, want int64) {
	t.Helper()
	q := "SELECT count(), uniqExact(event_id) FROM " + db + ".events_local"
	deadline := time.Now().Add(60 * time.Second)
	for {
		var got []string
		total := int64(0)
		for i, a := range cl.chAddrs {
			out, err := chQueryOn(port(a), q)
			if err != nil {
				out = "error: " + err.Error()
			}
			got = append(got, out)
			if i%2 == 0 {
				n, _ := strconv.ParseInt(strings.Fields(out + " 0")[0], 10, 64)
				total += n
			}
		}
		if len(got) == 4 && got[0] == got[1] && got[2] == got[3] && total == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("replicas (s1r1, s1r2, s2r1, s2r2) hold %q; want pairs equal and %d in all", got, want)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// checkRollups: the daily rollups count every event once.
func checkRollups(t *testing.T, in *instance, db string, want int64) {
	t.Helper()
	q := "SELECT countMerge(events_state) FROM " + db + ".pixel_rollups_daily"
	deadline := time.Now().Add(60 * time.Second)
	for {
		got, err := in.chQuery(q)
		if err == nil && got == strconv.FormatInt(want, 10) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("rollups count %q events, want %d (%v)", got, want, err)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// checkReadAPI: GET /pixel-rollups on the read API gives each pixel its accepted events.
func checkReadAPI(t *testing.T, s *scaleSetup, l *load, reader *proc) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for i, px := range s.pixels {
		want := l.perPixel[i].Load()
		for {
			got, err := rollupEvents(reader, s.secret, px)
			if err == nil && got == want {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("GET /pixel-rollups for %s: %d events (%v), want %d", px, got, err, want)
			}
			time.Sleep(500 * time.Millisecond)
		}
	}
}

// rollupEvents sums the events of every day of pixel px in GET /v1/pixel-rollups.
func rollupEvents(reader *proc, secret, px string) (int64, error) {
	req, _ := http.NewRequest("GET", "http://"+reader.Addr+"/v1/pixel-rollups?pixel_id="+px, nil)
	req.Header.Set("Authorization", "Bearer "+secret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		return 0, fmt.Errorf("%d: %s", resp.StatusCode, b)
	}
	var page struct {
		Data []struct {
			Events int64 `json:"events"`
		} `json:"data"`
	}
	if err := json.Unmarshal(b, &page); err != nil {
		return 0, err
	}
	n := int64(0)
	for _, d := range page.Data {
		n += d.Events
	}
	return n, nil
}
