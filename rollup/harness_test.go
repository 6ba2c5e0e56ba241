package rollup

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/shopspring/decimal"
	"github.com/twmb/franz-go/pkg/kgo"

	"svc/lib/chpool"
	"svc/lib/kafkabroker"
	"svc/lib/process"
	"svc/lib/svctest"
	"svc/schema"
	"svc/schema/chtest"
)

// env is one test's world: an embedded broker, a private migrated database, and the
// totals of everything produced so far, computed independently of ClickHouse.
type world struct {
	t     *testing.T
	seeds []string
	ch    chpool.Config
	conn  driver.Conn
	prod  *kgo.Client
	rng   *rand.Rand
	ws    schema.UUID
	parts int

	// copies, when set, gives half of the events a client event_id from a small pool,
	// so that batches repeat events (the consumer stores each pixel's first copy).
	copies bool

	mu       sync.Mutex
	want     map[string]*total
	produced int             // events
	seen     map[string]bool // pixel and client event id of every event counted
	copied   int             // events left out as a later copy of a client event id
}

type total struct {
	events, consented int
	value             int64
	people            map[[32]byte]bool
}

func newWorld(t *testing.T, partitions int) *world {
	t.Helper()
	ch, conn := chtest.NewDB(t)
	e := &world{t: t, ch: ch, conn: conn, rng: rand.New(rand.NewPCG(1, uint64(time.Now().UnixNano()))), want: map[string]*total{},
		seen: map[string]bool{}, parts: partitions}
	e.ws[0], e.ws[15] = 0xAA, byte(e.rng.IntN(256))
	e.newBroker()
	t.Cleanup(func() { dropClaimsOf(ch.Database) }) // the database goes: its event-id claims too
	return e
}

// newBroker starts an embedded broker (a new one: its topics start at offset 0) and
// points the world's producer and consumers at it.
func (e *world) newBroker() {
	e.t.Helper()
	b, err := kafkabroker.StartEmbedded(kafkabroker.Config{EmbeddedAddr: "127.0.0.1:0", Partitions: e.parts}, schema.Topics...)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(b.Close)
	prod, err := kgo.NewClient(kgo.SeedBrokers(b.Addrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(prod.Close)
	e.seeds, e.prod = b.Addrs(), prod
}

// config is a consumer configuration for tests: small batches, quick retries, fast
// group heartbeats, a private metrics registry.
func (e *world) config(group string) Config {
	return Config{
		Group:            group,
		BatchRows:        1000,
		BatchInterval:    50 * time.Millisecond,
		RetryMin:         20 * time.Millisecond,
		RetryMax:         300 * time.Millisecond,
		InsertTimeout:    5 * time.Second,
		RevokeTimeout:    3 * time.Second,
		SessionTimeout:   3 * time.Second,
		RebalanceTimeout: 10 * time.Second,
		Table:            "events",
		Topic:            schema.TopicEvents,
		DeadTopic:        schema.TopicDeadEvent,
		Kafka:            kafkabroker.Config{Brokers: e.seeds, EmbeddedAddr: "127.0.0.1:0", Partitions: 4},
		ClickHouse:       e.ch,
		Registerer:       prometheus.NewRegistry(),
		testKgoOpts: []kgo.Opt{
			kgo.HeartbeatInterval(100 * time.Millisecond),
			kgo.FetchMaxWait(100 * time.Millisecond),
		},
	}
}

// batch makes a random batch for one of a few pixels, environments, days, names and
// currencies, and adds it to the expected totals.
func (e *world) batch() (*schema.Batch, int32) {
	r := e.rng
	b := &schema.Batch{Workspace: e.ws, Sandbox: r.IntN(3) == 0, ReceivedAt: time.Now().UnixMilli(), RequestID: fmt.Sprintf("req_%d", r.Uint64())}
	pix := r.IntN(3)
	b.Pixel[0], b.Pixel[1] = 0x50, byte(pix)
	b.Key[0] = 0x4B
	n := 1 + r.IntN(schema.MaxEvents)
	for i := 0; i < n; i++ {
		ev := schema.Event{
			Name:       []string{"purchase", "page_view", "lead"}[r.IntN(3)],
			OccurredAt: b.ReceivedAt - int64(r.IntN(4))*86400_000 - int64(r.IntN(3600_000)),
			Consent:    r.IntN(4) != 0,
		}
		for j := range ev.ID {
			ev.ID[j] = byte(r.Uint32())
		}
		if e.copies && r.IntN(2) == 0 {
			ev.ID = schema.ClientEventID(fmt.Appendf(nil, "ev-%d", r.IntN(1500)))
		}
		if r.IntN(2) == 0 {
			ev.HasValue, ev.Value = true, r.Int64N(2_000_000)-100_000
			ev.Currency = [3]byte{'E', 'U', 'R'}
			if r.IntN(3) == 0 {
				ev.Currency = [3]byte{'U', 'S', 'D'}
			}
		}
		if ev.Consent && r.IntN(5) != 0 {
			ev.HasEmail = true
			ev.EmailSHA = sha256.Sum256(fmt.Appendf(nil, "person%d@example.com", r.IntN(40)))
		}
		b.Events = append(b.Events, ev)
	}
	e.add(b)
	return b, int32(pix % e.parts)
}

func rowKey(b *schema.Batch, ev *schema.Event) string {
	day := time.UnixMilli(ev.OccurredAt).UTC().Format("2006-01-02")
	return fmt.Sprintf("%x|%v|%x|%s|%s|%s", b.Workspace, b.Sandbox, b.Pixel, day, ev.Name, strings.TrimRight(string(ev.Currency[:]), "\x00"))
}

// add adds b's events to the expected totals, in the order the consumer reads them:
// each one but a later copy of a client event id of the same pixel (accepted within the
// window: the tests' batches all are).
func (e *world) add(b *schema.Batch) { e.count(b, true) }

// addAll adds every event of b to the expected totals (the caller says which are stored).
func (e *world) addAll(b *schema.Batch) { e.count(b, false) }

func (e *world) count(b *schema.Batch, copies bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for i := range b.Events {
		ev := &b.Events[i]
		if copies && ev.ID.FromClient() {
			id := fmt.Sprintf("%x/%x", b.Pixel, ev.ID)
			if e.seen[id] {
				e.copied++
				continue
			}
			e.seen[id] = true
		}
		k := rowKey(b, ev)
		tt := e.want[k]
		if tt == nil {
			tt = &total{people: map[[32]byte]bool{}}
			e.want[k] = tt
		}
		tt.events++
		if ev.Consent {
			tt.consented++
		}
		if ev.HasValue {
			tt.value += ev.Value
		}
		if ev.Consent && ev.HasEmail {
			tt.people[ev.EmailSHA] = true
		}
		e.produced++
	}
}

// record encodes b as the edge does.
func record(b *schema.Batch, partition int32) *kgo.Record {
	return &kgo.Record{
		Topic: schema.TopicEvents, Partition: partition, Key: b.Pixel[:],
		Value:   schema.AppendBatch(nil, b),
		Headers: []kgo.RecordHeader{{Key: schema.HeaderSchema, Value: []byte(schema.SchemaEventsV1)}},
	}
}

// produce produces n random batches and waits for the acknowledgements.
func (e *world) produce(n int) {
	e.t.Helper()
	rs := make([]*kgo.Record, 0, n)
	for i := 0; i < n; i++ {
		b, p := e.batch()
		rs = append(rs, record(b, p))
	}
	if err := e.prod.ProduceSync(context.Background(), rs...).FirstErr(); err != nil {
		e.t.Fatalf("produce: %v", err)
	}
}

// start runs a consumer until the returned stop is called; stop returns Run's error.
func (e *world) start(cfg Config) (stop func() error) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg) }()
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() { cancel(); err = <-done })
		return err
	}
	e.t.Cleanup(func() { _ = stop() })
	return stop
}

// wantRows renders the expected totals as the rows of pixel_rollups_daily_v.
func (e *world) wantRows() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []string
	for k, v := range e.want {
		out = append(out, fmt.Sprintf("%s|%d|%d|%s|%d", k, v.events, v.consented, decimal.New(v.value, -4), len(v.people)))
	}
	sort.Strings(out)
	return out
}

// gotRows reads pixel_rollups_daily_v for the test's workspace in wantRows' format. The
// value is compared as a number: toString of a Decimal(38, 4) 12.5 is 12.5000 on 18.16
// and 12.5 on 26.x.
func (e *world) gotRows() ([]string, error) {
	rows, err := e.conn.Query(context.Background(), `
		SELECT replaceAll(toString(workspace_id), '-', ''), sandbox, replaceAll(toString(pixel_id), '-', ''), toString(event_date), event_name, currency,
		       events, consented_events, value, unique_people
		FROM pixel_rollups_daily_v WHERE workspace_id = toUUID(?)`, uuidString(e.ws))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var ws, px, day, name, cur string
		var val decimal.Decimal
		var sb uint8
		var n, c, p uint64
		if err := rows.Scan(&ws, &sb, &px, &day, &name, &cur, &n, &c, &val, &p); err != nil {
			return nil, err
		}
		out = append(out, fmt.Sprintf("%s|%v|%s|%s|%s|%s|%d|%d|%s|%d", strings.ToLower(ws), sb == 1, strings.ToLower(px), day, name, cur, n, c, val.String(), p))
	}
	sort.Strings(out)
	return out, rows.Err()
}

// rawCheck returns the number of event rows and of distinct (topic, partition, offset, index).
func (e *world) rawCheck() (rows, distinct uint64) {
	e.t.Helper()
	err := e.conn.QueryRow(context.Background(),
		"SELECT count(), uniqExact(kafka_topic, kafka_partition, kafka_offset, batch_index) FROM events").Scan(&rows, &distinct)
	if err != nil {
		e.t.Fatal(err)
	}
	return rows, distinct
}

// waitCopyRejections waits until the rejections table counts every copy of a client
// event id the consumer left out (rule duplicate_event_id) exactly once: it fails at
// once if it counts more.
func (e *world) waitCopyRejections(timeout time.Duration) {
	e.t.Helper()
	e.mu.Lock()
	want := uint64(e.copied)
	e.mu.Unlock()
	if want == 0 {
		e.t.Fatal("no copies produced: the test proves nothing")
	}
	deadline := time.Now().Add(timeout)
	for {
		var got uint64
		err := e.conn.QueryRow(context.Background(),
			"SELECT sum(toUInt64(rejections)) FROM rejections WHERE rule = ?", schema.RuleDuplicateEventID).Scan(&got)
		if err != nil {
			e.t.Fatal(err)
		}
		if got > want {
			e.t.Fatalf("rejections count %d copies of a client event id, %d were left out: some counted twice", got, want)
		}
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("rejections count %d copies of a client event id after %v, want %d", got, timeout, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitExact waits until the rollup equals the expected totals and the raw table holds
// every produced event exactly once.
func (e *world) waitExact(timeout time.Duration) {
	e.t.Helper()
	want := e.wantRows()
	deadline := time.Now().Add(timeout)
	for {
		got, err := e.gotRows()
		n, d := e.rawCheck()
		e.mu.Lock()
		produced := uint64(e.produced)
		e.mu.Unlock()
		if err == nil && n == produced && d == produced && equal(got, want) {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("not exact after %v: raw rows %d distinct %d produced %d; err %v\n%s", timeout, n, d, produced, err, diff(got, want))
		}
		if n > produced || d < n {
			e.t.Fatalf("duplicates: raw rows %d distinct %d produced %d", n, d, produced)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func diff(got, want []string) string {
	var b strings.Builder
	g := map[string]bool{}
	for _, s := range got {
		g[s] = true
	}
	w := map[string]bool{}
	for _, s := range want {
		w[s] = true
		if !g[s] {
			fmt.Fprintf(&b, "missing: %s\n", s)
		}
	}
	for _, s := range got {
		if !w[s] {
			fmt.Fprintf(&b, "unexpected: %s\n", s)
		}
	}
	return b.String()
}

func uuidString(u schema.UUID) string {
	return fmt.Sprintf("%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16])
}

// dropClaimsOf drops the event-id claims kept for database db, when Redis answers.
func dropClaimsOf(db string) {
	ctx := context.Background()
	if rdb, err := process.OpenRedis(ctx, svctest.RedisConfig()); err == nil {
		_, _ = DropEventClaims(ctx, rdb, db)
		rdb.Close()
	}
}

// TestMain removes the svc binary the end-to-end test builds (svctest.Binary).
func TestMain(m *testing.M) { os.Exit(svctest.RunTests(m)) }

// killOn returns a consumer test hook (testBeforeInsert, testAfterInsert) that kills
// the consumer at its nth call (an error wrapped in errKilled: the member dies there,
// committing nothing more), and reports whether that call has come.
func killOn(n int32, why string) (hook func() error, killed func() bool) {
	var calls atomic.Int32
	hook = func() error {
		if calls.Add(1) == n {
			return errors.New(why)
		}
		return nil
	}
	return hook, func() bool { return calls.Load() >= n }
}

// stopKilled stops a consumer that a test hook killed: its run must have ended with
// errKilled.
func stopKilled(t *testing.T, stop func() error) {
	t.Helper()
	if err := stop(); !errors.Is(err, errKilled) {
		t.Fatalf("first consumer: %v, want errKilled", err)
	}
}
