package privacy_test

import (
	"context"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"svc/schema/apitest"
	"svc/schema/erasure"
)

// TestFenceSeesEitherSide: an INSERT registered before a hold is in the hold's list of
// INSERTs to wait for; one registered after sees the hold; End removes it; a lapsed
// hold is not extended.
func TestFenceSeesEitherSide(t *testing.T) {
	rdb := apitest.Redis(t)
	ctx := context.Background()
	db := "fence_" + uuid.NewString()[:8]
	f := erasure.NewFence(rdb, db)
	t.Cleanup(func() { rdb.Del(ctx, "svc:privacy:{"+db+"}:flushes", "svc:privacy:{"+db+"}:holds") })
	px := uuid.New()
	if v, err := f.Begin(ctx, "svc-rollup-before", nil, time.Minute); err != nil || len(v.Held) != 0 {
		t.Fatalf("begin before the hold: %v %v", v, err)
	}
	active, err := f.Hold(ctx, []uuid.UUID{px}, time.Minute)
	if err != nil || !slices.Contains(active, "svc-rollup-before") {
		t.Fatalf("the hold does not list the INSERT registered before it: %v %v", active, err)
	}
	v, err := f.Begin(ctx, "svc-rollup-after", nil, time.Minute)
	if err != nil || !v.Held[px] {
		t.Fatalf("an INSERT registered after the hold does not see it: %v %v", v, err)
	}
	if err := f.End(ctx, "svc-rollup-before", "svc-rollup-after"); err != nil {
		t.Fatal(err)
	}
	if active, err := f.Active(ctx); err != nil || len(active) != 0 {
		t.Fatalf("ended INSERTs still active: %v %v", active, err)
	}
	if ok, err := f.Extend(ctx, []uuid.UUID{px}, time.Minute); err != nil || !ok {
		t.Fatalf("extend a live hold: %v %v", ok, err)
	}
	f.Now = func() time.Time { return time.Now().Add(2 * time.Minute) } // the hold has lapsed
	if ok, err := f.Extend(ctx, []uuid.UUID{px}, time.Minute); err != nil || ok {
		t.Fatalf("a lapsed hold was extended: %v %v", ok, err)
	}
	if v, err := f.Begin(ctx, "svc-rollup-late", nil, time.Minute); err != nil || len(v.Held) != 0 {
		t.Fatalf("a lapsed hold still holds: %v %v", v, err)
	}
}

// TestLaterStageWins: a write of an earlier stage after a later one (a retried request,
// a late worker) never hides the later stage.
func TestLaterStageWins(t *testing.T) {
	w := newWorld(t)
	e := w.request(uuid.New(), false, "a@example.com", false, time.Now().Add(-time.Minute))
	e.Stage = erasure.StageErased
	if err := erasure.Write(context.Background(), w.conn, time.Now(), e); err != nil {
		t.Fatal(err)
	}
	e.Stage = erasure.StagePending
	if err := erasure.Write(context.Background(), w.conn, time.Now().Add(time.Hour), e); err != nil {
		t.Fatal(err)
	}
	if got := w.get(e); got.Stage != erasure.StageErased || got.Status() != erasure.StatusRunning {
		t.Fatalf("stage %s after a late pending write, want erased", got.Stage)
	}
}

// sentHook records the commands a client sends, one entry per round trip (a pipeline's
// commands together).
type sentHook struct {
	mu   sync.Mutex
	sent [][]string
}

func (h *sentHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *sentHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.add([]redis.Cmder{cmd})
		return next(ctx, cmd)
	}
}

func (h *sentHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.add(cmds)
		return next(ctx, cmds)
	}
}

func (h *sentHook) add(cmds []redis.Cmder) {
	var names []string
	for _, c := range cmds {
		names = append(names, c.Name())
	}
	h.mu.Lock()
	h.sent = append(h.sent, names)
	h.mu.Unlock()
}

// Begin's registration is acknowledged before it reads the identities' generation: the
// two keys are on different slots, which a Redis Cluster pipeline may send to two
// masters at once, so the read must not share a round trip with the write.
func TestFenceBeginWritesBeforeItReads(t *testing.T) {
	rdb := apitest.Redis(t)
	h := &sentHook{}
	rdb.AddHook(h)
	db := "fence_" + uuid.NewString()[:8]
	t.Cleanup(func() { rdb.Del(context.Background(), "svc:privacy:{"+db+"}:flushes") })
	if _, err := erasure.NewFence(rdb, db).Begin(context.Background(), "svc-rollup-order", nil, time.Minute); err != nil {
		t.Fatal(err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	wrote, read := -1, -1
	for i, trip := range h.sent {
		if slices.Contains(trip, "zadd") {
			wrote = i
		}
		if slices.Contains(trip, "get") {
			if wrote < 0 || wrote == i {
				t.Fatalf("round trips %v: the generation is read with or before the registration", h.sent)
			}
			read = i
		}
	}
	if wrote < 0 || read < 0 {
		t.Fatalf("round trips %v: want the registration (zadd), then the generation's read (get)", h.sent)
	}
}

// TestFenceKeepsTheSlicesOfUnsureInserts: an INSERT's slices stay after it ends unsure
// or its registration lapses, and only then are listed for the repair; a successful End
// and Repaired forget them; a live registration is never listed. The pixels of an INSERT
// ended unsure count as held (HoldState: the watermark is withheld) until no unrepaired
// INSERT has a slice of them.
func TestFenceKeepsTheSlicesOfUnsureInserts(t *testing.T) {
	rdb := apitest.Redis(t)
	ctx := context.Background()
	db := "fence_" + uuid.NewString()[:8]
	p := "svc:privacy:{" + db + "}:"
	t.Cleanup(func() { rdb.Del(ctx, p+"flushes", p+"inserts", p+"repairs") })
	f := erasure.NewFence(rdb, db)
	day := time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC)
	sl := func(sandbox bool, d int) erasure.Slice {
		return erasure.Slice{Workspace: uuid.New(), Sandbox: sandbox, PixelDay: erasure.PixelDay{Pixel: uuid.New(), Date: day.AddDate(0, 0, d)}}
	}
	ok, failed, lapsed, live := []erasure.Slice{sl(false, 0)}, []erasure.Slice{sl(true, -1), sl(false, -400)}, []erasure.Slice{sl(false, 0)}, []erasure.Slice{sl(false, 0)}
	live = append(live, erasure.Slice{Workspace: failed[0].Workspace, Sandbox: true, PixelDay: erasure.PixelDay{Pixel: failed[0].Pixel, Date: day}})
	for id, ss := range map[string][]erasure.Slice{"ok": ok, "failed": failed, "live": live} {
		if _, err := f.Begin(ctx, id, ss, time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.Begin(ctx, "lapsed", lapsed, -time.Second); err != nil { // its consumer died
		t.Fatal(err)
	}
	if err := f.End(ctx, "ok"); err != nil {
		t.Fatal(err)
	}
	if err := f.EndUnsure(ctx, "failed"); err != nil {
		t.Fatal(err)
	}
	got, err := f.Unsure(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]erasure.Slice{"failed": failed, "lapsed": lapsed}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("unsure inserts %v, want %v", got, want)
	}
	if open, err := f.OpenNow(ctx); err != nil || !reflect.DeepEqual(open, []string{"failed", "lapsed", "live"}) {
		t.Fatalf("open inserts %v (%v), want failed, lapsed and live", open, err)
	}
	heldNow := func(px uuid.UUID) bool {
		t.Helper()
		held, _, err := f.HoldState(ctx, px)
		if err != nil {
			t.Fatal(err)
		}
		return held
	}
	if !heldNow(failed[0].Pixel) || !heldNow(failed[1].Pixel) || heldNow(ok[0].Pixel) {
		t.Fatal("want the pixels of the INSERT ended unsure held, and only those")
	}
	if err := f.Repaired(ctx, "failed", "lapsed"); err != nil {
		t.Fatal(err)
	}
	if got, err := f.Unsure(ctx); err != nil || len(got) != 0 {
		t.Fatalf("after the repair: %v %v", got, err)
	}
	if heldNow(failed[0].Pixel) || heldNow(failed[1].Pixel) {
		t.Fatal("the repaired INSERT's pixels are still held")
	}
	// Two unsure INSERTs share a pixel: repairing one leaves it held.
	if err := f.EndUnsure(ctx, "live"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Begin(ctx, "again", []erasure.Slice{failed[0]}, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := f.EndUnsure(ctx, "again"); err != nil {
		t.Fatal(err)
	}
	if got, err := f.Unsure(ctx); err != nil || !reflect.DeepEqual(got, map[string][]erasure.Slice{"live": live, "again": {failed[0]}}) {
		t.Fatalf("after two INSERTs ended unsure: %v %v", got, err)
	}
	if err := f.Repaired(ctx, "live"); err != nil {
		t.Fatal(err)
	}
	if heldNow(live[0].Pixel) || !heldNow(failed[0].Pixel) {
		t.Fatal("want only the pixel of the INSERT still unrepaired held")
	}
}
