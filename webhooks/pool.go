package webhooks

import "context"

// drain makes due attempts until the schedule has nothing more due now, with at most
// Config.Concurrency of this process's attempts in flight. An attempt runs on its own:
// each one that finishes frees its slot for the next due attempt at once, so an endpoint
// that takes the whole Config.Timeout to answer holds one slot, not every other
// endpoint's deliveries behind it. Run calls drain every Config.Poll; attempts started
// by one call may still run during the next.
func (w *Worker) drain(ctx context.Context) error {
	for ctx.Err() == nil {
		free := w.Config.Concurrency - int(w.inFlight.Load())
		if free <= 0 {
			select {
			case <-w.freed:
				continue
			case <-ctx.Done():
				return nil
			}
		}
		claims, err := w.claim(ctx, free)
		if err != nil {
			if ctx.Err() == nil {
				w.Log.Warn("webhook worker", "err", err.Error())
			}
			return nil
		}
		for _, c := range claims {
			w.start(ctx, c)
		}
		if len(claims) < free {
			return nil
		}
	}
	return nil
}

// start makes claimed attempt c in a goroutine of its own, holding a slot until it ends.
func (w *Worker) start(ctx context.Context, c Claim) {
	w.inFlight.Add(1)
	w.running.Add(1)
	go func() {
		defer w.running.Done()
		defer func() {
			w.inFlight.Add(-1)
			select {
			case w.freed <- struct{}{}:
			default: // a signal is already waiting
			}
		}()
		w.make(ctx, c)
	}()
}
