package trace

import (
	"testing"
	"time"

	"svc/schema/rejection"
)

// The rejections table keeps every row of the oldest local day GET /pixels can show
// (MaxDays, today included) under the default retention (30 days), in every zone from
// UTC−12 to UTC+14 and at every hour: the day's rejected and duplicates are exact.
func TestHealthDaysWithinTheRejectionsRetention(t *testing.T) {
	const retention = 720 * time.Hour // SVC_ROLLUP_REJECTION_RETENTION's default
	base := time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)
	for offset := -12; offset <= 14; offset++ {
		loc := time.FixedZone("", offset*3600)
		for h := 0; h < 24; h++ {
			now := base.Add(time.Duration(h)*time.Hour + 30*time.Minute)
			_, start := PixelDays{Loc: loc, Days: MaxDays}.window(now)
			if kept := rejection.FirstKeptDay(now, retention); start.Before(kept) {
				t.Fatalf("UTC%+d at %s: the oldest day starts %s, rows kept from %s", offset, now.Format(time.RFC3339), start, kept)
			}
		}
	}
}
