package limits_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"

	"svc/lib/limits"
	"svc/schema/apitest"
)

// clocked is a limiter over the test Redis with a clock the test moves, and a key id no
// other test uses.
func clocked(t *testing.T) (*limits.Limiter, string, *time.Time) {
	t.Helper()
	l := limits.New(apitest.Redis(t))
	now := time.UnixMilli(1_800_000_000_000)
	l.Now = func() time.Time { return now }
	id := "test-" + uuid.NewString()
	t.Cleanup(func() { l.Redis().Del(context.Background(), limits.Keys(id)...) })
	return l, id, &now
}

func take(t *testing.T, l *limits.Limiter, id string, burst, daily int) limits.Decision {
	t.Helper()
	b, d := limits.Windows(burst, daily)
	dec, err := l.Take(context.Background(), id, b, d)
	if err != nil {
		t.Fatal(err)
	}
	return dec
}

func peek(t *testing.T, l *limits.Limiter, id string, burst, daily int) limits.Decision {
	t.Helper()
	b, d := limits.Windows(burst, daily)
	dec, err := l.Peek(context.Background(), id, b, d)
	if err != nil {
		t.Fatal(err)
	}
	return dec
}

// TestRaisingTheDailyQuotaKeepsWhatWasSpent: 3 of 10 spent, then raised to 1000 and to
// 10000: 997 and 9997 remain (not 699, not a lock-out for a day).
func TestRaisingTheDailyQuotaKeepsWhatWasSpent(t *testing.T) {
	l, id, _ := clocked(t)
	for range 3 {
		take(t, l, id, 120, 10)
	}
	if r := peek(t, l, id, 120, 10).Daily.Remaining; r != 7 {
		t.Fatalf("daily remaining %d, want 7", r)
	}
	if r := peek(t, l, id, 120, 1000).Daily.Remaining; r != 997 {
		t.Fatalf("after raising to 1000: daily remaining %d, want 997", r)
	}
	dec := take(t, l, id, 120, 10000)
	if !dec.Allowed || dec.Daily.Remaining != 9996 {
		t.Fatalf("after raising to 10000: %+v, want allowed with 9996 left", dec)
	}
}

// TestRaisingASpentQuotaAdmits: a key that spent its whole daily quota of 3 and is raised
// to 10000 is admitted at once; its window refills within a minute at the new rate.
func TestRaisingASpentQuotaAdmits(t *testing.T) {
	l, id, _ := clocked(t)
	for range 3 {
		take(t, l, id, 120, 3)
	}
	if dec := take(t, l, id, 120, 3); dec.Allowed || dec.Denied != "daily" {
		t.Fatalf("the fourth of 3: %+v", dec)
	}
	dec := take(t, l, id, 120, 10000)
	if !dec.Allowed || dec.Daily.Remaining != 9996 || dec.Daily.Reset > 60 {
		t.Fatalf("after raising to 10000: %+v", dec)
	}
}

// TestRaisingTheBurstKeepsWhatWasSpent: 4 of 4 spent, raised to 600: 596 left (not 56).
func TestRaisingTheBurstKeepsWhatWasSpent(t *testing.T) {
	l, id, _ := clocked(t)
	for range 4 {
		take(t, l, id, 4, 10000)
	}
	if dec := take(t, l, id, 4, 10000); dec.Denied != "burst" {
		t.Fatalf("the fifth of 4: %+v", dec)
	}
	if r := peek(t, l, id, 600, 10000).Burst.Remaining; r != 596 {
		t.Fatalf("after raising to 600: burst remaining %d, want 596", r)
	}
}

// TestLoweringAQuota: 5 of 100 spent, lowered to 10: 5 left; 50 spent, lowered to 10:
// none left, and the window is full again within one window length.
func TestLoweringAQuota(t *testing.T) {
	l, id, now := clocked(t)
	for range 5 {
		take(t, l, id, 1000, 100)
	}
	if r := peek(t, l, id, 1000, 10).Daily.Remaining; r != 5 {
		t.Fatalf("after lowering to 10: daily remaining %d, want 5", r)
	}
	for range 45 {
		take(t, l, id, 1000, 100)
	}
	dec := take(t, l, id, 1000, 10)
	if dec.Allowed || dec.Denied != "daily" || dec.Daily.Remaining != 0 || dec.Daily.Reset > 86400 {
		t.Fatalf("50 spent, lowered to 10: %+v", dec)
	}
	*now = now.Add(86400 * time.Second)
	if r := peek(t, l, id, 1000, 10).Daily.Remaining; r != 10 {
		t.Fatalf("a window later: daily remaining %d, want 10", r)
	}
}

// TestWindowsDrainAndRefund: a window refills one request per w/q; a refund gives one
// back; a denied request spends nothing; Peek spends nothing.
func TestWindowsDrainAndRefund(t *testing.T) {
	l, id, now := clocked(t)
	for range 3 {
		take(t, l, id, 3, 100)
	}
	dec := take(t, l, id, 3, 100)
	if dec.Allowed || dec.Denied != "burst" || dec.RetryAfter != 20 {
		t.Fatalf("the fourth of 3 per minute: %+v, want burst denial with retry 20 s", dec)
	}
	if p := peek(t, l, id, 3, 100); p.Burst.Remaining != 0 || p.Daily.Remaining != 97 || p.Burst.Reset != 60 {
		t.Fatalf("peek after a denial: %+v", p)
	}
	*now = now.Add(20 * time.Second)
	if dec := take(t, l, id, 3, 100); !dec.Allowed || dec.Burst.Remaining != 0 || dec.Daily.Remaining != 96 {
		t.Fatalf("20 s later: %+v", dec)
	}
	b, d := limits.Windows(3, 100)
	dec, err := l.Refund(context.Background(), id, b, d)
	if err != nil {
		t.Fatal(err)
	}
	if dec.Burst.Remaining != 1 || dec.Daily.Remaining != 97 {
		t.Fatalf("after a refund: %+v", dec)
	}
}

// TestLegacyStateIsRead: a window written in the earlier format (a bare TAT in ms) is
// read under the current quota.
func TestLegacyStateIsRead(t *testing.T) {
	l, id, now := clocked(t)
	k := limits.Keys(id)
	// 3 requests of a 10-per-day window: TAT = now + 3 × 8640 s.
	tat := now.Add(3 * 8640 * time.Second).UnixMilli()
	if err := l.Redis().Set(context.Background(), k[1], tat, time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	if r := peek(t, l, id, 120, 10).Daily.Remaining; r != 7 {
		t.Fatalf("legacy state: daily remaining %d, want 7", r)
	}
}

// TestTwoKeyStateIsRead: windows written by the version before (a string per window,
// "<spent>:<unix ms>") are read while the one state string is absent, and the next take
// writes both windows into it: nothing spent is forgotten across the upgrade.
func TestTwoKeyStateIsRead(t *testing.T) {
	l, id, now := clocked(t)
	ctx := context.Background()
	k := limits.Keys(id)
	at := strconv.FormatInt(now.UnixMilli(), 10)
	if err := l.Redis().Set(ctx, k[1], "4:"+at, time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	if err := l.Redis().Set(ctx, k[2], "2:"+at, time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	if dec := take(t, l, id, 120, 10); dec.Daily.Remaining != 5 || dec.Burst.Remaining != 117 {
		t.Fatalf("after the upgrade's first take: daily %d, burst %d remaining; want 5 and 117", dec.Daily.Remaining, dec.Burst.Remaining)
	}
	l.Redis().Del(ctx, k[1], k[2])
	if dec := peek(t, l, id, 120, 10); dec.Daily.Remaining != 5 || dec.Burst.Remaining != 117 {
		t.Fatalf("from the one state string: daily %d, burst %d remaining; want 5 and 117", dec.Daily.Remaining, dec.Burst.Remaining)
	}
}

// LastTaken reads the time of the last take from the daily window's state: unknown
// before any, the take's time after, and a peek (or a refused take) does not move it.
func TestLastTaken(t *testing.T) {
	l, id, now := clocked(t)
	ctx := context.Background()
	if _, ok, err := l.LastTaken(ctx, id); ok || err != nil {
		t.Fatalf("before any take: %v %v", ok, err)
	}
	take(t, l, id, 1, 10)
	first := *now
	*now = now.Add(10 * time.Second)
	peek(t, l, id, 1, 10)
	take(t, l, id, 1, 10) // refused: the burst of 1 is spent
	if at, ok, err := l.LastTaken(ctx, id); !ok || err != nil || !at.Equal(first) {
		t.Fatalf("after a take, a peek and a refusal: %v %v %v (want %v)", at, ok, err, first)
	}
	*now = now.Add(2 * time.Minute)
	take(t, l, id, 1, 10)
	if at, ok, _ := l.LastTaken(ctx, id); !ok || !at.Equal(*now) {
		t.Fatalf("after a second take: %v (want %v)", at, *now)
	}
}
