package rollup

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"svc/lib/process"
)

// loop is what pollLoop drives of one consumer. Every function but die runs with mu held.
type loop struct {
	cl   *kgo.Client
	mu   *sync.Mutex
	nice int                          // the loop's thread's nice value (Config.LoopNice; 0: any thread)
	log  *slog.Logger                 // where a failure to set it goes
	work func(context.Context) error  // handle and flush what is held; errKilled ends the loop
	wake func() (time.Duration, bool) // how long until the next step, and whether to poll meanwhile
	got  func(kgo.Fetches)            // take a poll's records (and errors)
	die  func(error) error            // stop as a SIGKILL would (tests)
}

// pollLoop runs l until ctx is cancelled (nil: the caller flushes and leaves) or a step
// is killed. With kgo.BlockRebalanceOnPoll a rebalance waits between a poll and
// AllowRebalance, so its callbacks always meet the state work left.
func pollLoop(ctx context.Context, l loop) error {
	if l.nice > 0 {
		if err := process.LowerThreadPriority(l.nice); err != nil {
			l.log.Warn("the poll loop runs at its process's priority", "err", err.Error())
		}
	}
	for ctx.Err() == nil {
		l.mu.Lock()
		err := l.work(ctx)
		wait, canPoll := l.wake()
		l.mu.Unlock()
		if errors.Is(err, errKilled) {
			return l.die(err)
		}
		if !canPoll {
			process.Sleep(ctx, wait)
			continue
		}
		pctx, cancel := context.WithTimeout(ctx, wait)
		fs := l.cl.PollRecords(pctx, maxPollRecords)
		cancel()
		if fs.IsClientClosed() {
			return errors.New("kafka client closed")
		}
		l.mu.Lock()
		l.got(fs)
		err = l.work(ctx)
		l.mu.Unlock()
		l.cl.AllowRebalance()
		if errors.Is(err, errKilled) {
			return l.die(err)
		}
	}
	return nil
}
