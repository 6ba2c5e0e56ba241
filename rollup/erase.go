package rollup

import (
	"context"
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"svc/schema/erasure"
)

// Erasures and the consumer (privacy/README.md). Before each INSERT the consumer
// registers it with the privacy fence, which tells it the identities generation and
// the pixels held for a rollup rebuild:
//
//   - rows of a held pixel must not be inserted now: the consumer ends the
//     registration and retries the flush shortly (heldRetry), without polling;
//   - rows carrying an erased identity, received at or before the erasure was
//     requested (or at any time, when it suppresses), lose the identity before the
//     INSERT is sent: events still in flight when the erasure was requested.
//
// The registration ends once the INSERT is known to be over: after it succeeded, or
// after the server no longer runs a failed one (flushRows' unsure path). The erasure
// worker waits for every registration older than its change, so an INSERT either saw
// the change or is finished before the worker acts.
//
// The registration also carries the flush's slices (pixel-days). A failed INSERT may
// have stored its events without some of its views' rows (each part is written on its
// own), and the read-back then skips those rows: its registration ends unsure, which
// keeps the slices for the privacy worker to rebuild from the events (Fence.Unsure).
// So does one a killed consumer never ended.

// errHeld: a flush held rows of a pixel whose rollups are being rebuilt.
var errHeld = errors.New("rollup: a pixel of this flush is held for a rollup rebuild")

// heldRetry is how soon a held flush is tried again.
const heldRetry = 200 * time.Millisecond

// privacyFence is the consumer's side of the privacy fence (nil without Redis).
type privacyFence struct {
	fence *erasure.Fence
	reg   *erasure.Registry
	lease time.Duration
	open  []string // registered INSERT query ids not yet ended

	erased prometheus.Counter
	held   prometheus.Counter
	unsure prometheus.Counter
}

func newPrivacyFence(cfg Config) *privacyFence {
	if cfg.Redis == nil {
		return nil
	}
	reg := cfg.Registerer
	if reg == nil {
		reg = prometheus.DefaultRegisterer
	}
	return &privacyFence{
		fence: erasure.NewFence(cfg.Redis, cfg.ClickHouse.Database),
		reg:   erasure.NewRegistry(cfg.Redis),
		lease: 2 * cfg.InsertTimeout,
		erased: register(reg, prometheus.NewCounter(prometheus.CounterOpts{Name: "svc_rollup_erased_identities_total",
			Help: "Events whose identity the consumer cleared before inserting them (erased while in flight, or suppressed)."})),
		held: register(reg, prometheus.NewCounter(prometheus.CounterOpts{Name: "svc_rollup_held_flushes_total",
			Help: "Flushes put back because a pixel in them was held for a rollup rebuild after an erasure."})),
		unsure: register(reg, prometheus.NewCounter(prometheus.CounterOpts{Name: "svc_rollup_unsure_inserts_total",
			Help: "Failed INSERTs whose pixel-days were left for the privacy worker to rebuild (the events may be stored without some of their rollup rows)."})),
	}
}

// beginInsert registers the INSERT about to be sent as query id and applies what the
// registration returned to the buffered rows. On errHeld or any error nothing may be
// sent. mu must be held.
func (c *consumer) beginInsert(ctx context.Context, id string) error {
	g := c.privacy
	if g == nil {
		return nil
	}
	v, err := g.fence.Begin(ctx, id, c.sink.Slices(), g.lease)
	if err != nil {
		return err
	}
	g.open = append(g.open, id)
	if len(v.Held) > 0 && c.sink.AnyPixel(v.Held) {
		g.held.Inc()
		c.endInserts(ctx)
		return errHeld
	}
	set, err := g.reg.Load(ctx, v.Generation)
	if err != nil {
		c.endInserts(ctx)
		return err
	}
	if set.Len() > 0 {
		g.erased.Add(float64(c.sink.EraseIdentities(set)))
	}
	return nil
}

// endInserts ends every registration this consumer holds: their INSERTs succeeded or
// were never sent. A failure to reach Redis costs a needless repair (the registrations
// lapse with their lease).
func (c *consumer) endInserts(ctx context.Context) {
	c.endRegistrations(ctx, false)
}

// endUnsure ends every registration this consumer holds after a failed INSERT, now
// over: its slices stay for the repair.
func (c *consumer) endUnsure(ctx context.Context) {
	c.endRegistrations(ctx, true)
}

func (c *consumer) endRegistrations(ctx context.Context, unsure bool) {
	g := c.privacy
	if g == nil || len(g.open) == 0 {
		return
	}
	var err error
	if unsure {
		g.unsure.Inc()
		err = g.fence.EndUnsure(context.WithoutCancel(ctx), g.open...)
	} else {
		err = g.fence.End(context.WithoutCancel(ctx), g.open...)
	}
	if err != nil {
		c.log.Warn("end insert registration (it lapses with its lease)", "err", err)
	}
	g.open = g.open[:0]
}

// waitHeld schedules the retry of a held flush: soon, without backoff, and without
// polling meanwhile (the held rows stay buffered).
func (c *consumer) waitHeld() {
	c.flushBad = true
	c.failures = max(c.failures, 1)
	c.retryAt = time.Now().Add(heldRetry)
}
