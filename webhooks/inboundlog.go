package webhooks

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"

	"svc/lib/problem"
)

// What the receiver does with a message that had no effect: a failure (4xx) or a
// replay. Such messages cost their sender nothing, so they are what a flood is made
// of. Each is charged to the client address's failure bucket (throttle.go; past its
// bound the answer is 429 and nothing else happens), counted by reason
// (svc_webhooks_inbound_failures_total), and its log row, if its workspace exists, is
// queued rather than written: the role writes the queue once a second in one INSERT
// (RunLog, and Role.Close at the end). So a flood from any number of addresses costs
// ClickHouse one small INSERT per second and process, never one per request, and at
// most maxQueuedRows rows per second and process; rows past that are dropped and
// counted (svc_webhooks_inbound_log_dropped_total). A failure's row is diagnostics:
// the answer does not wait for it, and a crash may lose the last second of them.
// Processed messages (and those ignored for their type) are written before the answer,
// as the replay guard requires.

// maxQueuedRows bounds the log rows queued between two flushes, per process.
const maxQueuedRows = 1000

// flushEvery is how often the queued rows are written.
const flushEvery = time.Second

// flushTimeout bounds one flush.
const flushTimeout = 10 * time.Second

type rowQueue struct {
	mu   sync.Mutex
	rows []InboundRow
}

// enqueue queues rec for the next flush, or drops it when the queue is full.
func (in *Inbound) enqueue(rec InboundRow) {
	in.queue.mu.Lock()
	ok := len(in.queue.rows) < maxQueuedRows
	if ok {
		in.queue.rows = append(in.queue.rows, rec)
	}
	in.queue.mu.Unlock()
	if !ok && in.Metrics != nil {
		in.Metrics.LogDropped.Inc()
	}
}

// FlushLog writes the queued rows in one INSERT. Rows it could not write are dropped
// (and counted): they are diagnostics, and holding them would let a ClickHouse outage
// grow the queue.
func (in *Inbound) FlushLog(ctx context.Context) error {
	in.queue.mu.Lock()
	rows := in.queue.rows
	in.queue.rows = nil
	in.queue.mu.Unlock()
	if len(rows) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), flushTimeout)
	defer cancel()
	if err := in.Logs.InsertInbounds(ctx, rows); err != nil {
		if in.Metrics != nil {
			in.Metrics.LogDropped.Add(float64(len(rows)))
		}
		return fmt.Errorf("inbound log: %d rows not written: %w", len(rows), err)
	}
	return nil
}

// RunLog flushes the queue every flushEvery until ctx is done; Role.Close flushes what
// the last requests queued.
func (in *Inbound) RunLog(ctx context.Context) error {
	t := time.NewTicker(flushEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if err := in.FlushLog(ctx); err != nil {
			in.Log.Warn("inbound: log flush failed", "err", err.Error())
		}
	}
}

// count counts an answered message; reason is set for a failed one.
func (in *Inbound) count(outcome, reason string) {
	if in.Metrics == nil {
		return
	}
	in.Metrics.Inbound.WithLabelValues(outcome).Inc()
	if reason != "" {
		in.Metrics.Failures.WithLabelValues(reason).Inc()
	}
}

// failureInterval is the time one failure takes to drain from a bucket.
func (in *Inbound) failureInterval() time.Duration {
	return time.Minute / time.Duration(in.Config.InboundFailuresPerMinute)
}

// charge charges one failure (or replay) to the client's bucket. An unreachable Redis
// does not throttle (the request fails on the stores it needs anyway).
func (c *call) charge() Throttle {
	th, err := c.in.Store.ChargeFailure(c.ctx, c.addr, c.in.Config.InboundFailureBurst, c.in.failureInterval())
	if err != nil {
		c.in.Log.Warn("inbound: failure bucket not charged", "request_id", c.r.ID, "err", err.Error())
		return Throttle{}
	}
	return th
}

// fail answers p: a failed message, charged to the client's bucket (a 409 is not: the
// same message is in flight), counted under reason and, if its workspace exists,
// logged with logReason. Past the bucket's bound the answer is 429 instead, unlogged.
func (c *call) fail(reason, logReason string, p *problem.Problem) error {
	if reason != reasonInFlight {
		if th := c.charge(); th.Limited {
			return c.throttled(th)
		}
	}
	c.in.count(Failed, reason)
	if c.known {
		c.rec.Outcome, c.rec.Reason, c.rec.Status = Failed, logReason, p.Status
		c.in.enqueue(c.rec)
	}
	return p
}

// replay answers 200 ignored for a message already handled (nothing changes); it is
// charged and logged like a failure.
func (c *call) replay(reason string) error {
	if th := c.charge(); th.Limited {
		return c.throttled(th)
	}
	c.in.count(Ignored, "")
	c.rec.Outcome, c.rec.Reason, c.rec.Status = Ignored, reason, 200
	c.in.enqueue(c.rec)
	return c.r.JSON(200, InboundResult{Outcome: Ignored, MessageID: c.rec.MessageID, Reason: reason})
}

// throttled answers 429 rate_limited: the client's bucket is empty.
func (c *call) throttled(th Throttle) error {
	c.in.count(Failed, reasonThrottled)
	secs := max(1, int(math.Ceil(th.RetryAfter.Seconds())))
	p := problem.New(problem.RateLimited, "Too many failed or repeated inbound messages from this address; retry in %d s.", secs)
	p.RetryAfter = secs
	return p
}

// unavailable answers 503: a store the receiver needs failed (what is logged, not
// sent: the error may name internals).
func (c *call) unavailable(step string, err error, what string, retryAfter int) error {
	c.in.Log.Error("inbound: "+step+" failed", "request_id", c.r.ID, "err", err.Error())
	c.in.count(Failed, reasonUnavailable)
	return problem.Unavailable(what, retryAfter)
}
