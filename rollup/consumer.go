package rollup

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/twmb/franz-go/pkg/kgo"

	"svc/lib/kafkabroker"
	"svc/lib/logs"
	"svc/schema"
	"svc/schema/sink"
)

// errKilled is returned when the test hook stops the consumer between an INSERT and
// its commit.
var errKilled = errors.New("rollup: stopped after insert, before commit (test hook)")

// maxPollRecords bounds one poll: records are batches of up to 50 events.
const maxPollRecords = 5000

// consumer moves records of one consumer-group member into ClickHouse.
//
// Exactly once: every row carries (kafka_topic, kafka_partition, kafka_offset). Before
// handling the first record of a partition after it is assigned, the consumer reads
// back the highest offset ClickHouse already holds for it and skips records at or
// below it. Rows of a partition are inserted in offset order, each flush is one INSERT
// of one part (all or nothing), and a failed INSERT is retried only after re-reading
// what landed; so what ClickHouse holds of a partition is always a prefix of it, and a
// redelivered record is skipped. Offsets are committed only after the INSERT (and the
// dead-letter produce) succeeded; a lost commit only causes redelivery, which is skipped.
//
// Locking: mu guards all state below it. The poll loop holds mu while handling
// records and flushing, never while polling; rebalance callbacks take mu, and with
// kgo.BlockRebalanceOnPoll they cannot run between a poll and AllowRebalance, so a
// revoke always sees a state in which every handled record is either flushed (and
// committed) by the callback itself or dropped uncommitted.
type consumer struct {
	cfg     Config
	cl      *kgo.Client
	conn    driver.Conn
	rb      readBack // what ClickHouse holds: the server, or every replica of the cluster
	sink    *sink.Sink
	m       *metrics
	log     *slog.Logger
	privacy *privacyFence // the privacy fence (erase.go); nil without Redis
	wm      *watermarks   // the completeness watermark (watermark.go)

	mu       sync.Mutex
	dead     bool                      // stopped by the test hook: callbacks do nothing
	scratch  schema.Batch              // decode buffer
	held     []*kgo.Record             // polled, not yet handled
	label    string                    // kafka_topic of the topic's incarnation (incarnation.go); "" until read
	stored   map[int32]int64           // partition → highest offset in ClickHouse (-1: none); absent: unknown
	commit   map[int32]kgo.EpochOffset // offsets to commit after the next flush
	dlq      []*kgo.Record             // to produce before the next commit: dead letters, rejection records of copies
	first    time.Time                 // arrival of the oldest unflushed work; zero if none
	unsure   bool                      // the last INSERT failed: it may have landed
	lastID   string                    // query_id of the last INSERT
	handled  map[int32]int64           // partition → highest offset handled (guards redelivery within a batch)
	claims   map[recordPos]bool        // held records whose batch id was claimed: true = duplicate
	events   eventClaims               // the client event-id claims of owned partitions (eventdedup.go)
	eventDup map[recordPos]uint64      // held records whose event ids were claimed: bit i = event i is a copy
	sync     claimSync                 // claim keys written, not yet known to be on a replica
	older    *olderClaims              // older consumers' claims in Redis (olderclaims.go); nil until the first claim
	failures int                       // consecutive failed steps (flush or read-back)
	flushBad bool                      // the last flush failed
	retryAt  time.Time
}

func newConsumer(cfg Config, conn driver.Conn, seeds []string, extra ...kgo.Opt) (*consumer, error) {
	member := cmp.Or(cfg.Log, slog.Default().With(logs.RoleKey, "rollup")).With("consumer", rand.Uint32()%10000)
	c := &consumer{
		cfg:      cfg,
		conn:     conn,
		rb:       newReadBack(cfg, conn),
		sink:     sink.New(conn, cfg.Table, cfg.Topic),
		m:        newMetrics(cfg.Registerer),
		log:      member.With("group", cfg.Group),
		stored:   map[int32]int64{},
		commit:   map[int32]kgo.EpochOffset{},
		handled:  map[int32]int64{},
		claims:   map[recordPos]bool{},
		events:   newEventClaims(cfg.eventIDWindow()),
		eventDup: map[recordPos]uint64{},
		sync:     newClaimSync(cfg.Redis),
		privacy:  newPrivacyFence(cfg),
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(seeds...),
		kgo.Dialer(kafkabroker.Dial),
		kgo.ConsumerGroup(cfg.Group),
		kgo.ConsumeTopics(cfg.Topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		kgo.OnPartitionsAssigned(c.assigned),
		kgo.OnPartitionsRevoked(c.revoked),
		kgo.OnPartitionsLost(c.lost),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.SessionTimeout(cfg.SessionTimeout),
		kgo.RebalanceTimeout(cfg.RebalanceTimeout),
		kgo.HeartbeatInterval(heartbeatInterval(cfg.SessionTimeout)),
	}
	opts = append(opts, kgo.WithLogger(logs.Kgo(member))) // franz-go names the group itself
	opts = append(opts, cfg.fetchOpts()...)
	// The client joins the group at once: its rebalance callbacks, which take mu, may
	// run before NewClient returns, and must not see cl or wm unset.
	c.mu.Lock()
	defer c.mu.Unlock()
	cl, err := kgo.NewClient(append(opts, extra...)...)
	if err != nil {
		return nil, fmt.Errorf("kafka client: %w", err)
	}
	c.cl = cl
	c.wm = newWatermarks(cfg, cl, c.log)
	if rb, replicated := c.rb.(*replicaReadBack); replicated {
		c.wm.visible = func(ctx context.Context) (bool, error) { return rb.visible(ctx, watermarkTables...) }
	}
	return c, nil
}

// run polls until ctx is cancelled, then flushes, commits and leaves the group.
func (c *consumer) run(ctx context.Context) error {
	wctx, stopWM := context.WithCancel(ctx)
	wmDone := make(chan struct{})
	go func() { defer close(wmDone); c.wm.run(wctx) }()
	defer func() { stopWM(); <-wmDone }()
	err := pollLoop(ctx, loop{cl: c.cl, mu: &c.mu, nice: c.cfg.LoopNice, log: c.log, work: c.work, die: c.die,
		wake: func() (time.Duration, bool) { return c.nextWake(time.Now()) },
		got: func(fs kgo.Fetches) {
			fs.EachError(func(t string, p int32, err error) {
				if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
					c.log.Warn("fetch", "topic", t, "partition", p, "err", err)
				}
			})
			c.updateLag(fs)
			fs.EachRecord(func(r *kgo.Record) { c.held = append(c.held, r) })
		}})
	if err != nil {
		return err
	}
	return c.shutdown()
}

// die stops without committing or flushing anything more, as a SIGKILL would (tests).
func (c *consumer) die(err error) error {
	c.mu.Lock()
	c.dead = true
	c.mu.Unlock()
	c.cl.Close()
	return err
}

// shutdown flushes and commits what was handled (bounded by RevokeTimeout), then
// closes the client, which leaves the group.
func (c *consumer) shutdown() error {
	c.mu.Lock()
	c.held = nil
	err := c.flushUntil(time.Now().Add(c.cfg.RevokeTimeout))
	c.mu.Unlock()
	c.cl.Close()
	if err != nil {
		return fmt.Errorf("final flush: %w (nothing lost: uncommitted records are redelivered)", err)
	}
	return nil
}

// work handles held records and flushes when a trigger fires. mu must be held. It
// returns only errKilled; other failures schedule a retry.
func (c *consumer) work(ctx context.Context) error {
	for {
		c.handle(ctx)
		now := time.Now()
		if !c.flushDue(now) || now.Before(c.retryAt) {
			return nil
		}
		if err := c.flush(ctx); err != nil {
			if errors.Is(err, errKilled) {
				return err
			}
			c.flushBad = true
			c.fail(err)
			return nil
		}
		if len(c.held) == 0 {
			return nil
		}
	}
}

func (c *consumer) flushDue(now time.Time) bool {
	if c.sink.Len() >= c.cfg.BatchRows {
		return true
	}
	return !c.first.IsZero() && now.Sub(c.first) >= c.cfg.BatchInterval
}

// nextWake says how long to wait before the next step and whether to poll meanwhile:
// no polling while records wait to be handled or a flush is failing (this is the
// "pause": Kafka keeps the records, the group keeps its heartbeats).
func (c *consumer) nextWake(now time.Time) (time.Duration, bool) {
	wait := c.cfg.BatchInterval
	if !c.first.IsZero() {
		wait = c.first.Add(c.cfg.BatchInterval).Sub(now)
	}
	if c.failures > 0 {
		wait = c.retryAt.Sub(now)
	}
	wait = max(wait, time.Millisecond)
	canPoll := len(c.held) == 0 && c.failures == 0 && c.sink.Len() < c.cfg.BatchRows
	return wait, canPoll
}

// handle moves held records into the sink (or the dead-letter list) until none is
// left or the sink is full. A record of a partition whose stored offset is unknown
// waits until it has been read from ClickHouse.
func (c *consumer) handle(ctx context.Context) {
	if len(c.held) == 0 || time.Now().Before(c.retryAt) {
		return
	}
	if err := c.loadStored(ctx); err != nil {
		c.fail(err)
		return
	}
	if err := c.claimBatches(ctx); err != nil {
		c.fail(err)
		return
	}
	if err := c.claimEvents(ctx); err != nil {
		c.fail(err)
		return
	}
	if err := c.sync.wait(ctx); err != nil {
		c.fail(err)
		return
	}
	if !c.flushBad {
		c.failures, c.retryAt = 0, time.Time{}
	}
	i := 0
	for ; i < len(c.held) && c.sink.Len() < c.cfg.BatchRows; i++ {
		c.handleOne(c.held[i])
		c.held[i] = nil
	}
	c.held = c.held[i:]
	if len(c.held) == 0 {
		c.held = nil
	}
}

// unknownPartitions lists, once each, the partitions of held records that stored has no
// entry for (their stored offset is not read yet).
func unknownPartitions(held []*kgo.Record, stored map[int32]int64) []int32 {
	var missing []int32
	seen := map[int32]bool{}
	for _, r := range held {
		if _, ok := stored[r.Partition]; !ok && !seen[r.Partition] {
			seen[r.Partition] = true
			missing = append(missing, r.Partition)
		}
	}
	return missing
}

// loadStored reads the stored offsets of held partitions that are not known yet.
func (c *consumer) loadStored(ctx context.Context) error {
	return c.readStored(ctx, unknownPartitions(c.held, c.stored))
}

func (c *consumer) readStored(ctx context.Context, parts []int32) error {
	if len(parts) == 0 {
		return nil
	}
	qctx, cancel := context.WithTimeout(ctx, c.cfg.InsertTimeout)
	defer cancel()
	if err := waitRunningInserts(qctx, c.rb); err != nil {
		return err
	}
	if c.label == "" {
		l, err := topicLabel(qctx, c.cl, c.cfg.Topic)
		if err != nil {
			return err
		}
		c.label = l
		c.sink.SetTopic(l)
		c.wm.setLabel(l)
	}
	got, err := c.rb.maxOffsets(qctx, c.label, parts)
	if err != nil {
		return err
	}
	for _, p := range parts {
		o, ok := got[p]
		if !ok {
			o = -1
		}
		c.stored[p] = o
	}
	return nil
}

func (c *consumer) handleOne(r *kgo.Record) {
	p := r.Partition
	dup, copies := c.duplicate(r), c.duplicateEvents(r)
	if c.first.IsZero() {
		c.first = time.Now()
	}
	if h, ok := c.handled[p]; ok && r.Offset <= h {
		return // redelivered while this member still holds it
	}
	c.handled[p] = r.Offset
	c.commit[p] = kgo.EpochOffset{Epoch: r.LeaderEpoch, Offset: r.Offset + 1}
	if r.Offset <= c.stored[p] {
		c.m.skipped.Inc()
		return
	}
	if dup {
		c.m.duplicates.Inc()
		if _, err := c.decode(r); err == nil {
			c.dlq = append(c.dlq, batchCopyRejections(c.label, r, &c.scratch))
		}
		return
	}
	if reason, err := c.decode(r); err != nil {
		c.dlq = append(c.dlq, deadLetter(r, c.cfg.DeadTopic, reason, err))
		return
	}
	if copies != 0 {
		c.countCopies(r, &c.scratch, copies)
	}
	c.sink.AddExcept(&c.scratch, p, r.Offset, copies)
}

// Event times outside this range cannot be stored in a DateTime column.
var (
	minTime = int64(0)
	maxTime = time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
)

// decode decodes r into c.scratch, or returns the dead-letter reason and error.
// checkRecord (eventdedup.go) makes the same checks without keeping the events.
func (c *consumer) decode(r *kgo.Record) (string, error) {
	if reason, err := checkHeaders(r); err != nil {
		return reason, err
	}
	b := &c.scratch
	if err := schema.DecodeBatch(r.Value, b); err != nil {
		return reasonOf(err), err
	}
	lo, hi := b.Events[0].OccurredAt, b.Events[0].OccurredAt // DecodeBatch refuses a batch without events
	for i := range b.Events {
		lo, hi = min(lo, b.Events[i].OccurredAt), max(hi, b.Events[i].OccurredAt)
	}
	return checkTimes(b.ReceivedAt, lo, hi)
}

// checkHeaders refuses a record whose schema header names another schema.
func checkHeaders(r *kgo.Record) (string, error) {
	for _, h := range r.Headers {
		if h.Key == schema.HeaderSchema && string(h.Value) != schema.SchemaEventsV1 {
			return ReasonWrongSchema, fmt.Errorf("header %s=%q, want %q", schema.HeaderSchema, h.Value, schema.SchemaEventsV1)
		}
	}
	return "", nil
}

// checkTimes refuses a record whose received_at, or the occurred_at of an event (from
// the earliest, lo, to the latest, hi), a DateTime column cannot hold.
func checkTimes(received, lo, hi int64) (string, error) {
	if received < minTime || received >= maxTime {
		return ReasonOutOfRange, fmt.Errorf("received_at %d ms out of range", received)
	}
	if lo < minTime || hi >= maxTime {
		return ReasonOutOfRange, fmt.Errorf("occurred_at %d..%d ms out of range", lo, hi)
	}
	return "", nil
}

func (c *consumer) updateLag(fs kgo.Fetches) {
	fs.EachPartition(func(fp kgo.FetchTopicPartition) {
		if len(fp.Records) == 0 {
			return
		}
		next := fp.Records[len(fp.Records)-1].Offset + 1
		c.m.partitionLag.WithLabelValues(strconv.Itoa(int(fp.Partition))).Set(float64(max(fp.HighWatermark-next, 0)))
	})
}
