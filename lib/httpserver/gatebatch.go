package httpserver

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"svc/lib/idempotency"
	"svc/lib/limits"
)

// gateValues is how many values reserve_gate returns per request.
const gateValues = 2 + limits.Results

// gateCall is one request's part of a reserve_gate call: its API key and windows, for
// an Idempotency-Key to reserve in the same call its reservation (rec; rec.Dir "" takes
// from the windows only), and, once the call ran, its gateValues values.
type gateCall struct {
	kid          string
	burst, daily limits.Window
	rec          idempotency.PendingRecord
	res          []any
	err          error
	// done, made when the call waits in the queue, receives the batch it is to send (it
	// leads: gateBatcher.do), or is closed once res or err is set.
	done chan []*gateCall
}

// reserveGateArgs lays calls out as reserve_gate's KEYS and ARGV (see
// reserveGateLibrary): each directory and each API key's windows once. Calls of one API
// key must have the same windows (gateBatcher keeps others for a later call), the
// reservations must be of the store whose tables' timing table is (Buckets.Args, sent
// once), and there may be at most maxGateCall calls (a request's indices are a byte each).
func reserveGateArgs(calls []*gateCall, now time.Time, table []any) (keys []string, args []any) {
	dirs := make([]string, 0, len(calls))
	kids := make([]*gateCall, 0, len(calls))
	for _, c := range calls {
		if c.rec.Dir != "" && !slices.Contains(dirs, c.rec.Dir) {
			dirs = append(dirs, c.rec.Dir)
		}
		if !slices.ContainsFunc(kids, func(k *gateCall) bool { return k.kid == c.kid }) {
			kids = append(kids, c)
		}
	}
	keys = append(make([]string, 0, len(dirs)+3*len(kids)), dirs...)
	args = make([]any, 0, 7+4*len(kids)+len(calls)*4)
	args = append(append(args, len(calls), len(dirs), len(kids), now.UnixMilli()), table...)
	for _, k := range kids {
		keys = append(keys, limits.Keys(k.kid)...)
		args = append(args, limits.Args(now, k.burst, k.daily)[1:]...)
	}
	for _, c := range calls {
		d := slices.Index(dirs, c.rec.Dir) + 1 // 0: no directory
		w := slices.IndexFunc(kids, func(k *gateCall) bool { return k.kid == c.kid }) + 1
		if args = append(args, string([]byte{byte(d), byte(w)})); d > 0 {
			args = append(args, c.rec.Field, c.rec.Value)
		}
	}
	return keys, args
}

// runReserveGate sends calls as one reserve_gate call and hands each its values; table
// is the records' tables' timing (idempotency.Buckets.Args).
func runReserveGate(ctx context.Context, rdb redis.Cmdable, calls []*gateCall, now time.Time, table []any) error {
	if len(calls) > maxGateCall {
		return fmt.Errorf("reserve_gate: %d requests, at most %d a call", len(calls), maxGateCall)
	}
	keys, args := reserveGateArgs(calls, now, table)
	res, err := reserveGateLibrary.Call(ctx, rdb, "reserve_gate", keys, args...).Slice()
	if err != nil {
		return err
	}
	if len(res) != gateValues*len(calls) {
		return fmt.Errorf("reserve_gate: %d values for %d requests", len(res), len(calls))
	}
	for i, c := range calls {
		c.res = res[i*gateValues : (i+1)*gateValues : (i+1)*gateValues]
	}
	return nil
}

// maxGateBatch bounds the requests of one reserve_gate call: Redis runs a function to its
// end before any other command, and a request takes 10–20 µs of it on the 2-core VM
// (BenchmarkReserveGateBatch).
const maxGateBatch = 32

// maxGateCall is the most requests reserve_gate takes in one call.
const maxGateCall = 255

// gateBatcher sends the gates of concurrent requests together: at most inFlight
// reserve_gate calls at a time; a request that finds them all in flight waits in the
// queue, and when a call returns, the queue (up to maxGateBatch requests) goes out as the
// next call, sent by the first request in it. An idle server sends every request's gate
// at once, alone; a busy one sends fewer, larger calls, a request waiting for the calls
// ahead of it (one, unless more than maxGateBatch requests wait). The requests of one
// call are gated in their order in the queue, each as its own call would have been.
type gateBatcher struct {
	inFlight int                           // calls at a time; at least 1
	run      func(batch []*gateCall) error // sends one call (runReserveGate)

	mu      sync.Mutex
	sending int
	queue   []*gateCall
}

// do gates c, alone or with others; c.res or the error is then set.
func (b *gateBatcher) do(c *gateCall) error {
	b.mu.Lock()
	if b.sending < b.inFlight {
		b.sending++
		b.mu.Unlock()
		b.send([]*gateCall{c})
		return c.err
	}
	c.done = make(chan []*gateCall, 1) // only a request that waits needs it
	b.queue = append(b.queue, c)
	b.mu.Unlock()
	if batch := <-c.done; batch != nil {
		b.send(batch)
	}
	return c.err
}

// send runs batch as one call, hands the queue on to the next call (or frees the slot),
// then lets batch's other requests go.
func (b *gateBatcher) send(batch []*gateCall) {
	err := b.call(batch)
	b.mu.Lock()
	if next := b.next(); next != nil {
		next[0].done <- next
	} else {
		b.sending--
	}
	b.mu.Unlock()
	for _, c := range batch {
		c.err = err
		if c != batch[0] {
			close(c.done)
		}
	}
}

// call runs batch, a panic made an error: the requests waiting on it, and the queue
// behind it, must go on either way.
func (b *gateBatcher) call(batch []*gateCall) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("gate call: panic: %v", p)
		}
	}()
	return b.run(batch)
}

// next takes the next call's requests from the queue (b.mu held): up to maxGateBatch, in
// order, leaving for a later call a request whose API key is in the call with other
// windows (a policy changed meanwhile), since a call reads each key's windows once.
func (b *gateBatcher) next() []*gateCall {
	if len(b.queue) == 0 {
		return nil
	}
	batch := make([]*gateCall, 0, min(len(b.queue), maxGateBatch))
	rest := b.queue[:0]
	for _, c := range b.queue {
		if len(batch) < maxGateBatch && !slices.ContainsFunc(batch, func(o *gateCall) bool {
			return o.kid == c.kid && (o.burst != c.burst || o.daily != c.daily)
		}) {
			batch = append(batch, c)
		} else {
			rest = append(rest, c)
		}
	}
	clear(b.queue[len(rest):])
	b.queue = rest
	return batch
}
