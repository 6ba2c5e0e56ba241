package bench

import (
	"context"

	"github.com/redis/go-redis/v9"
)

// forks are the forks Redis has made for persistence (AOF rewrites and RDB snapshots):
// finished, and running now; summed over a cluster's masters. A fork copies Redis's page
// tables, and its child then writes the whole dataset out on the machine's cores: a run
// that meets one measures that too, so the report says so (forkNote).
type forks struct{ done, running int64 }

func redisForks(ctx context.Context, rdb redis.UniversalClient) (forks, error) {
	var total forks
	err := eachMasterInfo(ctx, rdb, "persistence", func(_ context.Context, _ *redis.Client, info string) error {
		f := persistenceForks(info)
		total.done += f.done
		total.running += f.running
		return nil
	})
	return total, err
}

// persistenceForks reads INFO persistence: rewrites and snapshots finished (aof_rewrites,
// rdb_saves) and running.
func persistenceForks(info string) forks {
	return forks{done: infoInt(info, "aof_rewrites") + infoInt(info, "rdb_saves"),
		running: infoInt(info, "aof_rewrite_in_progress") + infoInt(info, "rdb_bgsave_in_progress")}
}

// watchForks reads Redis's forks now; the function it returns adds forkNote for the forks
// since to a report (nothing when Redis cannot be asked).
func watchForks(ctx context.Context, rdb redis.UniversalClient) func(*Report) {
	before, err := redisForks(ctx, rdb)
	return func(rep *Report) {
		after, err2 := redisForks(ctx, rdb)
		if err != nil || err2 != nil {
			return
		}
		if note := forkNote(before, after); note != "" {
			rep.Notes = append(rep.Notes, note)
		}
	}
}

// forkNote is the report's note when a fork ran during the run (between before and
// after), or "".
func forkNote(before, after forks) string {
	if after.done == before.done && before.running == 0 && after.running == 0 {
		return ""
	}
	return "Redis forked for persistence during the run (an AOF rewrite or RDB snapshot: its child writes the dataset out on the same cores); the latency of those seconds includes it"
}
