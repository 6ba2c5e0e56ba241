package rollup

import (
	"context"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"svc/schema"
	"svc/schema/rejection"
)

// decodedRej is a held record, decoded (ok false: malformed).
type decodedRej struct {
	rec *kgo.Record
	r   rejection.Record
	ok  bool
}

// handle moves every held record into the buffers: it reads the stored offsets of new
// partitions and the stored samples of pixel-minutes a previous owner may have filled
// first, so that a failure leaves the held records as they were. mu must be held.
func (c *rejConsumer) handle(ctx context.Context) error {
	if err := c.loadStored(ctx); err != nil {
		return err
	}
	if err := c.claimCopies(ctx); err != nil {
		return err
	}
	recs := make([]decodedRej, 0, len(c.held))
	var seed []rejection.PixelMinute
	seen := map[rejection.PixelMinute]bool{}
	horizon := c.now().Add(-sampleHorizon)
	for _, r := range c.held {
		d := decodedRej{rec: r}
		d.ok = rejection.Decode(r.Value, &d.r) == nil && headerOK(r)
		recs = append(recs, d)
		if !d.ok || r.Offset <= c.stored[r.Partition] {
			continue
		}
		pm := pixelMinute(&d.r)
		t := time.Unix(pm.Minute, 0)
		if _, known := c.samples[pm]; !known && !seen[pm] && (!t.After(c.seedThrough) || t.Before(horizon)) {
			seen[pm] = true
			seed = append(seed, pm)
		}
	}
	if len(seed) > 0 {
		qctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.InsertTimeout)
		got, err := rejection.StoredSamples(qctx, c.conn, seed)
		cancel()
		if err != nil {
			return err
		}
		for _, pm := range seed {
			c.samples[pm] = got[pm] + c.bufferedSamples(pm)
		}
	}
	for i := range recs {
		c.apply(&recs[i])
	}
	c.held = nil
	return nil
}

// claimCopies claims the batch ids of held records that carry one (the events'
// consumer's records of copies) and waits for the claims' replication, as the events'
// consumer does (dedup.go). Without Redis it does nothing.
func (c *rejConsumer) claimCopies(ctx context.Context) error {
	if c.cfg.Redis == nil {
		return nil
	}
	recs, ids := unclaimed(c.held, c.claims)
	if len(ids) > 0 {
		pos := positions(recs)
		qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		held, err := claimIDs(qctx, c.cfg.Redis, schema.TopicRejections, ids, pos, c.sync.unsynced)
		cancel()
		if err != nil {
			return err
		}
		for i, at := range pos {
			c.claims[at] = heldElsewhere(held[i], at)
		}
	}
	return c.sync.wait(ctx)
}

func headerOK(r *kgo.Record) bool {
	for _, h := range r.Headers {
		if h.Key == schema.HeaderSchema && string(h.Value) != rejection.SchemaV1 {
			return false
		}
	}
	return true
}

func pixelMinute(r *rejection.Record) rejection.PixelMinute {
	return rejection.PixelMinute{Pixel: uuid.UUID(r.Pixel), Minute: rejection.Minute(time.UnixMilli(r.ReceivedAt)).Unix()}
}

// bufferedSamples counts the unflushed samples of pm.
func (c *rejConsumer) bufferedSamples(pm rejection.PixelMinute) int {
	n := 0
	for i := range c.rows {
		if c.rows[i].Pixel == pm.Pixel && rejection.Minute(c.rows[i].ReceivedAt).Unix() == pm.Minute {
			n++
		}
	}
	return n
}

// apply adds one record's rejections: samples up to the cap, counts past it.
func (c *rejConsumer) apply(d *decodedRej) {
	p, off := d.rec.Partition, d.rec.Offset
	pos := recordPos{p, off}
	copied := c.claims[pos]
	delete(c.claims, pos)
	if h, ok := c.handled[p]; ok && off <= h {
		return
	}
	c.handled[p] = off
	c.commit[p] = kgo.EpochOffset{Epoch: d.rec.LeaderEpoch, Offset: off + 1}
	if c.first.IsZero() {
		c.first = c.now()
	}
	if off <= c.stored[p] {
		c.m.skipped.Inc()
		return
	}
	if copied {
		c.m.copies.Inc()
		return
	}
	if !d.ok {
		c.m.malformed.Inc()
		return
	}
	r := &d.r
	pm := pixelMinute(r)
	at := time.UnixMilli(r.ReceivedAt).UTC().Truncate(time.Second)
	for _, e := range r.Entries {
		if c.samples[pm] < c.cfg.RejectionSamples {
			c.samples[pm]++
			c.rows = append(c.rows, rejection.Row{Workspace: uuid.UUID(r.Workspace), Pixel: pm.Pixel, Key: uuid.UUID(r.Key),
				Sandbox: r.Sandbox, ReceivedAt: at, RequestID: r.RequestID, Status: uint16(r.Status), BatchEvents: uint16(min(r.Events, 65535)),
				Index: int16(e.Index), Field: e.Field, Rule: e.Rule, Value: e.Value, Sample: true, Rejections: 1, Partition: p, Offset: off})
			c.m.stored.Inc()
			continue
		}
		k := countKey{part: p, pm: pm, ws: uuid.UUID(r.Workspace), sandbox: r.Sandbox, status: uint16(r.Status), field: e.Field, rule: e.Rule,
			at: pm.Minute}
		if r.Status == 202 {
			k.request, k.key, k.events, k.at = r.RequestID, uuid.UUID(r.Key), uint16(min(r.Events, 65535)), at.Unix()
		}
		row := c.counts[k]
		if row == nil {
			row = &rejection.Row{Workspace: k.ws, Pixel: pm.Pixel, Key: k.key, Sandbox: k.sandbox, ReceivedAt: time.Unix(k.at, 0).UTC(),
				RequestID: k.request, Status: k.status, BatchEvents: k.events, Field: k.field, Rule: k.rule, Partition: p}
			c.counts[k] = row
		}
		row.Rejections++
		row.Offset = max(row.Offset, off)
		c.m.counted.Inc()
	}
}

// loadStored reads the stored offsets of held partitions not known yet (after waiting
// for every rejections INSERT running on the server).
func (c *rejConsumer) loadStored(ctx context.Context) error {
	return c.readStored(ctx, unknownPartitions(c.held, c.stored))
}

func (c *rejConsumer) readStored(ctx context.Context, parts []int32) error {
	if len(parts) == 0 {
		return nil
	}
	qctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.InsertTimeout)
	defer cancel()
	if err := waitRunningInserts(qctx, c.rb); err != nil {
		return err
	}
	if c.label == "" {
		l, err := topicLabel(qctx, c.cl, schema.TopicRejections)
		if err != nil {
			return err
		}
		c.label = l
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

// flush inserts the buffered rows (one INSERT), then commits. mu must be held.
func (c *rejConsumer) flush(ctx context.Context) error {
	ctx = context.WithoutCancel(ctx)
	if c.unsure && c.buffered() > 0 {
		if err := waitQueryGone(ctx, c.rb, c.lastID, c.cfg.InsertTimeout); err != nil {
			return err
		}
		parts := map[int32]bool{}
		for i := range c.rows {
			parts[c.rows[i].Partition] = true
		}
		for _, row := range c.counts {
			parts[row.Partition] = true
		}
		keys := make([]int32, 0, len(parts))
		for p := range parts {
			keys = append(keys, p)
		}
		if err := c.readStored(ctx, keys); err != nil {
			return err
		}
		c.dropRows(func(p int32, o int64) bool { return o <= c.stored[p] })
		c.unsure = false
	}
	if n := c.buffered(); n > 0 {
		rows := append(make([]rejection.Row, 0, n), c.rows...)
		for _, row := range c.counts {
			rows = append(rows, *row)
		}
		var b [16]byte
		for i := range b {
			b[i] = byte(rand.Uint32())
		}
		c.lastID = rejectionsQueryPrefix + hex.EncodeToString(b[:])
		ictx, cancel := context.WithTimeout(clickhouse.Context(ctx, clickhouse.WithQueryID(c.lastID)), c.cfg.InsertTimeout)
		err := rejection.Insert(ictx, c.conn, c.label, c.now(), rows)
		cancel()
		if err != nil {
			c.unsure = true
			return err
		}
		for i := range rows {
			c.stored[rows[i].Partition] = max(c.stored[rows[i].Partition], rows[i].Offset)
		}
		c.rows, c.counts = c.rows[:0], map[countKey]*rejection.Row{}
		if c.cfg.testAfterRejectionInsert != nil {
			if err := c.cfg.testAfterRejectionInsert(); err != nil {
				return fmt.Errorf("%w: %v", errKilled, err)
			}
		}
	}
	c.commitHandled(ctx)
	c.first, c.failures, c.retryAt = time.Time{}, 0, time.Time{}
	c.evictSamples()
	return nil
}

// dropRows drops buffered rows whose (partition, offset) drop says.
func (c *rejConsumer) dropRows(drop func(p int32, o int64) bool) {
	keep := c.rows[:0]
	for _, r := range c.rows {
		if !drop(r.Partition, r.Offset) {
			keep = append(keep, r)
		}
	}
	c.rows = keep
	for k, r := range c.counts {
		if drop(r.Partition, r.Offset) {
			delete(c.counts, k)
		}
	}
}

func (c *rejConsumer) evictSamples() {
	horizon := c.now().Add(-sampleHorizon).Unix()
	for pm := range c.samples {
		if pm.Minute < horizon {
			delete(c.samples, pm)
		}
	}
}

func (c *rejConsumer) commitHandled(ctx context.Context) {
	if len(c.commit) == 0 {
		return
	}
	offsets := map[string]map[int32]kgo.EpochOffset{schema.TopicRejections: c.commit}
	c.commit = map[int32]kgo.EpochOffset{}
	cctx, cancel := context.WithTimeout(ctx, c.cfg.InsertTimeout)
	defer cancel()
	c.cl.CommitOffsetsSync(cctx, offsets, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, _ *kmsg.OffsetCommitResponse, err error) {
		if err != nil {
			c.log.Warn("rejections: commit offsets", "err", err)
		}
	})
}

// assigned reads the stored offsets of new partitions (best effort; handle reads them
// otherwise) and makes the samples' counts be read again.
func (c *rejConsumer) assigned(ctx context.Context, _ *kgo.Client, m map[string][]int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dead {
		return
	}
	parts := m[schema.TopicRejections]
	c.forget(parts)
	qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if err := c.readStored(qctx, parts); err != nil {
		c.log.Warn("rejections: read stored offsets on assignment (will retry)", "err", err)
	}
}

// revoked flushes and commits first, so that the next owner starts after it.
func (c *rejConsumer) revoked(_ context.Context, _ *kgo.Client, m map[string][]int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dead {
		return
	}
	if err := c.flushUntil(c.now().Add(c.cfg.RevokeTimeout)); err != nil {
		c.log.Error("rejections: flush on revoke failed; the next owner re-reads the revoked partitions", "err", err)
	}
	c.forget(m[schema.TopicRejections])
}

// lost drops the work of partitions no longer owned.
func (c *rejConsumer) lost(_ context.Context, _ *kgo.Client, m map[string][]int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.dead {
		c.forget(m[schema.TopicRejections])
	}
}

// forget drops all state of parts, and the samples' counts of every pixel-minute up to
// a minute from now: another member may have stored samples of them. mu must be held.
func (c *rejConsumer) forget(parts []int32) {
	gone := map[int32]bool{}
	for _, p := range parts {
		gone[p] = true
		delete(c.stored, p)
		delete(c.handled, p)
		delete(c.commit, p)
	}
	c.dropRows(func(p int32, _ int64) bool { return gone[p] })
	for at := range c.claims {
		if gone[at.p] {
			delete(c.claims, at)
		}
	}
	keep := c.held[:0]
	for _, r := range c.held {
		if !gone[r.Partition] {
			keep = append(keep, r)
		}
	}
	c.held = keep
	c.samples = map[rejection.PixelMinute]int{}
	c.seedThrough = c.now().Add(time.Minute)
	if c.buffered() == 0 && len(c.held) == 0 && len(c.commit) == 0 {
		c.first = time.Time{}
	}
}
