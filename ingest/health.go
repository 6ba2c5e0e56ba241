package ingest

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// brokerHealth says whether the producer reaches Kafka, so that while it does not the
// edge answers requests 503 at once instead of handing them to a producer that would
// hold each until its delivery timeout.
//
// A probe (the producer's Ping: a metadata request to any known broker) runs every
// probeEvery, and at once when a produce fails or its acknowledgement is overdue (Kick).
// Kafka is "down" from a failed probe until the next one that succeeds, so the edge
// accepts again at most probeEvery after the broker is back; back is also when
// recovered runs (the producer refreshes its metadata then, not after its minimum
// metadata age). A probe that reaches any broker counts as up: one broker of a cluster
// failing leaves the others' partitions served.
type brokerHealth struct {
	ping      func(context.Context) error
	recovered func()
	closed    <-chan struct{} // the producer's context: probing ends when it is closed
	every     time.Duration
	timeout   time.Duration
	log       *slog.Logger // transitions are logged here

	down  atomic.Bool
	mu    sync.Mutex
	downc chan struct{} // closed while down; a fresh one while up
	kick  chan struct{}
	stop  chan struct{}
	done  chan struct{}
	once  sync.Once
}

const (
	// probeEvery is how often Kafka is probed, up or down.
	probeEvery = 250 * time.Millisecond
	// probeTimeout bounds one probe: a broker that does not answer a metadata request
	// within it counts as down.
	probeTimeout = time.Second
)

// startHealth probes with ping until stopped or closed is; recovered runs on each
// return from down to up.
func startHealth(ping func(context.Context) error, recovered func(), closed <-chan struct{}, every, timeout time.Duration, log *slog.Logger) *brokerHealth {
	h := &brokerHealth{ping: ping, recovered: recovered, closed: closed, every: every, timeout: timeout, downc: make(chan struct{}),
		kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}), log: log}
	go h.run()
	return h
}

// Down reports whether the last probe failed.
func (h *brokerHealth) Down() bool { return h.down.Load() }

// WentDown returns a channel that is closed once Kafka is down (already closed while it
// is): a request waiting for an acknowledgement stops waiting then.
func (h *brokerHealth) WentDown() <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.downc
}

// Kick asks for a probe now (a produce failed or is overdue).
func (h *brokerHealth) Kick() {
	select {
	case h.kick <- struct{}{}:
	default:
	}
}

// Stop ends the probes and waits for the last one.
func (h *brokerHealth) Stop() {
	h.once.Do(func() { close(h.stop) })
	<-h.done
}

func (h *brokerHealth) run() {
	defer close(h.done)
	tick := time.NewTicker(h.every)
	defer tick.Stop()
	for {
		if !h.probe() {
			return
		}
		select {
		case <-h.stop:
			return
		case <-h.closed:
			return
		case <-tick.C:
		case <-h.kick:
		}
	}
}

// probe pings once and records the outcome; false when the client is closed.
func (h *brokerHealth) probe() bool {
	ctx, cancel := context.WithTimeout(context.Background(), h.timeout)
	err := h.ping(ctx)
	cancel()
	select {
	case <-h.closed:
		return false
	default:
	}
	if errors.Is(err, kgo.ErrClientClosed) {
		return false
	}
	if down := err != nil; h.down.Load() != down {
		h.set(down)
		if down {
			h.log.Warn("kafka unreachable: answering POST /events 503 until it is back", "err", err.Error())
		} else {
			h.log.Info("kafka reachable again: accepting POST /events")
			h.recovered()
		}
	}
	return true
}

// set records a transition (probe's goroutine only).
func (h *brokerHealth) set(down bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.down.Store(down)
	if down {
		close(h.downc)
	} else {
		h.downc = make(chan struct{})
	}
}
