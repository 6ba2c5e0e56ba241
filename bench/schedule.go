package bench

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// Schedule is an open-model plan: request i (0-based) is due at Start + i/Rate, for
// Duration. The arrival rate does not depend on how fast the target answers: a slow
// answer delays no later request's due time, so a stall shows up as latency (measured
// from the due time) and not as a lower send rate (no coordinated omission).
type Schedule struct {
	Start    time.Time
	Rate     float64 // requests per second, > 0
	Duration time.Duration
}

// Total is the number of requests the schedule holds.
func (s Schedule) Total() int64 {
	if s.Rate <= 0 || s.Duration <= 0 {
		return 0
	}
	return int64(s.Rate * s.Duration.Seconds())
}

// Offset is when request i is due, relative to Start.
func (s Schedule) Offset(i int64) time.Duration {
	return time.Duration(float64(i) * float64(time.Second) / s.Rate)
}

// Due is when request i is due.
func (s Schedule) Due(i int64) time.Time { return s.Start.Add(s.Offset(i)) }

// End is when the last request's slot ends.
func (s Schedule) End() time.Time { return s.Start.Add(s.Duration) }

// Outcome is what one request produced.
type Outcome struct {
	Status   int    // HTTP status; 0 when there was no answer
	Code     string // problem code, or a transport error ("timeout", "conn_error"); "" when OK
	OK       bool
	Events   int // events the target accepted (ingest), rows inserted (direct)
	Rejected int // events the target rejected within an accepted batch
	Sent     int // events sent
	// Kind names the request's kind in a mix ("pixel-rollups", "plan-actuals"); the
	// report then gives each kind its own latency summary.
	Kind string
}

// Runner executes a Schedule with a bounded pool of workers. Each worker takes the next
// request number, sleeps until it is due, sends it and records the latency from the due
// time. When every worker is busy, due requests wait: their wait counts in their
// latency, and a request sent more than LateAfter after it was due counts as late. A
// request still unsent DrainAfter past the schedule's end is given up and counted as
// unsent.
type Runner struct {
	Schedule   Schedule
	Workers    int
	LateAfter  time.Duration
	DrainAfter time.Duration
	// Do sends request i from worker w (0 <= w < Workers). Each worker calls it
	// sequentially, so per-worker state needs no locking.
	Do  func(w int, i int64) Outcome
	Rec *Recorder
	// Now is the clock (tests); nil means time.Now.
	Now func() time.Time
	// Sleep waits d (tests); nil means time.Sleep.
	Sleep func(d time.Duration)

	next    atomic.Int64
	unsent  atomic.Int64
	started atomic.Int64
}

// Run blocks until every request was sent and answered, given up, or ctx was cancelled
// (then the requests not yet taken count as unsent).
func (r *Runner) Run(ctx context.Context) {
	now, sleep := r.Now, r.Sleep
	if now == nil {
		now = time.Now
	}
	if sleep == nil {
		sleep = time.Sleep
	}
	total := r.Schedule.Total()
	giveUp := r.Schedule.End().Add(r.DrainAfter)
	var wg sync.WaitGroup
	for w := 0; w < max(1, r.Workers); w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for ctx.Err() == nil {
				i := r.next.Add(1) - 1
				if i >= total {
					return
				}
				due := r.Schedule.Due(i)
				t := now()
				if d := due.Sub(t); d > 0 {
					sleep(d)
					if ctx.Err() != nil {
						r.unsent.Add(1)
						return
					}
					t = now()
				} else if t.After(giveUp) {
					r.unsent.Add(1)
					continue
				}
				r.started.Add(1)
				out := r.Do(w, i)
				r.Rec.Record(due, t, now(), t.Sub(due) > r.LateAfter, out)
			}
		}(w)
	}
	wg.Wait()
	if taken := r.next.Load(); taken < total {
		r.unsent.Add(total - taken)
	}
	r.Rec.SetUnsent(r.unsent.Load())
}

// Started is the number of requests sent so far.
func (r *Runner) Started() int64 { return r.started.Load() }
