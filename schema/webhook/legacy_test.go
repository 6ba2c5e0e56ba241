package webhook

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"svc/lib/process"
	"svc/schema/apitest"
)

// TestScheduleKeysShareASlot: the claim, finish and redeliver scripts touch the
// schedule and a delivery's hash (the claim script by name, from inside); in a Redis
// Cluster they must hash to one slot, whatever the prefix.
func TestScheduleKeysShareASlot(t *testing.T) {
	for _, prefix := range []string{"svc:wh:", "test:wh:" + uuid.NewString()[:8] + ":"} {
		s := NewStore(nil, prefix)
		want := apitest.Slot(s.schedKey())
		for i := 0; i < 50; i++ {
			if k := s.dlvKey(member(uuid.New(), uuid.New())); apitest.Slot(k) != want {
				t.Fatalf("%q is in slot %d, the schedule %q in %d", k, apitest.Slot(k), s.schedKey(), want)
			}
		}
	}
}

// TestMoveLegacySchedule: deliveries scheduled under the names used before the hash
// tag are moved, with their state and due time, and then claimed as usual; moving
// twice changes nothing.
func TestMoveLegacySchedule(t *testing.T) {
	rdb := apitest.Redis(t)
	prefix := "test:wh:" + uuid.NewString()[:8] + ":"
	t.Cleanup(func() { _, _ = process.UnlinkPattern(context.Background(), rdb, prefix+"*") })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st := NewStore(rdb, prefix)
	ws, ep := uuid.New(), uuid.New()
	now := time.Now()
	due := now.Add(-time.Second).UnixMilli()
	var members []string
	for i := 0; i < 3; i++ {
		m := member(ep, uuid.New())
		members = append(members, m)
		if err := rdb.HSet(ctx, st.legacyDlvKey(m), "attempts", 2, "round", 0, "state", "pending",
			"workspace", ws.String(), "kind", KindKeyExpiring, "next_at", strconv.FormatInt(due, 10)).Err(); err != nil {
			t.Fatal(err)
		}
		if err := rdb.ZAdd(ctx, st.legacySchedKey(), redis.Z{Score: float64(due), Member: m}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	for pass, want := range []int{3, 0} {
		if n, err := st.MoveLegacySchedule(ctx); err != nil || n != want {
			t.Fatalf("pass %d: moved %d, %v; want %d", pass, n, err, want)
		}
	}
	if n, err := rdb.Exists(ctx, st.legacySchedKey()).Result(); err != nil || n != 0 {
		t.Fatalf("the legacy schedule is still there (%d, %v)", n, err)
	}
	for _, m := range members { // each moved with its due time, not rescheduled
		if score, err := rdb.ZScore(ctx, st.schedKey(), m).Result(); err != nil || int64(score) != due {
			t.Fatalf("%s: due %v (%v) in the new schedule, want %d", m, score, err, due)
		}
	}
	claims, err := st.ClaimDue(ctx, now, time.Minute, 10)
	if err != nil || len(claims) != 3 {
		t.Fatalf("claimed %d, %v; want the 3 moved deliveries", len(claims), err)
	}
	for _, c := range claims {
		if c.Attempt != 3 || c.Workspace != ws || c.Kind != KindKeyExpiring {
			t.Errorf("claim %+v: want attempt 3 (two made before the move), workspace and kind kept", c)
		}
	}
}
