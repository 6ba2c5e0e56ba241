package workspace

import (
	"context"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
)

// Duplicate events, per pixel and UTC day: the copies of a client event_id that the
// consumer dropped because an earlier copy of the same (pixel, event_id) was stored
// within the window (rollup/eventdedup.go). A copy inside one batch is dropped at the
// edge and reported in the 202 instead; this counts the copies only the consumer can
// tell, across batches. A pixel's diagnostics read them (Days).
//
//	svc:pixel:<uuid>:duplicates   HASH "YYYY-MM-DD" (the UTC day the edge accepted the
//	                              copy) → copies dropped
//
// The hash expires DuplicateDays after its last write; each write also drops the field
// of the day DuplicateDays before. Counts are at least once: a consumer killed after its
// INSERT and before its commit counts that flush's copies again when the records are
// read again.

// DuplicateDays is how many days of counts a pixel keeps.
const DuplicateDays = 35

// Duplicates is the store of the per-pixel duplicate counts.
type Duplicates struct{ rdb redis.Cmdable }

// NewDuplicates returns the store over rdb.
func NewDuplicates(rdb redis.Cmdable) Duplicates { return Duplicates{rdb: rdb} }

func duplicatesKey(pixel uuid.UUID) string { return pixelKey(pixel) + ":duplicates" }

// PixelDay is a pixel and a UTC day (days since 1970-01-01).
type PixelDay struct {
	Pixel uuid.UUID
	Day   int32
}

const dayLayout = "2006-01-02"

func dayName(d int32) string { return time.Unix(int64(d)*86400, 0).UTC().Format(dayLayout) }

// Add adds counts to the pixels' days, in one pipeline.
func (d Duplicates) Add(ctx context.Context, counts map[PixelDay]int64) error {
	if len(counts) == 0 {
		return nil
	}
	_, err := d.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for pd, n := range counts {
			k := duplicatesKey(pd.Pixel)
			p.HIncrBy(ctx, k, dayName(pd.Day), n)
			p.HDel(ctx, k, dayName(pd.Day-DuplicateDays))
			p.Expire(ctx, k, DuplicateDays*24*time.Hour)
		}
		return nil
	})
	return err
}

// Days returns pixel's counts by UTC day ("YYYY-MM-DD"), for the days of the last
// DuplicateDays that have any.
func (d Duplicates) Days(ctx context.Context, pixel uuid.UUID) (map[string]int64, error) {
	all, err := d.rdb.HGetAll(ctx, duplicatesKey(pixel)).Result()
	if err != nil {
		return nil, err
	}
	out := make(map[string]int64, len(all))
	oldest := time.Now().UTC().AddDate(0, 0, -DuplicateDays).Format(dayLayout)
	for day, v := range all {
		n, err := strconv.ParseInt(v, 10, 64)
		if err == nil && day > oldest {
			out[day] = n
		}
	}
	return out, nil
}
