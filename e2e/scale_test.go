package e2e

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"svc/lib/svctest"
)

// proc is one svc process of a multi-process topology.
type proc struct{ *svctest.Proc }

// post sends body to p's POST /v1/events with the secret and headers (name, value, ...).
func (p *proc) post(t *testing.T, secret, body string, headers ...string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest("POST", "http://"+p.Addr+"/v1/events", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+secret)
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := (&http.Client{Timeout: 15 * time.Second}).Do(req)
	if err != nil {
		return 0, []byte(err.Error())
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func (in *instance) spawn(t *testing.T, name string, extra ...string) *proc {
	t.Helper()
	env := append(append(append([]string{}, in.env...), "SVC_METRICS_ADDR=off"), extra...)
	p := &proc{svctest.Start(t, env, svctest.FreeAddr(t), strings.Fields(name)[0])}
	p.Name = name
	return p
}

// scaleSetup is a multi-process topology: a migrated database, one workspace with
// pixels and a key, two edges and two consumers sharing one broker.
type scaleSetup struct {
	in        *instance
	pixels    []string // pxl_… ids
	pixelIDs  []string // their UUIDs
	keyID     string   // the key's UUID
	secret    string
	edges     []*proc
	consumers []*proc
}

// provision creates the workspace, npixels pixels and a key with raised limits.
func (s *scaleSetup) provision(t *testing.T, npixels int) {
	ws := field(t, s.in.run("admin", "workspace", "create", "--name", "Scale"), "id")
	for i := 0; i < npixels; i++ {
		px := s.in.run("admin", "pixel", "create", "--workspace", ws)
		s.pixels = append(s.pixels, field(t, px, "id"))
		s.pixelIDs = append(s.pixelIDs, field(t, px, "id_uuid"))
	}
	key := s.in.run("admin", "key", "create", "--workspace", ws, "--env", "live", "--scopes", "events:write,pixels:read",
		"--burst", "1000000", "--daily", "100000000")
	s.secret, s.keyID = field(t, key, "secret"), field(t, key, "id_uuid")
}

// load sends batches of perBatch events from workers goroutines, each batch with its
// own Idempotency-Key, retried with that key (on the next live edge) until an edge
// answers 202. Every event carries a client event_id, and some are copies, which the
// service stores once: every fourth batch of a worker repeats copiesPerBatch events of
// that worker's last batch on the same pixel, and every fifth is sent twice at the same
// moment, under two keys, to two edges.
type load struct {
	s        *scaleSetup
	dead     []atomic.Bool  // per edge
	accepted atomic.Int64   // events answered 202: copies included
	copies   atomic.Int64   // of accepted, the copies of an event accepted before or beside
	perPixel []atomic.Int64 // events to be stored per pixel (index of scaleSetup.pixels)
	buckets  []atomic.Int64 // 202s per 250 ms since start
	start    time.Time
	stop     chan struct{}
	wg       sync.WaitGroup
	client   *http.Client
}

const perBatch, copiesPerBatch = 10, 3

// stored is how many events the service must store: each event_id once.
func (l *load) stored() int64 { return l.accepted.Load() - l.copies.Load() }

func (s *scaleSetup) startLoad(t *testing.T, workers int) *load {
	l := &load{s: s, dead: make([]atomic.Bool, len(s.edges)), buckets: make([]atomic.Int64, 400),
		perPixel: make([]atomic.Int64, len(s.pixels)),
		start:    time.Now(), stop: make(chan struct{}),
		// Keep-alive connections for every request in flight (workers and their twins): with
		// net/http's default of two idle connections a host, the surviving edge's share
		// would be redialed request by request after the kill, a cost of this client's.
		client: &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 4 * workers}}}
	for w := 0; w < workers; w++ {
		l.wg.Add(1)
		go func(w int) {
			defer l.wg.Done()
			last := map[int][]string{} // pixel → event ids of the worker's last batch there
			for n := 0; ; n++ {
				select {
				case <-l.stop:
					return
				default:
				}
				if !l.sendBatch(t, w, n, last) {
					return
				}
			}
		}(w)
	}
	return l
}

// sendBatch sends worker w's batch n until it is accepted (and, for every fifth, its
// twin beside it); false on a failure that ends the worker (reported).
func (l *load) sendBatch(t *testing.T, w, n int, last map[int][]string) bool {
	px := (w + n) % len(l.s.pixels)
	var ids []string
	copies := 0
	if n%4 == 3 && len(last[px]) >= copiesPerBatch {
		ids, copies = append(ids, last[px][:copiesPerBatch]...), copiesPerBatch
	}
	for i := len(ids); i < perBatch; i++ {
		ids = append(ids, fmt.Sprintf("w%d-n%d-%d", w, n, i))
	}
	at := time.Now().UTC().Add(-time.Minute).Format(time.RFC3339)
	var evs []string
	for _, id := range ids {
		evs = append(evs, fmt.Sprintf(`{"event_id":%q,"event_name":"purchase","occurred_at":%q,"value":1,"currency":"EUR","consent":{"measurement":true}}`, id, at))
	}
	body := fmt.Sprintf(`{"pixel_id":%q,"events":[%s]}`, l.s.pixels[px], strings.Join(evs, ","))
	key := fmt.Sprintf("w%d-n%d", w, n)
	ok := true
	if n%5 == 0 {
		// The twin: the same events under another key, on another edge, at the same moment.
		done := make(chan bool, 1)
		go func() { done <- l.sendUntilAccepted(t, w+n+1, body, key+"-twin") }()
		ok = l.sendUntilAccepted(t, w+n, body, key)
		ok = <-done && ok
		copies += perBatch
	} else {
		ok = l.sendUntilAccepted(t, w+n, body, key)
	}
	if !ok {
		return false
	}
	sent := perBatch
	if n%5 == 0 {
		sent = 2 * perBatch
	}
	l.accepted.Add(int64(sent))
	l.copies.Add(int64(copies))
	l.perPixel[px].Add(int64(sent - copies))
	if b := int(time.Since(l.start) / (250 * time.Millisecond)); b < len(l.buckets) {
		l.buckets[b].Add(1)
	}
	last[px] = ids[copies%perBatch:]
	return true
}

// sendUntilAccepted sends body with key, from edge i on, until an edge answers 202.
func (l *load) sendUntilAccepted(t *testing.T, i int, body, key string) bool {
	for try := 0; ; try++ {
		st, err := l.send(l.edge(i+try), body, key)
		if err == nil && st == 202 {
			return true
		}
		if err == nil && st != 503 && st != 409 {
			t.Errorf("POST /events: %d", st)
			return false
		}
		if try > 600 {
			t.Errorf("batch %s never accepted", key)
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// edge returns the i-th live edge (modulo the edges).
func (l *load) edge(i int) *proc {
	for k := 0; k < len(l.s.edges); k++ {
		j := (i + k) % len(l.s.edges)
		if !l.dead[j].Load() {
			return l.s.edges[j]
		}
	}
	return l.s.edges[0]
}

func (l *load) send(edge *proc, body, key string) (int, error) {
	req, _ := http.NewRequest("POST", "http://"+edge.Addr+"/v1/events", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+l.s.secret)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	resp, err := l.client.Do(req)
	if err != nil {
		return 0, err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

// killEdge kills edge i; clients retry on the others from then on.
func (l *load) killEdge(i int) {
	l.dead[i].Store(true)
	l.s.edges[i].Kill()
}

func (l *load) finish() {
	close(l.stop)
	l.wg.Wait()
}

// perSecond is the 202s of each of the first n seconds after the start.
func (l *load) perSecond(n int) string {
	var b strings.Builder
	for k := 0; k < n; k++ {
		fmt.Fprintf(&b, " %.0f", l.rate(float64(k), float64(k+1)))
	}
	return strings.TrimSpace(b.String())
}

// rate is the 202s per second between seconds from and to after the start.
func (l *load) rate(from, to float64) float64 {
	n := int64(0)
	for i := int(from * 4); i < int(to*4); i++ {
		n += l.buckets[i].Load()
	}
	return float64(n) / (to - from)
}

// chQuery runs q on the instance's ClickHouse (the first of SVC_CLICKHOUSE_ADDR) and
// returns the trimmed TSV answer.
func (in *instance) chQuery(q string) (string, error) {
	port := chPort()
	first, _, _ := strings.Cut(in.getenv("SVC_CLICKHOUSE_ADDR"), ",")
	if _, p, err := net.SplitHostPort(first); err == nil {
		port = p
	}
	return chQueryOn(port, q)
}

// chQueryOn runs q on the ClickHouse at 127.0.0.1:port.
func chQueryOn(port, q string) (string, error) {
	out, err := exec.Command("clickhouse-client", "--port", port, "-q", q).Output()
	return strings.TrimSpace(string(out)), err
}

// partitionOffsets returns the highest stored Kafka offset per partition.
func (in *instance) partitionOffsets() map[int]int64 {
	out, err := in.chQuery("SELECT kafka_partition, max(kafka_offset) FROM " + in.getenv("SVC_CLICKHOUSE_DB") + ".events GROUP BY kafka_partition")
	if err != nil {
		return nil
	}
	m := map[int]int64{}
	for _, line := range strings.Split(out, "\n") {
		p, o, ok := strings.Cut(line, "\t")
		if !ok {
			continue
		}
		pi, _ := strconv.Atoi(p)
		oi, _ := strconv.ParseInt(o, 10, 64)
		m[pi] = oi
	}
	return m
}

// failoverGap measures how long after killedAt every partition that held rows then is
// consumed again (its highest stored offset moves): the partitions of the killed
// consumer stall until the group hands them to a survivor; the others move at once.
// It gives up after limit and returns the gaps per partition.
func (in *instance) failoverGap(killedAt time.Time, limit time.Duration) (time.Duration, map[int]time.Duration) {
	time.Sleep(300 * time.Millisecond) // an INSERT the dead consumer had sent lands first
	base := in.partitionOffsets()
	gaps := map[int]time.Duration{}
	for time.Since(killedAt) < limit && len(gaps) < len(base) {
		now := in.partitionOffsets()
		for p, o := range base {
			if _, done := gaps[p]; !done && now[p] > o {
				gaps[p] = time.Since(killedAt)
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	worst := time.Duration(0)
	for p := range base {
		g, ok := gaps[p]
		if !ok {
			g = limit
		}
		worst = max(worst, g)
	}
	return worst, gaps
}

func formatGaps(gaps map[int]time.Duration) string {
	var ps []int
	for p := range gaps {
		ps = append(ps, p)
	}
	sort.Ints(ps)
	var b strings.Builder
	for _, p := range ps {
		fmt.Fprintf(&b, " p%d=%.1fs", p, gaps[p].Seconds())
	}
	return strings.TrimSpace(b.String())
}

// waitExact waits until the events table holds exactly want events with want distinct
// ids (so nothing lost, nothing doubled).
func (in *instance) waitExact(t *testing.T, want int64, d time.Duration, logs func() string) {
	t.Helper()
	q := "SELECT count(), uniqExact(event_id) FROM " + in.getenv("SVC_CLICKHOUSE_DB") + ".events"
	wantS := fmt.Sprintf("%d\t%d", want, want)
	deadline := time.Now().Add(d)
	for {
		got, err := in.chQuery(q)
		if err == nil && got == wantS {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("events table %q, want %q (count, distinct ids)\n%s", got, wantS, logs())
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// TestScaleOutSurvivesLosingAnEdgeAndAConsumer: two edges and two consumers as
// separate processes against one broker with four partitions, with the consumer
// group's default session timeout. Under load, one edge and one consumer are killed
// with SIGKILL; clients retry on the other edge with the same Idempotency-Key. The
// killed consumer's partitions are consumed again within 10 s (the failover figure is
// logged), every event answered 202 is stored exactly once (each event_id once: the
// load repeats some, in later batches and on two edges at once), and throughput
// recovers on the surviving edge.
func TestScaleOutSurvivesLosingAnEdgeAndAConsumer(t *testing.T) {
	in := newInstance(t)
	brokerAddr := in.getenv("SVC_EMBEDDED_KAFKA_ADDR")
	in.env = append(in.env, "SVC_KAFKA_PARTITIONS=4", "SVC_ROLLUP_BATCH_INTERVAL=200ms", "SVC_IDEMPOTENCY_PENDING_TTL=3s")
	in.spawn(t, "broker")
	in.run("migrate")
	s := &scaleSetup{in: in}
	s.provision(t, 8)
	kafka := "SVC_KAFKA_BROKERS=" + brokerAddr
	s.edges = []*proc{in.spawn(t, "ingest", kafka), in.spawn(t, "ingest", kafka)}
	s.consumers = []*proc{in.spawn(t, "rollup", kafka), in.spawn(t, "rollup", kafka)}
	for _, p := range append(s.edges, s.consumers...) {
		p.WaitReady(t, 30*time.Second)
	}

	l := s.startLoad(t, 4)
	time.Sleep(3 * time.Second)
	l.killEdge(0)
	s.consumers[0].Kill()
	killedAt := time.Now()
	gap, gaps := in.failoverGap(killedAt, 20*time.Second)
	if rest := 10*time.Second - time.Since(l.start); rest > 0 {
		time.Sleep(rest) // the throughput window below ends 10 s after the start
	}
	l.finish()
	if t.Failed() {
		return
	}
	// Recovery is measured once the killed edge's reservations have lapsed (the pending
	// TTL, 3 s after the kill at 3 s, and a retry's 50 ms): until then the retries of the
	// batches it held are answered idempotency_key_in_use, by design.
	before, after := l.rate(1, 3), l.rate(6.5, 10)
	t.Logf("accepted %d events (%d copies of an event_id); 202/s before the kill %.0f, after %.0f (each second: %s); a killed consumer's partitions consumed again after %.1fs (%s)",
		l.accepted.Load(), l.copies.Load(), before, after, l.perSecond(10), gap.Seconds(), formatGaps(gaps))
	if after < before/3 {
		t.Fatalf("throughput did not recover: %.0f/s after vs %.0f/s before", after, before)
	}
	if gap > 10*time.Second {
		t.Errorf("the killed consumer's partitions were consumed again only after %.1fs (%s); want within 10 s", gap.Seconds(), formatGaps(gaps))
	}
	in.waitExact(t, l.stored(), 60*time.Second, func() string { return "consumer log:\n" + s.consumers[1].Output() })
}
