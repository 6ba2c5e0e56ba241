package rollup

import (
	"context"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"svc/lib/svctest"
	"svc/schema"
)

// metric sums the samples of the named metric in reg (all label values).
func metric(t *testing.T, reg prometheus.Registerer, name string) float64 {
	t.Helper()
	mfs, err := reg.(prometheus.Gatherer).Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			switch {
			case m.Counter != nil:
				sum += m.Counter.GetValue()
			case m.Gauge != nil:
				sum += m.Gauge.GetValue()
			case m.Histogram != nil:
				sum += float64(m.Histogram.GetSampleCount())
			}
		}
	}
	return sum
}

func TestConsumeExactTotals(t *testing.T) {
	w := newWorld(t, 4)
	w.produce(300)
	cfg := w.config("g-exact")
	stop := w.start(cfg)
	w.waitExact(20 * time.Second)
	w.produce(50) // a second round after the first flushes
	w.waitExact(10 * time.Second)
	if err := stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if got := metric(t, cfg.Registerer, "svc_rollup_rows_inserted_total"); int(got) != w.produced {
		t.Errorf("rows inserted metric %v, want %d", got, w.produced)
	}
	if metric(t, cfg.Registerer, "svc_rollup_event_age_seconds") == 0 {
		t.Error("no event age observed")
	}
}

func TestKillBetweenInsertAndCommitThenRestart(t *testing.T) {
	w := newWorld(t, 4)
	w.produce(400)
	cfg := w.config("g-kill")
	cfg.BatchRows = 1000 // several flushes for 400 batches (~10k events)
	// The first consumer dies after its third INSERT, before that batch's commit.
	var killed func() bool
	cfg.testAfterInsert, killed = killOn(3, "killed")
	stop := w.start(cfg)
	svctest.WaitFor(t, 20*time.Second, "the third INSERT", killed)
	stopKilled(t, stop)
	if n, _ := w.rawCheck(); n == 0 {
		t.Fatal("nothing was inserted before the kill")
	}
	cfg2 := w.config("g-kill")
	stop2 := w.start(cfg2)
	w.waitExact(20 * time.Second)
	if err := stop2(); err != nil {
		t.Fatal(err)
	}
	if metric(t, cfg2.Registerer, "svc_rollup_skipped_records_total") == 0 {
		t.Error("the restarted consumer skipped nothing: the kill did not leave an uncommitted insert")
	}
}

func TestRebalanceBetweenConsumersWhileProducing(t *testing.T) {
	w := newWorld(t, 6)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			w.produce(10)
			time.Sleep(15 * time.Millisecond)
		}
	}()
	a := w.start(w.config("g-rebalance"))
	time.Sleep(700 * time.Millisecond)
	b := w.start(w.config("g-rebalance"))
	time.Sleep(1500 * time.Millisecond)
	if err := a(); err != nil { // a leaves: everything moves to b
		t.Fatalf("stop a: %v", err)
	}
	time.Sleep(500 * time.Millisecond)
	c := w.start(w.config("g-rebalance")) // and a third joins
	time.Sleep(800 * time.Millisecond)
	cancel()
	wg.Wait()
	w.waitExact(30 * time.Second)
	if err := b(); err != nil {
		t.Fatal(err)
	}
	if err := c(); err != nil {
		t.Fatal(err)
	}
}

func TestPoisonRecordGoesToDeadLetterTopic(t *testing.T) {
	w := newWorld(t, 2)
	w.produce(20)
	poison := &kgo.Record{Topic: schema.TopicEvents, Partition: 0, Key: []byte("pxl"), Value: []byte("not a batch"),
		Headers: []kgo.RecordHeader{{Key: schema.HeaderSchema, Value: []byte(schema.SchemaEventsV1)}}}
	if err := w.prod.ProduceSync(context.Background(), poison).FirstErr(); err != nil {
		t.Fatal(err)
	}
	// More good records after it on the same partition must still arrive.
	rs := make([]*kgo.Record, 0, 20)
	for i := 0; i < 20; i++ {
		b, _ := w.batch()
		rs = append(rs, record(b, 0))
	}
	if err := w.prod.ProduceSync(context.Background(), rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	cfg := w.config("g-poison")
	stop := w.start(cfg)
	w.waitExact(20 * time.Second)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if got := metric(t, cfg.Registerer, "svc_rollup_dead_letters_total"); got != 1 {
		t.Errorf("dead letters metric %v, want 1", got)
	}
	dl := readDeadLetters(t, w.seeds, 1)
	if string(dl[0].Value) != "not a batch" || string(dl[0].Key) != "pxl" {
		t.Errorf("dead letter key/value %q/%q", dl[0].Key, dl[0].Value)
	}
	reason := string(headerValue(dl[0], schema.HeaderDLQReason))
	if reason == "" || reason[:len(ReasonBadMagic)] != ReasonBadMagic {
		t.Errorf("reason header %q, want %s: ...", reason, ReasonBadMagic)
	}
}

func readDeadLetters(t *testing.T, seeds []string, n int) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumeTopics(schema.TopicDeadEvent),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var out []*kgo.Record
	for len(out) < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d dead letters, want %d", len(out), n)
		}
		out = append(out, fs.Records()...)
	}
	return out
}

// proxy is a TCP proxy in front of ClickHouse that a test can take down and bring back
// on the same address, cutting every open connection.
type proxy struct {
	t      *testing.T
	addr   string
	target string
	mu     sync.Mutex
	ln     net.Listener
	conns  map[net.Conn]bool
}

func newProxy(t *testing.T, target string) *proxy {
	p := &proxy{t: t, target: target, conns: map[net.Conn]bool{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.addr = ln.Addr().String()
	p.serve(ln)
	t.Cleanup(p.down)
	return p
}

func (p *proxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.pipe(c)
		}
	}()
}

func (p *proxy) pipe(c net.Conn) {
	s, err := net.Dial("tcp", p.target)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	if p.ln == nil {
		p.mu.Unlock()
		c.Close()
		s.Close()
		return
	}
	p.conns[c], p.conns[s] = true, true
	p.mu.Unlock()
	go func() { _, _ = io.Copy(s, c); s.Close(); c.Close() }()
	_, _ = io.Copy(c, s)
	c.Close()
	s.Close()
}

func (p *proxy) down() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		c.Close()
	}
	p.conns = map[net.Conn]bool{}
}

func (p *proxy) up() {
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		p.t.Fatal(err)
	}
	p.serve(ln)
}

func TestClickHouseDownThenBack(t *testing.T) {
	w := newWorld(t, 4)
	px := newProxy(t, w.ch.Addr)
	cfg := w.config("g-down")
	cfg.ClickHouse.Addr = px.addr
	cfg.ClickHouse.DialTimeout = time.Second
	w.produce(100)
	stop := w.start(cfg)
	w.waitExact(20 * time.Second)

	px.down()
	w.produce(300)
	deadline := time.Now().Add(10 * time.Second)
	for metric(t, cfg.Registerer, "svc_rollup_insert_errors_total") < 2 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if metric(t, cfg.Registerer, "svc_rollup_insert_errors_total") < 2 {
		t.Fatal("the consumer did not notice ClickHouse was down")
	}
	w.produce(100)
	time.Sleep(300 * time.Millisecond)
	px.up()
	w.waitExact(30 * time.Second)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

// A topic deleted and created again (here: a new embedded broker over the same
// database) starts its offsets at 0 again; the rows of the old incarnation must not make
// the consumer skip the new one's records as already stored.
func TestRecreatedTopicIsNotSkippedAsStored(t *testing.T) {
	w := newWorld(t, 4)
	w.produce(200)
	stop := w.start(w.config("g-recreate"))
	w.waitExact(20 * time.Second)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	w.newBroker()
	w.produce(50) // offsets 0.. again, below what the first broker's rows reached
	cfg := w.config("g-recreate")
	stop = w.start(cfg)
	w.waitExact(20 * time.Second)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if got := metric(t, cfg.Registerer, "svc_rollup_skipped_records_total"); got != 0 {
		t.Errorf("%v records of the new topic skipped as already stored", got)
	}
	var labels uint64
	if err := w.conn.QueryRow(context.Background(), "SELECT uniqExact(kafka_topic) FROM events").Scan(&labels); err != nil {
		t.Fatal(err)
	}
	if labels != 2 {
		t.Errorf("rows carry %d kafka_topic labels, want 2 (one per incarnation)", labels)
	}
}
