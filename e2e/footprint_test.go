package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestIdempotencyFootprint measures what idempotent POST /events leave in Redis: the
// growth of used_memory (summed over the masters of a cluster) while svc dev (edge,
// embedded broker, rollup consumer) answers N batches, each with its own Idempotency-Key,
// and the consumer stores them (so every batch's claim is in), divided by N. It reads
// used_memory, so it needs a Redis that nobody else uses and runs only when told which:
//
//	redis-server --port 6390 --save '' --appendonly no --daemonize yes
//	SVC_FOOTPRINT_REDIS=redis://127.0.0.1:6390/0 go test -count=1 -run TestIdempotencyFootprint -v .
//	SVC_FOOTPRINT_REDIS=127.0.0.1:7100,127.0.0.1:7101,127.0.0.1:7102 go test ...   # a cluster's seeds
//
// SVC_FOOTPRINT_N (100000) is the number of requests, SVC_FOOTPRINT_MAX (120) the most
// bytes per request the test accepts, of used_memory's growth less what buffers took:
// the clients' (mem_clients_normal: a query buffer for each connection that was busy
// when it was read, 0.1 to 1.9 MB over a cluster's masters from one run to the next)
// and the replication stream's (mem_replication_backlog and mem_clients_slaves: on a
// cluster's masters the backlog fills up to repl-backlog-size, 1 MB each, after every
// restart, whatever is written). Both are bounded per connection or per master, not per
// request; the test prints them and the figure with them (bench/HISTORY.md, stop 54).
func TestIdempotencyFootprint(t *testing.T) {
	target := os.Getenv("SVC_FOOTPRINT_REDIS")
	if target == "" {
		t.Skip("SVC_FOOTPRINT_REDIS not set (a Redis of its own: the test reads used_memory)")
	}
	n := envInt(t, "SVC_FOOTPRINT_N", 100000)
	limit := envInt(t, "SVC_FOOTPRINT_MAX", 120)
	in := newInstance(t)
	var rdb redis.UniversalClient
	if strings.HasPrefix(target, "redis://") {
		in.env = append(in.env, "SVC_REDIS_URL="+target, "SVC_REDIS_CLUSTER=")
		opt, err := redis.ParseURL(target)
		if err != nil {
			t.Fatal(err)
		}
		rdb = redis.NewClient(opt)
	} else {
		in.env = append(in.env, "SVC_REDIS_CLUSTER="+target)
		rdb = redis.NewClusterClient(&redis.ClusterOptions{Addrs: strings.Split(target, ",")})
	}
	defer rdb.Close()
	in.env = append(in.env, "SVC_ROLLUP_BATCH_INTERVAL=200ms")
	db := in.getenv("SVC_CLICKHOUSE_DB")
	in.run("migrate")
	ws := field(t, in.run("admin", "workspace", "create", "--name", "Footprint"), "id")
	const nkeys = 4
	var pixels, secrets []string
	for i := 0; i < nkeys; i++ {
		pixels = append(pixels, field(t, in.run("admin", "pixel", "create", "--workspace", ws), "id"))
		secrets = append(secrets, field(t, in.run("admin", "key", "create", "--workspace", ws, "--env", "live",
			"--scopes", "events:write", "--burst", "100000000", "--daily", "1000000000"), "secret"))
	}
	in.start()

	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	const perBatch = 5
	at := time.Now().UTC().Add(-time.Minute).Format(time.RFC3339)
	event := fmt.Sprintf(`{"event_name":"purchase","occurred_at":%q,"value":9.5,"currency":"EUR","consent":{"measurement":true}}`, at)
	body := func(j int) string {
		evs := strings.TrimSuffix(strings.Repeat(event+",", perBatch), ",")
		return fmt.Sprintf(`{"pixel_id":%q,"events":[%s]}`, pixels[j%nkeys], evs)
	}
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	send := func(j int, key string) error {
		req, _ := http.NewRequest("POST", "http://"+in.http+"/v1/events", strings.NewReader(body(j)))
		req.Header.Set("Authorization", "Bearer "+secrets[j%nkeys])
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", key)
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != 202 {
			return fmt.Errorf("POST /events: %d", resp.StatusCode)
		}
		return nil
	}
	// One batch per key first: key records cached, rate-limit windows and scripts in.
	for j := 0; j < nkeys; j++ {
		if err := send(j, "warm-"+run+"-"+strconv.Itoa(j)); err != nil {
			t.Fatal(err)
		}
	}
	waitEvents(t, in, db, nkeys*perBatch, time.Minute)
	before, clients0, repl0, cpu0 := usedMemory(t, rdb)

	start := time.Now()
	var next atomic.Int64
	var failed atomic.Value
	var wg sync.WaitGroup
	for w := 0; w < 64; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := int(next.Add(1)) - 1; j < n && failed.Load() == nil; j = int(next.Add(1)) - 1 {
				if err := send(j, "fp-"+run+"-"+strconv.Itoa(j)); err != nil {
					failed.Store(err)
				}
			}
		}()
	}
	wg.Wait()
	if err, _ := failed.Load().(error); err != nil {
		t.Fatal(err)
	}
	sent := time.Since(start)
	waitEvents(t, in, db, (nkeys+n)*perBatch, 5*time.Minute)
	after, clients1, repl1, cpu1 := usedMemory(t, rdb)
	raw := float64(after-before) / float64(n)
	per := float64(after-before-(repl1-repl0)-(clients1-clients0)) / float64(n)
	t.Logf("%d idempotent POST /events in %s: %.1f B per request (answer and batch claim): used_memory %d -> %d B, "+
		"less the clients' buffers, %d -> %d B, and the replication stream's, %d -> %d B (%.1f B per request with them); "+
		"Redis CPU %.1f µs per request", n, sent.Round(time.Millisecond), per, before, after, clients0, clients1,
		repl0, repl1, raw, (cpu1-cpu0)*1e6/float64(n))
	if per > float64(limit) {
		t.Errorf("%.1f B per idempotent request, want at most %d", per, limit)
	}
}

func envInt(t *testing.T, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a positive number", name, v)
	}
	return n
}

// waitEvents waits until the instance's events table holds want rows.
func waitEvents(t *testing.T, in *instance, db string, want int, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		got, err := in.chQuery("SELECT count() FROM " + db + ".events")
		if err == nil && got == strconv.Itoa(want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("events table: %q (%v), want %d rows", got, err, want)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// usedMemory sums used_memory over rdb's masters, after a pause that lets lazy frees and
// client buffers settle; what of it the clients' buffers take (mem_clients_normal) and
// the replication stream's (mem_replication_backlog, mem_clients_slaves); and the CPU
// seconds (user and system) the masters have used.
func usedMemory(t *testing.T, rdb redis.UniversalClient) (mem, clients, repl int64, cpu float64) {
	t.Helper()
	time.Sleep(2 * time.Second)
	ctx := context.Background()
	var mu sync.Mutex
	read := func(ctx context.Context, c *redis.Client) error {
		info, err := c.Info(ctx, "memory", "clients", "cpu").Result()
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		for _, line := range strings.Split(info, "\r\n") {
			name, v, _ := strings.Cut(line, ":")
			switch name {
			case "used_memory", "mem_clients_normal", "mem_replication_backlog", "mem_clients_slaves":
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					return err
				}
				switch name {
				case "used_memory":
					mem += n
				case "mem_clients_normal":
					clients += n
				default:
					repl += n
				}
			case "used_cpu_user", "used_cpu_sys":
				f, err := strconv.ParseFloat(v, 64)
				if err != nil {
					return err
				}
				cpu += f
			}
		}
		return nil
	}
	var err error
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, read)
	} else {
		err = read(ctx, rdb.(*redis.Client))
	}
	if err != nil {
		t.Fatal(err)
	}
	return mem, clients, repl, cpu
}
