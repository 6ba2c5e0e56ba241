package workspace

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"svc/schema"
)

// Raw-event retention bounds, in days. The lower bound keeps every removed day final:
// a day can still receive late events until schema.MaxEventAge (7 days) plus an hour
// after it ends, and removing part of a day's raw events would leave a later rebuild of
// that day (an erasure) with only part of its events. With at least 8 days, day D goes
// only once D+8 has begun, after it became final.
const (
	MinRetentionDays = 8
	MaxRetentionDays = 36500
)

// retentionKey holds each workspace's retention (a workspace setting, global like the
// workspace record svc:ws:<uuid>): HASH workspace uuid → days. Absent: unlimited.
const retentionKey = "svc:privacy:retention"

// Retention is the per-workspace raw-event retention setting.
type Retention struct{ rdb redis.UniversalClient }

// NewRetention returns the setting's store over rdb.
func NewRetention(rdb redis.UniversalClient) Retention { return Retention{rdb: rdb} }

// ValidateRetentionDays reports a retention outside MinRetentionDays..MaxRetentionDays.
func ValidateRetentionDays(days int) error {
	if days < MinRetentionDays || days > MaxRetentionDays {
		return fmt.Errorf("retention %d days: want %d..%d (a day's raw events go only once the day is final: %v after it ends)",
			days, MinRetentionDays, MaxRetentionDays, schema.MaxEventAge+time.Hour)
	}
	return nil
}

// Set sets ws's retention to days; days 0 means unlimited (the default).
func (r Retention) Set(ctx context.Context, ws uuid.UUID, days int) error {
	if days == 0 {
		return r.rdb.HDel(ctx, retentionKey, ws.String()).Err()
	}
	if err := ValidateRetentionDays(days); err != nil {
		return err
	}
	return r.rdb.HSet(ctx, retentionKey, ws.String(), days).Err()
}

// Get returns ws's retention in days, or 0 for unlimited.
func (r Retention) Get(ctx context.Context, ws uuid.UUID) (int, error) {
	n, err := r.rdb.HGet(ctx, retentionKey, ws.String()).Int()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	return n, err
}

// All returns every workspace with a retention.
func (r Retention) All(ctx context.Context) (map[uuid.UUID]int, error) {
	m, err := r.rdb.HGetAll(ctx, retentionKey).Result()
	if err != nil {
		return nil, err
	}
	out := map[uuid.UUID]int{}
	for k, v := range m {
		ws, err1 := uuid.Parse(k)
		n, err2 := strconv.Atoi(v)
		if err1 == nil && err2 == nil && n > 0 {
			out[ws] = n
		}
	}
	return out, nil
}

// RetentionCutoff is the first day kept under a retention of days on the UTC day of now: rows
// whose event_date is before it are removed.
func RetentionCutoff(now time.Time, days int) time.Time {
	now = now.UTC()
	return time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC).AddDate(0, 0, -days)
}
