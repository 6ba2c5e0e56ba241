package process

import (
	"context"
	"time"
)

// Sleep waits d or until ctx is done, and reports whether the full wait elapsed (for
// d <= 0: whether ctx is still live).
func Sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// Every runs fn at once and then every interval until ctx is done: the loop of every
// background job (a worker's poll, a scan, a refresh). An error fn returns while ctx is
// live goes to onErr (nil: dropped) and the next tick tries again; a run that outlasts
// the interval delays the next tick rather than overlapping it.
func Every(ctx context.Context, interval time.Duration, fn func(context.Context) error, onErr func(error)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if err := fn(ctx); err != nil && ctx.Err() == nil && onErr != nil {
			onErr(err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
