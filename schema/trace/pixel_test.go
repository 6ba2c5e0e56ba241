package trace

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"

	"svc/lib/svctest"
	"svc/schema/rollups"
)

// TestLagsAcrossAPartitionCountChange: the watermark stays true when partitions are
// added. A member that read the topic's metadata before the change publishes the old
// count after one published the new: the minimum must still cover the new partitions.
// A pixel whose records moved to another partition with the new count keeps its earlier
// records on the old one: its lag must wait for that one too.
func TestLagsAcrossAPartitionCountChange(t *testing.T) {
	rdb := svctest.Redis(t)
	ctx := context.Background()
	db := "trace_test_" + uuid.NewString()[:8]
	t.Cleanup(func() { rdb.Del(context.Background(), rollups.WatermarkKey(db)) })
	var px uuid.UUID // a pixel on partition p of 4 and p+4 of 8
	for px = uuid.New(); Partition(px, 4) == Partition(px, 8); px = uuid.New() {
	}
	old, now := Partition(px, 4), Partition(px, 8)
	t0 := time.Date(2026, 11, 28, 1, 0, 0, 0, time.UTC)
	early, late := t0, t0.Add(time.Minute)
	marks := map[int32]time.Time{}
	for p := int32(0); p < 4; p++ {
		marks[p] = late
	}
	if err := rollups.WatermarkRaise(ctx, rdb, db, "events.v1@test", 4, marks); err != nil {
		t.Fatal(err)
	}
	// Partitions added: the new partitions and the pixel's old one lag behind.
	marks = map[int32]time.Time{}
	for p := int32(4); p < 8; p++ {
		marks[p] = late
	}
	lagging := int32(4) // a new partition that has not caught up, not the pixel's
	if now == lagging {
		lagging = 5
	}
	marks[lagging] = early
	if err := rollups.WatermarkRaise(ctx, rdb, db, "events.v1@test", 8, marks); err != nil {
		t.Fatal(err)
	}
	if err := rdb.HSet(ctx, rollups.WatermarkKey(db), strconv.Itoa(int(old)), early.UnixMilli()).Err(); err != nil {
		t.Fatal(err)
	}
	lags, err := Lags(ctx, rdb, db, []uuid.UUID{px}, late.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	l := lags[px]
	if l.Partition != now || !l.Through.Equal(early) || l.Seconds != 3660 {
		t.Fatalf("lag %+v, want partition %d through %v (its records of before the change wait on partition %d)", l, now, early, old)
	}
	// A member with the metadata of before publishes the old count.
	if err := rollups.WatermarkRaise(ctx, rdb, db, "events.v1@test", 4, map[int32]time.Time{0: late.Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	at, ok, err := rollups.IngestedThrough(ctx, rdb, db)
	if err != nil || !ok || !at.Equal(early) {
		t.Fatalf("ingested through %v (%v, %v), want %v: partition %d has not caught up", at, ok, err, early, lagging)
	}
}

// A topic deleted and made again (another incarnation, fewer partitions) starts the
// published watermark afresh: the earlier incarnation's partition counts and values
// would freeze the minimum on partitions that no longer exist.
func TestWatermarkOfATopicMadeAgain(t *testing.T) {
	rdb := svctest.Redis(t)
	ctx := context.Background()
	db := "trace_test_" + uuid.NewString()[:8]
	t.Cleanup(func() { rdb.Del(context.Background(), rollups.WatermarkKey(db)) })
	t0 := time.Date(2026, 11, 28, 1, 0, 0, 0, time.UTC)
	old := map[int32]time.Time{}
	for p := int32(0); p < 8; p++ {
		old[p] = t0
	}
	if err := rollups.WatermarkRaise(ctx, rdb, db, "events.v1@first", 8, old); err != nil {
		t.Fatal(err)
	}
	later := t0.Add(time.Hour)
	if err := rollups.WatermarkRaise(ctx, rdb, db, "events.v1@second", 4, map[int32]time.Time{0: later, 1: later, 2: later, 3: later}); err != nil {
		t.Fatal(err)
	}
	at, ok, err := rollups.IngestedThrough(ctx, rdb, db)
	if err != nil || !ok || !at.Equal(later) {
		t.Fatalf("ingested through %v (%v, %v), want %v: the new topic's four partitions", at, ok, err, later)
	}
	pub, err := rollups.Watermarks(ctx, rdb, db)
	if err != nil || pub.N != 4 || len(pub.Counts) != 1 {
		t.Fatalf("published %+v (%v), want the new topic's count only", pub, err)
	}
}
