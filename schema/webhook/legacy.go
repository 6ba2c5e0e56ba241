package webhook

import (
	"context"
	"errors"

	"github.com/redis/go-redis/v9"
)

// Names of the schedule before it took the {sched} hash tag (Redis Cluster support).
func (s *Store) legacySchedKey() string       { return s.p + "schedule" }
func (s *Store) legacyDlvKey(m string) string { return s.p + "dlv:" + m }

// adoptScript writes a delivery moved from the legacy names, unless the tagged names
// already hold it, and schedules it at its old due time.
// KEYS: schedule, dlv hash. ARGV: member, due ms, then field, value pairs.
var adoptScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[2]) == 0 and #ARGV > 2 then
  redis.call('HSET', KEYS[2], unpack(ARGV, 3))
end
if redis.call('ZSCORE', KEYS[1], ARGV[1]) == false then
  redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1])
end
return 1
`)

// MoveLegacySchedule moves the deliveries still scheduled under the legacy names to the
// tagged ones, and returns how many it moved. Each delivery is adopted, then dropped
// from the legacy names; any number of workers may run it at once (adopting twice
// changes nothing). A delivery that a worker of the previous version holds meanwhile
// may be attempted once more after its lease: deliveries are at least once, and
// receivers deduplicate on the event id.
func (s *Store) MoveLegacySchedule(ctx context.Context) (int, error) {
	moved := 0
	for {
		due, err := s.rdb.ZRangeWithScores(ctx, s.legacySchedKey(), 0, 99).Result()
		if err != nil || len(due) == 0 {
			return moved, err
		}
		for _, z := range due {
			m, _ := z.Member.(string)
			if err := s.adopt(ctx, m, int64(z.Score)); err != nil {
				return moved, err
			}
			moved++
		}
	}
}

// adopt moves one legacy delivery m, due at dueMs.
func (s *Store) adopt(ctx context.Context, m string, dueMs int64) error {
	h, err := s.rdb.HGetAll(ctx, s.legacyDlvKey(m)).Result()
	if err != nil {
		return err
	}
	args := []any{m, dueMs}
	for k, v := range h {
		args = append(args, k, v)
	}
	if err := adoptScript.Run(ctx, s.rdb, []string{s.schedKey(), s.dlvKey(m)}, args...).Err(); err != nil {
		return err
	}
	if err := s.rdb.ZRem(ctx, s.legacySchedKey(), m).Err(); err != nil {
		return err
	}
	return s.rdb.Del(ctx, s.legacyDlvKey(m)).Err()
}

// legacyDelivery reads a finished delivery's hash under its legacy name (finished
// deliveries are not moved; they expire 30 days after they finished).
func (s *Store) legacyDelivery(ctx context.Context, m string) (map[string]string, error) {
	h, err := s.rdb.HGetAll(ctx, s.legacyDlvKey(m)).Result()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	return h, err
}
