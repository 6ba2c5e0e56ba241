package rollup

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"svc/lib/process"
)

// retryDelay is the wait after the n-th consecutive failure (n ≥ 1): lo doubled per
// failure up to hi, then jittered into its upper half, so that consumers retrying
// together spread out.
func retryDelay(n int, lo, hi time.Duration) time.Duration {
	d := lo << min(n-1, 20)
	if d > hi || d <= 0 {
		d = hi
	}
	return d/2 + rand.N(d/2+1)
}

// logAttempt says whether the n-th consecutive failure is logged: 1, 2, 4, 8, …
func logAttempt(n int) bool { return n&(n-1) == 0 }

// retryUntil runs step until it succeeds, returns errKilled, or deadline passes;
// after each failure it calls fail (which schedules the retry) and sleeps until
// retryAt(). It returns the last error.
func retryUntil(deadline time.Time, step func(context.Context) error, fail func(error), retryAt func() time.Time) error {
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	for {
		err := step(ctx)
		if err == nil || errors.Is(err, errKilled) {
			return err
		}
		fail(err)
		if !process.Sleep(ctx, time.Until(retryAt())) {
			return err
		}
	}
}
