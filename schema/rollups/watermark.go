package rollups

import (
	"context"
	"fmt"
	"strconv"
	"strings"
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
//	svc:watermark:{<db>}:events.v1  HASH  n → partitions of the topic, "<p>" → W_p (unix ms),
//	                                      "n:<m>" → 1 for every partition count m published,
//	                                      topic → the topic's incarnation label
//
// per ClickHouse database (the data the instant is about), so that deployments and tests
// sharing a Redis do not mix.
// A value only ever rises (WatermarkRaise keeps the larger), so a member that lost its
// partition and publishes late cannot lower it; every value published is true when
// published and stays true (stored events are never removed from the rollups, except
// by an erasure's rebuild, which readers detect: HoldsChanged in schema/erasure). n
// rises too: Kafka only ever adds partitions, and a member reading the topic's metadata
// before partitions were added must not hide the new ones from the minimum. The counts
// published are kept because a pixel's records move to another partition when the
// count changes (the partitioner hashes the key modulo the count): the pixel's earlier
// records may still wait on the partition of an earlier count (Published.Through).

// ClockMargin is subtracted from the consumer's clock: the hosts' clocks (NTP) must
// agree with true time within it, for the published instant to bound the 202s sent
// before it in true time.
const ClockMargin = 250 * time.Millisecond

// WatermarkKey is the Redis hash of the watermarks published for database db.
func WatermarkKey(db string) string { return "svc:watermark:{" + db + "}:" + schema.TopicEvents }

// watermarkLib raises the partitions' values and the partition count: KEYS[1] the hash;
// ARGV the topic's incarnation label, n, then pairs of partition and unix ms. A label
// other than the one stored (the topic deleted and made again, perhaps with fewer
// partitions) starts the hash afresh: the earlier incarnation's counts and values are of
// offsets that no longer exist.
var watermarkLib = redisfn.New("watermark", `
local function raise(KEYS, ARGV)
  if ARGV[1] ~= '' and redis.call('HGET', KEYS[1], 'topic') ~= ARGV[1] then
    redis.call('DEL', KEYS[1])
    redis.call('HSET', KEYS[1], 'topic', ARGV[1])
  end
  table.remove(ARGV, 1)
  local n = tonumber(ARGV[1])
  if n > tonumber(redis.call('HGET', KEYS[1], 'n') or '0') then redis.call('HSET', KEYS[1], 'n', n) end
  redis.call('HSET', KEYS[1], 'n:' .. n, 1)
  for i = 2, #ARGV - 1, 2 do
    local cur = tonumber(redis.call('HGET', KEYS[1], ARGV[i]) or '0')
    if tonumber(ARGV[i + 1]) > cur then redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1]) end
  end
  return 1
end
`, "raise")

// WatermarkRaise publishes marks (partition → W_p) for the incarnation label of a topic
// of n partitions, keeping for each partition the larger of its stored value and the new
// one ("" label: the incarnation is not checked).
func WatermarkRaise(ctx context.Context, rdb redis.UniversalClient, db, label string, n int, marks map[int32]time.Time) error {
	args := []any{label, n}
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

// Published is what the consumers published for the topic: N, the partition count (0:
// none yet), Counts, every partition count published (N among them), and Marks, the
// partitions' values W_p (a partition absent has none yet).
type Published struct {
	N      int
	Counts []int
	Marks  map[int32]time.Time
}

// Watermarks reads what was published for database db.
func Watermarks(ctx context.Context, rdb redis.UniversalClient, db string) (Published, error) {
	m, err := rdb.HGetAll(ctx, WatermarkKey(db)).Result()
	if err != nil {
		return Published{}, fmt.Errorf("read the watermark: %w", err)
	}
	n, _ := strconv.Atoi(m["n"])
	out := Published{N: max(n, 0), Marks: map[int32]time.Time{}}
	if out.N == 0 {
		return out, nil
	}
	out.Counts = append(out.Counts, out.N)
	for f := range m {
		if c, err := strconv.Atoi(strings.TrimPrefix(f, "n:")); strings.HasPrefix(f, "n:") && err == nil && c > 0 && c != out.N {
			out.Counts = append(out.Counts, c)
		}
	}
	for p := 0; p < out.N; p++ {
		if v, err := strconv.ParseInt(m[strconv.Itoa(p)], 10, 64); err == nil {
			out.Marks[int32(p)] = time.UnixMilli(v).UTC()
		}
	}
	return out, nil
}

// Through is the instant before which every record written with one key is stored,
// given the partition the key maps to under a partition count (partitionOf): the least of
// the values of its partitions under every count published; false when one of them has
// none yet.
func (pub Published) Through(partitionOf func(n int) int32) (time.Time, bool) {
	var low time.Time
	for i, n := range pub.Counts {
		w, ok := pub.Marks[partitionOf(n)]
		if !ok {
			return time.Time{}, false
		}
		if i == 0 || w.Before(low) {
			low = w
		}
	}
	return low, len(pub.Counts) > 0
}
