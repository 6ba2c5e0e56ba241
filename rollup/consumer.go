package rollup

import (
	"cmp"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"svc/api/logs"
	"svc/schema"
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
	cfg  Config
	cl   *kgo.Client
	conn driver.Conn
	rb   readBack // what ClickHouse holds: the server, or every replica of the cluster
	sink *Sink
	m    *metrics
	log  *slog.Logger
	gate *gate // the privacy fence (erase.go); nil without Redis

	mu       sync.Mutex
	dead     bool                      // stopped by the test hook: callbacks do nothing
	scratch  schema.Batch              // decode buffer
	held     []*kgo.Record             // polled, not yet handled
	stored   map[int32]int64           // partition → highest offset in ClickHouse (-1: none); absent: unknown
	commit   map[int32]kgo.EpochOffset // offsets to commit after the next flush
	dlq      []*kgo.Record             // dead letters to produce before the next commit
	first    time.Time                 // arrival of the oldest unflushed work; zero if none
	unsure   bool                      // the last INSERT failed: it may have landed
	lastID   string                    // query_id of the last INSERT
	handled  map[int32]int64           // partition → highest offset handled (guards redelivery within a batch)
	claims   map[recordPos]bool        // held records whose batch id was claimed: true = duplicate
	failures int                       // consecutive failed steps (flush or read-back)
	flushBad bool                      // the last flush failed
	retryAt  time.Time
}

func newConsumer(cfg Config, conn driver.Conn, seeds []string, extra ...kgo.Opt) (*consumer, error) {
	member := cmp.Or(cfg.Log, slog.Default().With(logs.RoleKey, "rollup")).With("consumer", rand.Uint32()%10000)
	c := &consumer{
		cfg:     cfg,
		conn:    conn,
		rb:      newReadBack(cfg, conn),
		sink:    NewSink(conn, cfg.Table, cfg.Topic),
		m:       newMetrics(cfg.Registerer),
		log:     member.With("group", cfg.Group),
		stored:  map[int32]int64{},
		commit:  map[int32]kgo.EpochOffset{},
		handled: map[int32]int64{},
		claims:  map[recordPos]bool{},
		gate:    newGate(cfg),
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(seeds...),
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
	cl, err := kgo.NewClient(append(opts, extra...)...)
	if err != nil {
		return nil, fmt.Errorf("kafka client: %w", err)
	}
	c.cl = cl
	return c, nil
}

// run polls until ctx is cancelled, then flushes, commits and leaves the group.
func (c *consumer) run(ctx context.Context) error {
	for ctx.Err() == nil {
		c.mu.Lock()
		err := c.work(ctx)
		wait, canPoll := c.nextWake(time.Now())
		c.mu.Unlock()
		if errors.Is(err, errKilled) {
			return c.die(err)
		}
		if !canPoll {
			sleep(ctx, wait)
			continue
		}
		pctx, cancel := context.WithTimeout(ctx, wait)
		fs := c.cl.PollRecords(pctx, maxPollRecords)
		cancel()
		if fs.IsClientClosed() {
			return errors.New("kafka client closed")
		}
		fs.EachError(func(t string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
				c.log.Warn("fetch", "topic", t, "partition", p, "err", err)
			}
		})
		c.mu.Lock()
		c.updateLag(fs)
		fs.EachRecord(func(r *kgo.Record) { c.held = append(c.held, r) })
		err = c.work(ctx)
		c.mu.Unlock()
		c.cl.AllowRebalance()
		if errors.Is(err, errKilled) {
			return c.die(err)
		}
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

// loadStored reads the stored offsets of held partitions that are not known yet.
func (c *consumer) loadStored(ctx context.Context) error {
	var missing []int32
	seen := map[int32]bool{}
	for _, r := range c.held {
		if _, ok := c.stored[r.Partition]; !ok && !seen[r.Partition] {
			seen[r.Partition] = true
			missing = append(missing, r.Partition)
		}
	}
	return c.readStored(ctx, missing)
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
	got, err := c.rb.maxOffsets(qctx, c.cfg.Topic, parts)
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
	dup := c.duplicate(r)
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
		return
	}
	if reason, err := c.decode(r); err != nil {
		c.dlq = append(c.dlq, deadLetter(r, c.cfg.DeadTopic, reason, err))
		return
	}
	c.sink.Add(&c.scratch, p, r.Offset)
}

// Event times outside this range cannot be stored in a DateTime column.
var (
	minTime = int64(0)
	maxTime = time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
)

// decode decodes r into c.scratch, or returns the dead-letter reason and error.
func (c *consumer) decode(r *kgo.Record) (string, error) {
	for _, h := range r.Headers {
		if h.Key == schema.HeaderSchema && string(h.Value) != schema.SchemaEventsV1 {
			return ReasonWrongSchema, fmt.Errorf("header %s=%q, want %q", schema.HeaderSchema, h.Value, schema.SchemaEventsV1)
		}
	}
	b := &c.scratch
	if err := schema.DecodeBatch(r.Value, b); err != nil {
		return reasonOf(err), err
	}
	if b.ReceivedAt < minTime || b.ReceivedAt >= maxTime {
		return ReasonOutOfRange, fmt.Errorf("received_at %d ms out of range", b.ReceivedAt)
	}
	for i := range b.Events {
		if t := b.Events[i].OccurredAt; t < minTime || t >= maxTime {
			return ReasonOutOfRange, fmt.Errorf("event %d: occurred_at %d ms out of range", i, t)
		}
	}
	return "", nil
}

// deadLetter copies r for the dead-letter topic: same key, value and headers, plus
// svc-dlq-reason "<reason>: <error>" and the origin's topic/partition/offset.
func deadLetter(r *kgo.Record, topic, reason string, err error) *kgo.Record {
	hs := append([]kgo.RecordHeader(nil), r.Headers...)
	hs = append(hs,
		kgo.RecordHeader{Key: schema.HeaderDLQReason, Value: []byte(reason + ": " + err.Error())},
		kgo.RecordHeader{Key: "svc-dlq-origin", Value: []byte(r.Topic + "/" + strconv.Itoa(int(r.Partition)) + "/" + strconv.FormatInt(r.Offset, 10))},
	)
	return &kgo.Record{Topic: topic, Key: r.Key, Value: r.Value, Headers: hs, Context: context.WithValue(context.Background(), dlqKey{}, dlqInfo{reason, r.Partition})}
}

type dlqKey struct{}

// dlqInfo rides in a dead letter's Context: the metric reason and origin partition.
type dlqInfo struct {
	reason    string
	partition int32
}

// flush produces pending dead letters, inserts buffered rows (one INSERT) and commits
// the offsets of everything handled. mu must be held. On error nothing is committed
// and the state is kept for a retry.
func (c *consumer) flush(ctx context.Context) error {
	if err := c.flushDeadLetters(ctx); err != nil {
		return err
	}
	if err := c.flushRows(ctx); err != nil {
		return err
	}
	c.commitHandled(ctx)
	c.first, c.failures, c.retryAt, c.flushBad = time.Time{}, 0, time.Time{}, false
	return nil
}

func (c *consumer) flushDeadLetters(ctx context.Context) error {
	if len(c.dlq) == 0 {
		return nil
	}
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.InsertTimeout)
	defer cancel()
	res := c.cl.ProduceSync(pctx, c.dlq...)
	var failed []*kgo.Record
	var firstErr error
	for _, pr := range res {
		if pr.Err != nil {
			failed = append(failed, pr.Record)
			firstErr = cmpOr(firstErr, pr.Err)
			continue
		}
		info, _ := pr.Record.Context.Value(dlqKey{}).(dlqInfo)
		c.m.deadLetters.WithLabelValues(info.reason).Inc()
		c.log.Warn("dead letter", "reason", string(headerValue(pr.Record, schema.HeaderDLQReason)),
			"origin", string(headerValue(pr.Record, "svc-dlq-origin")))
	}
	c.dlq = failed
	if firstErr != nil {
		return fmt.Errorf("produce %d dead letters: %w", len(failed), firstErr)
	}
	return nil
}

func cmpOr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

func headerValue(r *kgo.Record, key string) []byte {
	for _, h := range r.Headers {
		if h.Key == key {
			return h.Value
		}
	}
	return nil
}

func (c *consumer) flushRows(ctx context.Context) error {
	// ClickHouse work is not cut short by SIGTERM (ctx): an INSERT abandoned mid-way
	// can still land after we looked. Each step is bounded by InsertTimeout instead.
	ctx = context.WithoutCancel(ctx)
	if c.unsure && c.sink.Len() > 0 {
		// The previous INSERT failed but may have landed, or may still be running on the
		// server: wait until the server no longer runs it, then keep only what is not
		// stored.
		if err := waitQueryGone(ctx, c.rb, c.lastID, c.cfg.InsertTimeout); err != nil {
			return err
		}
		c.endInserts(ctx)
		parts := c.sink.Partitions()
		keys := make([]int32, 0, len(parts))
		for p := range parts {
			keys = append(keys, p)
		}
		if err := c.readStored(ctx, keys); err != nil {
			return err
		}
		c.sink.Drop(func(p int32, o int64) bool { return o <= c.stored[p] })
		c.unsure = false
	}
	n := c.sink.Len()
	if n == 0 {
		return nil
	}
	parts := c.sink.Partitions()
	c.lastID = newQueryID()
	ictx, cancel := context.WithTimeout(clickhouse.Context(ctx, clickhouse.WithQueryID(c.lastID), clickhouse.WithSettings(insertSettings)), c.cfg.InsertTimeout)
	defer cancel()
	if err := c.beginInsert(ctx, c.lastID); err != nil {
		return err
	}
	start := time.Now()
	if err := c.sink.Flush(ictx, start); err != nil {
		c.unsure = true
		return err
	}
	c.endInserts(ctx)
	done := time.Now()
	c.m.flushDuration.Observe(done.Sub(start).Seconds())
	c.m.batchRows.Observe(float64(n))
	c.m.rowsInserted.Add(float64(n))
	c.m.eventAge.observeAll(c.sink, done)
	c.sink.Reset()
	for p, o := range parts {
		c.stored[p] = max(c.stored[p], o)
	}
	if c.cfg.testAfterInsert != nil {
		if err := c.cfg.testAfterInsert(); err != nil {
			return fmt.Errorf("%w: %v", errKilled, err)
		}
	}
	return nil
}

// insertSettings apply to every INSERT. insert_distributed_sync makes an INSERT into a
// Distributed table (clustered schema) return only once every shard has its rows.
var insertSettings = clickhouse.Settings{"insert_distributed_sync": 1}

func newQueryID() string {
	var b [16]byte
	for i := range b {
		b[i] = byte(rand.Uint32())
	}
	return "svc-rollup-" + hex.EncodeToString(b[:])
}

// waitQueryGone waits until no server runs query id (nor a part of it, on a shard of
// the cluster): from then on, an INSERT whose outcome was unknown has either landed or
// never will. It must see the query absent twice, 100ms apart, so that a query still
// queued in the socket is not missed. It fails if the server cannot be asked or the
// query outlives timeout.
func waitQueryGone(ctx context.Context, rb readBack, id string, timeout time.Duration) error {
	if id == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	absent := 0
	for absent < 2 {
		running, err := rb.runningInserts(ctx)
		if err != nil {
			return fmt.Errorf("check whether the failed INSERT still runs: %w", err)
		}
		if !slices.Contains(running, id) {
			absent++
		} else {
			absent = 0
		}
		if absent < 2 && !sleep(ctx, 100*time.Millisecond) {
			return fmt.Errorf("failed INSERT %s still running after %v", id, timeout)
		}
	}
	return nil
}

// waitRunningInserts waits until every rollup INSERT that the server runs now has
// finished: one may belong to a consumer that was killed (SIGKILL, lost session) while
// its INSERT was in flight, and it must land or fail before its partition's stored
// offset is read back. Inserts that start later are not waited for.
func waitRunningInserts(ctx context.Context, rb readBack) error {
	running, err := rb.runningInserts(ctx)
	if err != nil {
		return fmt.Errorf("list running inserts: %w", err)
	}
	for len(running) > 0 {
		if !sleep(ctx, 20*time.Millisecond) {
			return fmt.Errorf("%d rollup inserts still running: %w", len(running), ctx.Err())
		}
		now, err := rb.runningInserts(ctx)
		if err != nil {
			return fmt.Errorf("list running inserts: %w", err)
		}
		still := map[string]bool{}
		for _, id := range now {
			still[id] = true
		}
		keep := running[:0]
		for _, id := range running {
			if still[id] {
				keep = append(keep, id)
			}
		}
		running = keep
	}
	return nil
}

func queryStrings(ctx context.Context, conn driver.Conn, q string) ([]string, error) {
	rows, err := conn.Query(ctx, q)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

// commitHandled commits the offsets after every handled record. A failed commit is
// counted and logged, not retried: the rows are stored, and whoever consumes the
// partition next skips them after reading the stored offsets back.
func (c *consumer) commitHandled(ctx context.Context) {
	if len(c.commit) == 0 {
		return
	}
	offsets := map[string]map[int32]kgo.EpochOffset{c.cfg.Topic: c.commit}
	c.commit = map[int32]kgo.EpochOffset{}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.InsertTimeout)
	defer cancel()
	c.cl.CommitOffsetsSync(cctx, offsets, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		if err == nil && resp != nil {
			for _, t := range resp.Topics {
				for _, p := range t.Partitions {
					if p.ErrorCode != 0 && err == nil {
						err = fmt.Errorf("partition %d: error code %d", p.Partition, p.ErrorCode)
					}
				}
			}
		}
		if err != nil {
			c.m.commitErrors.Inc()
			c.log.Warn("commit offsets", "err", err)
		}
	})
}

// fail records a failed step and schedules the retry with exponential backoff and
// jitter. While failing, the consumer does not poll.
func (c *consumer) fail(err error) {
	if errors.Is(err, errHeld) {
		c.waitHeld()
		return
	}
	c.failures++
	d := c.cfg.RetryMin << min(c.failures-1, 20)
	if d > c.cfg.RetryMax || d <= 0 {
		d = c.cfg.RetryMax
	}
	d = d/2 + rand.N(d/2+1)
	c.retryAt = time.Now().Add(d)
	c.m.insertErrors.Inc()
	if c.failures&(c.failures-1) == 0 { // log attempts 1, 2, 4, 8, ...
		c.log.Warn("flush failed; retrying", "attempt", c.failures, "in", d.Round(time.Millisecond).String(), "err", err)
	}
}

// flushUntil retries flush until it succeeds or deadline passes. mu must be held.
func (c *consumer) flushUntil(deadline time.Time) error {
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	for {
		err := c.flush(ctx)
		if err == nil || errors.Is(err, errKilled) {
			return err
		}
		c.fail(err)
		if !sleep(ctx, time.Until(c.retryAt)) {
			return err
		}
	}
}

// assigned forgets the stored offsets of newly assigned partitions and reads them
// again (best effort; handle reads them before the first record otherwise).
func (c *consumer) assigned(ctx context.Context, _ *kgo.Client, m map[string][]int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dead {
		return
	}
	parts := m[c.cfg.Topic]
	c.own(len(parts))
	c.forget(parts) // nothing should be left of them; start clean
	qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if err := c.readStored(qctx, parts); err != nil {
		c.log.Warn("read stored offsets on assignment (will retry before handling records)", "err", err)
	}
	c.log.Info("partitions assigned", "partitions", parts, "stored", c.stored)
}

// revoked flushes and commits everything handled, so that the next owner starts
// exactly after it. If ClickHouse stays down past RevokeTimeout, the revoked
// partitions' work is dropped uncommitted instead: the next owner re-reads it.
func (c *consumer) revoked(_ context.Context, _ *kgo.Client, m map[string][]int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dead {
		return
	}
	parts := m[c.cfg.Topic]
	if err := c.flushUntil(time.Now().Add(c.cfg.RevokeTimeout)); err != nil {
		c.log.Error("flush on revoke failed; dropping revoked partitions' uncommitted work for the next owner", "err", err)
	}
	c.forget(parts)
	c.own(-len(parts))
	c.log.Info("partitions revoked", "partitions", parts, "stored", c.stored)
}

// lost drops the work of partitions this member no longer owns (session lost): it
// cannot commit for them, and inserting could race the new owner.
func (c *consumer) lost(_ context.Context, _ *kgo.Client, m map[string][]int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dead {
		return
	}
	c.forget(m[c.cfg.Topic])
	c.own(-len(m[c.cfg.Topic]))
	if len(m[c.cfg.Topic]) > 0 { // franz-go calls again with none while it cannot rejoin
		c.log.Warn("partitions lost", "topic", c.cfg.Topic, "partitions", m[c.cfg.Topic])
	}
}

// own adds n to the count of owned partitions, when the role asked for it.
func (c *consumer) own(n int) {
	if c.cfg.Owned != nil {
		c.cfg.Owned.Add(int64(n))
	}
}

// forget drops all state of parts. mu must be held.
func (c *consumer) forget(parts []int32) {
	gone := map[int32]bool{}
	for at := range c.claims {
		for _, p := range parts {
			if at.p == p {
				delete(c.claims, at)
			}
		}
	}
	for _, p := range parts {
		gone[p] = true
		delete(c.stored, p)
		delete(c.commit, p)
		delete(c.handled, p)
		c.m.partitionLag.DeleteLabelValues(strconv.Itoa(int(p)))
	}
	c.sink.Drop(func(p int32, _ int64) bool { return gone[p] })
	keep := c.held[:0]
	for _, r := range c.held {
		if !gone[r.Partition] {
			keep = append(keep, r)
		}
	}
	c.held = keep
	dl := c.dlq[:0]
	for _, r := range c.dlq {
		if !gone[originPartition(r)] {
			dl = append(dl, r)
		}
	}
	c.dlq = dl
	if c.sink.Len() == 0 && len(c.held) == 0 && len(c.dlq) == 0 && len(c.commit) == 0 {
		c.first = time.Time{}
	}
}

func originPartition(r *kgo.Record) int32 {
	if info, ok := r.Context.Value(dlqKey{}).(dlqInfo); ok {
		return info.partition
	}
	return -1
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

// sleep waits d or until ctx is done; it reports whether the full wait elapsed.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
