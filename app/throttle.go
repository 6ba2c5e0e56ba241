package app

import (
	"context"
	"errors"

	"time"

	"github.com/redis/go-redis/v9"
)

// Throttle counts failed attempts per subject (a client address, an email) in fixed
// windows: one Redis counter per subject, its TTL the window from the first failure.
// An attempt is refused while its subject's count is at the bound; a success costs
// nothing, so people who sign in right never wait.
type Throttle struct {
	rdb    redis.UniversalClient
	Window time.Duration
}

func throttleKey(kind, subject string) string {
	return "svc:app:throttle:" + kind + ":" + digestOf(subject)
}

// Blocked reports whether subject (kind "addr" or "email") reached limit failures in
// its current window.
func (t *Throttle) Blocked(ctx context.Context, kind, subject string, limit int) (bool, error) {
	n, err := t.rdb.Get(ctx, throttleKey(kind, subject)).Int()
	if errors.Is(err, redis.Nil) {
		return false, nil
	}
	return n >= limit, err
}

// Fail counts a failed attempt of subject: INCR and EXPIRE NX in one round trip.
func (t *Throttle) Fail(ctx context.Context, kind, subject string) error {
	k := throttleKey(kind, subject)
	_, err := t.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.Incr(ctx, k)
		p.ExpireNX(ctx, k, t.Window)
		return nil
	})
	return err
}
