package rollup

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"svc/lib/kafkabroker"
	"svc/lib/logs"
	"svc/schema"
	"svc/schema/rejection"
)

// The rejections' consumer: a second consumer-group member in every `svc rollup`
// process (group <SVC_ROLLUP_GROUP>-rejections) that writes the edge's rejection records
// (topic rejections.v1, schema/rejection) into the ClickHouse table rejections, in
// bulk: one INSERT per flush (every BatchInterval), never one per request.
//
// Exactly once, by the events consumer's argument (README.md): every row carries its
// record's partition and offset (a count row the highest of the records it adds up); a
// flush is one INSERT of one block into a table partitioned by the flush's inserted_at
// day, so one part, all or nothing; a partition's records are inserted in order; on
// assignment (after waiting for every rejections INSERT still running on the server,
// query ids rejectionsQueryPrefix) the consumer reads back max(kafka_offset) per
// partition and skips records at or below it; an INSERT whose outcome is unknown is
// resolved the same way before the retry. Offsets are committed only after the INSERT.
// So the counts (sum(rejections)) are exact: each record's rejections are in the table
// once. The records the events' consumer makes of the copies it leaves out
// (eventdedup.go: rules duplicate_event_id and duplicate_batch) are produced at least
// once: one killed after producing them decides the same copies again and produces them
// again. Each carries a batch id of its own (schema.HeaderBatchID, the same for both
// copies), which this consumer claims in Redis as the events' consumer claims the
// edges' batch ids (dedup.go, topic rejections.v1): the record holding the claim is
// stored, a second copy skipped (counted as outcome "copy"). The edges' records carry
// none: each is a rejection of its own request, produced once (an idempotent producer).
//
// Samples are capped per pixel and minute (Config.RejectionSamples): past the cap a
// rejection is only counted, in a row of sample = 0 per partition, pixel, minute,
// status, field and rule and flush, and for a 202 per request too (countKey). A pixel's records are on one partition, consumed by
// one member at a time, so the member knows how many samples of a pixel-minute it
// stored or buffered; after any change of its partitions (and at start) it reads how
// many the table holds for the pixel-minutes it meets up to a minute past that change,
// plus what it buffered, since a previous owner may have stored some. The cap is exact on
// one server; on a cluster the count is read through the Distributed table, whose
// replica may lag, so a few more may be stored. The counts stay exact either way.

// rejectionsQueryPrefix starts the query id of every INSERT of the rejections' consumer
// (distinct from schema.InsertQueryPrefix: the privacy fence waits for events' inserts only).
const rejectionsQueryPrefix = "svc-rejections-"

// rejectionFlushRows flushes before BatchInterval when this many rows are buffered.
const rejectionFlushRows = 50_000

// sampleHorizon is how long a pixel-minute's sample count is kept in memory.
const sampleHorizon = 2 * time.Hour

// countKey is what a count row (sample = 0) adds up within a flush. A 202's count rows
// are its own (request, key and size set): GET /batches/{request_id} then counts every
// rejection of a 202 past the cap, and their number is bounded by the accepted requests
// (a 202 stores events), never by a flood of batches refused whole, whose count rows stay
// one per pixel, minute, status, field and rule.
type countKey struct {
	part        int32
	pm          rejection.PixelMinute
	ws          uuid.UUID
	sandbox     bool
	status      uint16
	field, rule string
	request     string // a 202's: its request id, key and size; "" otherwise
	key         uuid.UUID
	events      uint16
	at          int64 // a 202's: unix seconds of its reception
}

type rejMetrics struct {
	stored, counted, skipped, malformed, copies prometheus.Counter
}

func newRejMetrics(reg prometheus.Registerer) *rejMetrics {
	v := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "svc_rollup_rejections_total",
		Help: "Rejections written to ClickHouse: stored (a sample row), counted (only counted: past the per-pixel-per-minute cap); and records skipped (already stored), malformed, or a second copy of a record the events' consumer produced (copy)."},
		[]string{"outcome"})
	if reg == nil {
		reg = prometheus.DefaultRegisterer
	}
	if err := reg.Register(v); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			v = are.ExistingCollector.(*prometheus.CounterVec)
		}
	}
	return &rejMetrics{v.WithLabelValues("stored"), v.WithLabelValues("counted"), v.WithLabelValues("skipped"),
		v.WithLabelValues("malformed"), v.WithLabelValues("copy")}
}

// rejConsumer is the rejections' consumer-group member. mu guards everything below it
// (the poll loop and the rebalance callbacks, as in consumer).
type rejConsumer struct {
	cfg  Config
	cl   *kgo.Client
	conn driver.Conn
	rb   readBack
	log  *slog.Logger
	m    *rejMetrics
	now  func() time.Time

	mu          sync.Mutex
	dead        bool
	label       string
	stored      map[int32]int64
	handled     map[int32]int64
	commit      map[int32]kgo.EpochOffset
	held        []*kgo.Record
	claims      map[recordPos]bool // held records whose batch id was claimed: true = a second copy
	sync        claimSync          // claim keys written, not yet known to be on a replica
	rows        []rejection.Row
	counts      map[countKey]*rejection.Row
	samples     map[rejection.PixelMinute]int
	seedThrough time.Time // pixel-minutes up to it may hold samples of a previous owner
	first       time.Time
	unsure      bool
	lastID      string
	failures    int
	retryAt     time.Time
}

func newRejConsumer(cfg Config, conn driver.Conn, seeds []string, extra ...kgo.Opt) (*rejConsumer, error) {
	group := cfg.Group + "-rejections"
	member := cmp.Or(cfg.Log, slog.Default().With(logs.RoleKey, "rollup")).With("consumer", rand.Uint32()%10000, "group", group)
	c := &rejConsumer{cfg: cfg, conn: conn, rb: newReadBackOf(cfg, conn, rejection.Table, rejectionsQueryPrefix),
		log: member, m: newRejMetrics(cfg.Registerer), now: time.Now,
		stored: map[int32]int64{}, handled: map[int32]int64{}, commit: map[int32]kgo.EpochOffset{},
		counts: map[countKey]*rejection.Row{}, samples: map[rejection.PixelMinute]int{},
		claims: map[recordPos]bool{}, sync: newClaimSync(cfg.Redis)}
	c.seedThrough = c.now().Add(time.Minute)
	opts := []kgo.Opt{
		kgo.SeedBrokers(seeds...),
		kgo.Dialer(kafkabroker.Dial),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(schema.TopicRejections),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		kgo.OnPartitionsAssigned(c.assigned),
		kgo.OnPartitionsRevoked(c.revoked),
		kgo.OnPartitionsLost(c.lost),
		kgo.SessionTimeout(cfg.SessionTimeout),
		kgo.RebalanceTimeout(cfg.RebalanceTimeout),
		kgo.HeartbeatInterval(heartbeatInterval(cfg.SessionTimeout)),
		kgo.WithLogger(logs.Kgo(member)),
	}
	c.mu.Lock() // the rebalance callbacks may run before NewClient returns (consumer.go)
	defer c.mu.Unlock()
	cl, err := kgo.NewClient(append(opts, extra...)...)
	if err != nil {
		return nil, fmt.Errorf("kafka client (rejections): %w", err)
	}
	c.cl = cl
	return c, nil
}

// run polls until ctx is cancelled, then flushes, commits and leaves the group.
func (c *rejConsumer) run(ctx context.Context) error {
	err := pollLoop(ctx, loop{cl: c.cl, mu: &c.mu, nice: c.cfg.LoopNice, log: c.log, work: c.work, wake: c.nextWake, die: c.die,
		got: func(fs kgo.Fetches) { fs.EachRecord(func(r *kgo.Record) { c.held = append(c.held, r) }) }})
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.held = nil
	err = c.flushUntil(c.now().Add(c.cfg.RevokeTimeout))
	c.mu.Unlock()
	c.cl.Close()
	if err != nil {
		return fmt.Errorf("rejections: final flush: %w (nothing lost: uncommitted records are redelivered)", err)
	}
	return nil
}

func (c *rejConsumer) die(err error) error {
	c.mu.Lock()
	c.dead = true
	c.mu.Unlock()
	c.cl.Close()
	return err
}

func (c *rejConsumer) buffered() int { return len(c.rows) + len(c.counts) }

// nextWake: no polling while records wait or a step is failing.
func (c *rejConsumer) nextWake() (time.Duration, bool) {
	now := c.now()
	wait := c.cfg.BatchInterval
	if !c.first.IsZero() {
		wait = c.first.Add(c.cfg.BatchInterval).Sub(now)
	}
	if c.failures > 0 {
		wait = c.retryAt.Sub(now)
	}
	return max(wait, time.Millisecond), len(c.held) == 0 && c.failures == 0 && c.buffered() < rejectionFlushRows
}

// work handles held records and flushes when due. mu must be held.
func (c *rejConsumer) work(ctx context.Context) error {
	now := c.now()
	if now.Before(c.retryAt) {
		return nil
	}
	if len(c.held) > 0 {
		if err := c.handle(ctx); err != nil {
			c.fail(err)
			return nil
		}
	}
	if c.buffered() >= rejectionFlushRows || !c.first.IsZero() && now.Sub(c.first) >= c.cfg.BatchInterval {
		if err := c.flush(ctx); err != nil {
			if errors.Is(err, errKilled) {
				return err
			}
			c.fail(err)
		}
	}
	return nil
}

// fail schedules the retry of a failed step with exponential backoff and jitter.
func (c *rejConsumer) fail(err error) {
	c.failures++
	d := retryDelay(c.failures, c.cfg.RetryMin, c.cfg.RetryMax)
	c.retryAt = c.now().Add(d)
	if logAttempt(c.failures) {
		c.log.Warn("rejections: step failed; retrying", "attempt", c.failures, "in", d.Round(time.Millisecond).String(), "err", err)
	}
}

// flushUntil retries flush until it succeeds or deadline passes. mu must be held.
func (c *rejConsumer) flushUntil(deadline time.Time) error {
	return retryUntil(deadline, c.flush, c.fail, func() time.Time { return c.retryAt })
}
