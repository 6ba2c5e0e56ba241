package app

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

// Throttle counts attempts per subject (a client address, an email) in fixed windows:
// one Redis counter per subject and window, INCR and EXPIRE NX in one round trip.
type Throttle struct {
	rdb    redis.UniversalClient
	Window time.Duration
}

// Allow counts one attempt of subject (kind "addr" or "email") and reports whether it is
// within limit for the current window.
func (t *Throttle) Allow(ctx context.Context, kind, subject string, limit int) (bool, error) {
	k := "svc:app:throttle:" + kind + ":" + digestOf(subject)
	var n *redis.IntCmd
	_, err := t.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		n = p.Incr(ctx, k)
		p.ExpireNX(ctx, k, t.Window)
		return nil
	})
	if err != nil {
		return false, err
	}
	return n.Val() <= int64(limit), nil
}
