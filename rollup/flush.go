package rollup

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"svc/lib/process"
	"svc/schema"
	"svc/schema/sink"
)

// flush logs the event claims decided since the last flush (on a replica), produces
// pending dead letters, inserts buffered rows (one INSERT) and commits the offsets of
// everything handled. mu must be held. On error nothing is committed and the state is
// kept for a retry.
func (c *consumer) flush(ctx context.Context) error {
	if err := c.writeEventLogs(ctx); err != nil {
		return err
	}
	if err := c.sync.wait(ctx); err != nil {
		return err
	}
	if err := c.flushDeadLetters(ctx); err != nil {
		return err
	}
	if err := c.flushRows(ctx); err != nil {
		return err
	}
	c.wm.didFlush(c.handled) // every handled record is flushed now
	c.commitHandled(ctx)
	c.first, c.failures, c.retryAt, c.flushBad = time.Time{}, 0, time.Time{}, false
	return nil
}

func cmpOr(a, b error) error {
	if a != nil {
		return a
	}
	return b
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
		c.endUnsure(ctx)
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
	if c.cfg.testBeforeInsert != nil {
		if err := c.cfg.testBeforeInsert(); err != nil {
			return fmt.Errorf("%w: %v", errKilled, err)
		}
	}
	parts := c.sink.Partitions()
	c.lastID = newQueryID()
	ictx, cancel := context.WithTimeout(clickhouse.Context(ctx, clickhouse.WithQueryID(c.lastID)), c.cfg.InsertTimeout)
	defer cancel()
	if err := c.beginInsert(ctx, c.lastID); err != nil {
		return err
	}
	start := time.Now()
	if err := c.sink.Flush(ictx, start); err != nil {
		if errors.Is(err, sink.ErrNotSent) {
			c.endInserts(ctx) // stored nothing: no read-back, no repair
			return err
		}
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

func newQueryID() string {
	var b [16]byte
	for i := range b {
		b[i] = byte(rand.Uint32())
	}
	return schema.InsertQueryPrefix + hex.EncodeToString(b[:])
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
		if absent < 2 && !process.Sleep(ctx, 100*time.Millisecond) {
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
		if !process.Sleep(ctx, 20*time.Millisecond) {
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
	d := retryDelay(c.failures, c.cfg.RetryMin, c.cfg.RetryMax)
	c.retryAt = time.Now().Add(d)
	c.m.insertErrors.Inc()
	if logAttempt(c.failures) {
		c.log.Warn("flush failed; retrying", "attempt", c.failures, "in", d.Round(time.Millisecond).String(), "err", err)
	}
}

// flushUntil retries flush until it succeeds or deadline passes. mu must be held.
func (c *consumer) flushUntil(deadline time.Time) error {
	return retryUntil(deadline, c.flush, c.fail, func() time.Time { return c.retryAt })
}
