package privacy

import (
	"context"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
)

// lockScripts renew and release the worker lease only for its holder.
var (
	renewScript  = redis.NewScript(`if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end return 0`)
	unlockScript = redis.NewScript(`if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`)
)

// lockLease is the worker lease; it is renewed every third of it while the worker runs.
const lockLease = 30 * time.Second

// lock takes the worker lease. The returned context ends when the lease is lost.
func (w *Worker) lock(ctx context.Context) (context.Context, func(), bool) {
	token := uuid.NewString()
	ok, err := w.Redis.SetNX(ctx, w.lockKey, token, lockLease).Result()
	if err != nil || !ok {
		return ctx, nil, false
	}
	lctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(lockLease / 3)
		defer t.Stop()
		for {
			select {
			case <-lctx.Done():
				return
			case <-t.C:
				n, err := renewScript.Run(lctx, w.Redis, []string{w.lockKey}, token, lockLease.Milliseconds()).Int()
				if err == nil && n == 0 {
					w.Log.Warn("privacy: worker lease lost; stopping this run")
					cancel()
					return
				}
			}
		}
	}()
	return lctx, func() {
		cancel()
		<-done
		_ = unlockScript.Run(context.WithoutCancel(ctx), w.Redis, []string{w.lockKey}, token).Err()
	}, true
}
