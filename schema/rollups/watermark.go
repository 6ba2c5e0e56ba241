package rollups

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"svc/lib/redisfn"
	"svc/schema"
)

// The completeness watermark of the rollups: an instant T such that every event a 202
// accepted before T is in ClickHouse, and so in every rollup read after T was read
// (DESIGN.md, "The completeness watermark", has the argument).
//
// The consumer (rollup/watermark.go) publishes, per partition p of events.v1, an
// instant W_p: it took a time S on its clock, then asked Kafka for p's high watermark H
// (every record acknowledged before S is below H: an acks=all acknowledgement is sent
// once the high watermark passed the record), and later flushed every offset below H
// (stored, or skipped as stored, a duplicate or a dead letter); then W_p = S −
// ClockMargin. IngestedThrough is the minimum over the topic's partitions, read from
//
//	svc:watermark:{<db>}:events.v1  HASH  n → partitions of the topic, "<p>" → W_p (unix ms)
//
// per ClickHouse database (the data the instant is about), so that deployments and tests
// sharing a Redis do not mix.
// A value only ever rises (WatermarkRaise keeps the larger), so a member that lost its
// partition and publishes late cannot lower it; every value published is true when
// published and stays true (stored events are never removed from the rollups, except
// by an erasure's rebuild, which readers detect: HoldsChanged in schema/erasure).

// ClockMargin is subtracted from the consumer's clock: the hosts' clocks (NTP) must
// agree with true time within it, for the published instant to bound the 202s sent
// before it in true time.
const ClockMargin = 250 * time.Millisecond

// WatermarkKey is the Redis hash of the watermarks published for database db.
func WatermarkKey(db string) string { return "svc:watermark:{" + db + "}:" + schema.TopicEvents }

// watermarkLib raises the partitions' values: KEYS[1] the hash; ARGV n, then pairs of
// partition and unix ms.
var watermarkLib = redisfn.New("watermark", `
local function raise(KEYS, ARGV)
  redis.call('HSET', KEYS[1], 'n', ARGV[1])
  for i = 2, #ARGV - 1, 2 do
    local cur = tonumber(redis.call('HGET', KEYS[1], ARGV[i]) or '0')
    if tonumber(ARGV[i + 1]) > cur then redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1]) end
  end
  return 1
end
`, "raise")

// WatermarkRaise publishes marks (partition → W_p) for a topic of n partitions,
// keeping for each partition the larger of its stored value and the new one.
func WatermarkRaise(ctx context.Context, rdb redis.UniversalClient, db string, n int, marks map[int32]time.Time) error {
	args := []any{n}
	for p, t := range marks {
		args = append(args, strconv.Itoa(int(p)), t.UnixMilli())
	}
	return watermarkLib.Call(ctx, rdb, "raise", []string{WatermarkKey(db)}, args...).Err()
}

// IngestedThrough returns the watermark: the minimum of the partitions' values, and
// false when a partition has none yet (then no instant is claimed).
func IngestedThrough(ctx context.Context, rdb redis.UniversalClient, db string) (time.Time, bool, error) {
	m, err := rdb.HGetAll(ctx, WatermarkKey(db)).Result()
	if err != nil {
		return time.Time{}, false, fmt.Errorf("read the watermark: %w", err)
	}
	n, err := strconv.Atoi(m["n"])
	if err != nil || n <= 0 {
		return time.Time{}, false, nil
	}
	var low int64 = -1
	for p := 0; p < n; p++ {
		v, err := strconv.ParseInt(m[strconv.Itoa(p)], 10, 64)
		if err != nil {
			return time.Time{}, false, nil
		}
		if low < 0 || v < low {
			low = v
		}
	}
	return time.UnixMilli(low).UTC(), true, nil
}

// Watermarks returns the partition count published for the topic (0: none yet) and the
// partitions' values W_p (a partition absent has none yet).
func Watermarks(ctx context.Context, rdb redis.UniversalClient, db string) (int, map[int32]time.Time, error) {
	m, err := rdb.HGetAll(ctx, WatermarkKey(db)).Result()
	if err != nil {
		return 0, nil, fmt.Errorf("read the watermark: %w", err)
	}
	n, _ := strconv.Atoi(m["n"])
	out := map[int32]time.Time{}
	for p := 0; p < n; p++ {
		if v, err := strconv.ParseInt(m[strconv.Itoa(p)], 10, 64); err == nil {
			out[int32(p)] = time.UnixMilli(v).UTC()
		}
	}
	return max(n, 0), out, nil
}
