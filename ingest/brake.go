package ingest

import (
	"cmp"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"svc/lib/httpserver"
	"svc/lib/problem"
)

// invalidBrake slows down a key whose batches are refused whole (422: not a batch, or no
// event acceptable; 422 or 404: a pixel_id that is no pixel of the key's; dry runs
// too), so that a sender of nothing but invalid events cannot take the edge's cores from
// everyone else: such a batch costs what a valid one does (every event parsed and
// checked, its 422 written, its rejections recorded), and spends no quota (a refused
// request is refunded).
//
// Each key has a bucket of 2 × rate tokens refilled at rate per second (Config.InvalidRate,
// SVC_INGEST_INVALID_RATE); a whole refusal takes one. While the bucket is empty the key's
// POST /events are answered 429 rate_limited, before their events are read (the route's
// Admit hook: no limit spent, recorded as a refused batch like the limits' 429s), each
// answer held a while first (hold).
// A key whose batches are valid never meets it; one sending invalid batches slower than
// rate per second neither: it gets every 422 with its errors. Per edge process: n edges
// let n × rate through. Buckets are dropped once full again.
type invalidBrake struct {
	rate, burst float64
	holdFor     time.Duration // a braked answer is held holdFor/2 to holdFor (hold)
	mu          sync.Mutex
	keys        map[uuid.UUID]*brakeBucket
	buckets     atomic.Int32 // len(keys): while 0, a batch passes without the lock
	held        atomic.Int32 // braked requests being held
}

type brakeBucket struct {
	tokens float64
	at     time.Time
}

// newInvalidBrake returns the brake of cfg (nil when InvalidRate is 0).
func newInvalidBrake(cfg Config) *invalidBrake {
	if cfg.InvalidRate <= 0 {
		return nil
	}
	return &invalidBrake{rate: float64(cfg.InvalidRate), burst: 2 * float64(cfg.InvalidRate),
		holdFor: cmp.Or(cfg.BrakeHold, brakeHold), keys: map[uuid.UUID]*brakeBucket{}}
}

// refill brings b's tokens to now and reports whether the bucket is full.
func (ib *invalidBrake) refill(b *brakeBucket, now time.Time) bool {
	b.tokens = min(ib.burst, b.tokens+now.Sub(b.at).Seconds()*ib.rate)
	b.at = now
	return b.tokens >= ib.burst
}

// admits says whether key's batches may be read: the key has no bucket (no recent
// whole refusal) or a token in it. It takes none (take does).
func (ib *invalidBrake) admits(key uuid.UUID, now time.Time) bool {
	if ib == nil || ib.buckets.Load() == 0 {
		return true
	}
	ib.mu.Lock()
	defer ib.mu.Unlock()
	b := ib.bucketOf(key, now)
	return b == nil || b.tokens >= 1
}

// take admits one of key's batches as its handler starts: true when the key has no
// bucket (no recent whole refusal), or takes one token from it (took: the batch holds it
// until done). false: the bucket is empty, refuse the batch unread.
func (ib *invalidBrake) take(key uuid.UUID, now time.Time) (ok, took bool) {
	if ib == nil || ib.buckets.Load() == 0 {
		return true, false
	}
	ib.mu.Lock()
	defer ib.mu.Unlock()
	b := ib.bucketOf(key, now)
	if b == nil {
		return true, false
	}
	if b.tokens < 1 {
		return false, false
	}
	b.tokens--
	return true, true
}

// bucketOf returns key's bucket refilled to now, or nil when it has none: also when it
// is full again (back under the pace for a while), and then it is forgotten. mu held.
func (ib *invalidBrake) bucketOf(key uuid.UUID, now time.Time) *brakeBucket {
	b := ib.keys[key]
	if b == nil || !ib.refill(b, now) {
		return b
	}
	delete(ib.keys, key)
	ib.buckets.Add(-1)
	return nil
}

// done settles an admitted batch of key: refused whole, it costs a token (already taken
// when took); otherwise a token it took is given back (and a full bucket dropped). A
// token is taken as the batch's handler starts (take), not at the refusal, so that a
// thousand batches in flight cannot all pass a bucket holding one token.
func (ib *invalidBrake) done(key uuid.UUID, took, refusedWhole bool, now time.Time) {
	if ib == nil || took == refusedWhole {
		return
	}
	ib.mu.Lock()
	defer ib.mu.Unlock()
	b := ib.keys[key]
	if b == nil {
		if !refusedWhole {
			return
		}
		b = &brakeBucket{tokens: ib.burst, at: now}
		ib.keys[key] = b
		ib.buckets.Add(1)
	}
	ib.refill(b, now)
	if refusedWhole {
		b.tokens = max(b.tokens-1, 0)
	} else if b.tokens = min(ib.burst, b.tokens+1); b.tokens >= ib.burst {
		delete(ib.keys, key)
		ib.buckets.Add(-1)
	}
}

// brakeHold is how long a braked request's 429 is held at most before it is written
// (half of it at least; never past its Retry-After): a sender that retries at once is
// then paced by its own concurrency (n connections: at most 2n requests a second)
// instead of costing the edge an HTTP exchange per retry. A held request costs a
// goroutine and a timer, no CPU.
const brakeHold = time.Second

// brakeHeldMax bounds the requests held at once per edge; past it a braked request is
// answered at once.
const brakeHeldMax = 4096

// brakeHeld marks (as a fasthttp user value) a request the brake refused: its 429 is
// held (hold) once the refusal is recorded and the body released.
type brakeHeld struct{}

// admit is POST /events' Admit hook: 429 while the key's brake is on (its bucket empty).
// It takes no token: a batch takes one when its handler starts (postEvents, braked there
// when the bucket emptied meanwhile) and gives it back unless refused whole, so a request
// that never reaches the handler (the windows' 429, an Idempotency-Key's replay or
// conflict) holds none. A dry run is read as a batch is: it takes a token, and its 422
// counts as a refusal (its events cost the edge what a real batch's do).
func (e *Edge) admit(r *httpserver.Request) *problem.Problem {
	if e.brake.admits(r.Key.ID, time.Now()) {
		return nil
	}
	return e.brakeProblem(r)
}

// brakeProblem is the 429 of a braked request, marked to be held once recorded.
func (e *Edge) brakeProblem(r *httpserver.Request) *problem.Problem {
	e.metrics.braked.Inc()
	r.Ctx.SetUserValue(brakeHeld{}, true) // refused (rejections.go) records it, then holds it
	p := problem.New(problem.RateLimited, "This key's recent batches were all refused (422): its POST /events are slowed to %d refused batches a second; send valid batches, or read the errors[] of one 422 first.", int(e.brake.rate))
	p.RetryAfter = 1
	return p
}

// braked answers a batch its handler found braked (the bucket emptied after admit): as
// admit's refusal, recorded and held; the server gives back the request its gate took,
// so a braked batch spends no quota either way.
func (e *Edge) braked(r *httpserver.Request) *problem.Problem {
	p := e.brakeProblem(r)
	e.refused(r, p)
	return p
}

// hold waits between half of holdFor (Config.BrakeHold, default brakeHold) and all of it
// before a braked request is answered, unless brakeHeldMax are held already or done
// closes (the server is shutting down). The wait is drawn at random: a flood's requests
// braked at one moment would otherwise all come back at one moment a second later, a
// wave of work every second. The caller releases the body first: a held request must
// keep none of the in-flight bodies' budget, or a flood of large bodies would starve
// everyone's.
func (ib *invalidBrake) hold(done <-chan struct{}) {
	if ib.held.Add(1) > brakeHeldMax {
		ib.held.Add(-1)
		return
	}
	defer ib.held.Add(-1)
	t := time.NewTimer(ib.holdFor/2 + rand.N(ib.holdFor/2+1))
	defer t.Stop()
	select {
	case <-t.C:
	case <-done:
	}
}
