package rollup

import (
	"context"
	"crypto/sha256"
	"reflect"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"svc/schema"
	"svc/schema/apitest"
	"svc/schema/erasure"
	"svc/schema/rollups"
)

// oneEvent is a batch of one consented event of person at pixel px, received at recv.
func oneEvent(ws schema.UUID, px byte, person string, recv time.Time) *schema.Batch {
	b := &schema.Batch{Workspace: ws, ReceivedAt: recv.UnixMilli(), RequestID: "req_erase"}
	b.Pixel[0], b.Pixel[1] = 0x50, px
	ev := schema.Event{Name: "purchase", OccurredAt: recv.UnixMilli(), Consent: true, HasEmail: true,
		EmailSHA: sha256.Sum256([]byte(person))}
	ev.ID = schema.UUID(uuid.New())
	b.Events = []schema.Event{ev}
	return b
}

// TestConsumerClearsErasedIdentitiesInFlight: an identity erased while its events are
// still in Kafka loses the identity in the rows the consumer inserts when the event was
// received up to the request; a later event keeps it; another person is untouched.
func TestConsumerClearsErasedIdentitiesInFlight(t *testing.T) {
	w := newWorld(t, 1)
	rdb := apitest.Redis(t)
	cfg := w.config("erase-inflight")
	cfg.Redis = rdb
	at := time.Now().Add(-time.Minute).Truncate(time.Second)
	id := erasure.Identity{Workspace: uuid.UUID(w.ws), Email: sha256.Sum256([]byte("gone@example.com")), RequestedAt: at.Unix()}
	if err := erasure.NewRegistry(rdb).Register(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		rdb.HDel(context.Background(), "svc:privacy:{ids}", uuid.UUID(w.ws).String()+":"+hexDigest(id.Email))
	})
	rs := []*schema.Batch{
		oneEvent(w.ws, 1, "gone@example.com", at.Add(-time.Second)), // in flight at the request
		oneEvent(w.ws, 1, "gone@example.com", at),                   // same second: in scope
		oneEvent(w.ws, 1, "gone@example.com", at.Add(time.Second)),  // after: kept
		oneEvent(w.ws, 1, "stays@example.com", at.Add(-time.Second)),
	}
	for _, b := range rs {
		if err := w.prod.ProduceSync(context.Background(), record(b, 0)).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	w.start(cfg)
	waitCount(t, w, "SELECT count() FROM events", 4)
	if n := count(t, w, "SELECT count() FROM events WHERE has_email = 1 AND email_sha256 = unhex(?)", hexDigest(id.Email)); n != 1 {
		t.Fatalf("%d rows carry the erased identity, want 1 (the event received after the request)", n)
	}
	if n := count(t, w, "SELECT count() FROM events WHERE has_email = 1"); n != 2 {
		t.Fatalf("%d rows carry an identity, want 2", n)
	}
}

// TestConsumerWaitsForHeldPixels: while a pixel is held for a rollup rebuild the
// consumer inserts none of its rows (nor anything of the same flush), and inserts them
// once the hold is released; a registration the worker saw is drained.
func TestConsumerWaitsForHeldPixels(t *testing.T) {
	w := newWorld(t, 1)
	rdb := apitest.Redis(t)
	cfg := w.config("erase-held")
	cfg.Redis = rdb
	fence := erasure.NewFence(rdb, w.ch.Database)
	var held uuid.UUID
	held[0], held[1] = 0x50, 7
	active, err := fence.Hold(context.Background(), []uuid.UUID{held}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if len(active) != 0 {
		t.Fatalf("registered inserts in a fresh database: %v", active)
	}
	w.start(cfg)
	now := time.Now()
	for _, b := range []*schema.Batch{oneEvent(w.ws, 7, "a@example.com", now), oneEvent(w.ws, 8, "b@example.com", now)} {
		if err := w.prod.ProduceSync(context.Background(), record(b, 0)).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	reg := cfg.Registerer.(*prometheus.Registry)
	for deadline := time.Now().Add(20 * time.Second); metric(t, reg, "svc_rollup_held_flushes_total") < 2; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the consumer never found its flush held")
		}
	}
	if n := count(t, w, "SELECT count() FROM events"); n != 0 {
		t.Fatalf("%d rows inserted while their flush held a held pixel", n)
	}
	if err := fence.Release(context.Background(), []uuid.UUID{held}); err != nil {
		t.Fatal(err)
	}
	waitCount(t, w, "SELECT count() FROM events", 2)
	// The consumer deregisters an INSERT right after it returns: give it a moment.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		active, err := fence.Active(context.Background())
		if err == nil && len(active) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("registrations left 5 s after the inserts: %v %v", active, err)
		}
	}
}

// fencedWorld is a world of one partition whose consumers use Redis (so the privacy
// fence), its fence, and the fence's and the watermark's keys removed at the end.
func fencedWorld(t *testing.T, group string) (*world, Config, *erasure.Fence) {
	w := newWorld(t, 1)
	rdb := apitest.Redis(t)
	cfg := w.config(group)
	cfg.Redis = rdb
	db := w.ch.Database
	t.Cleanup(func() {
		p := "svc:privacy:{" + db + "}:"
		rdb.Del(context.Background(), p+"flushes", p+"inserts", p+"repairs", rollups.WatermarkKey(db))
	})
	return w, cfg, erasure.NewFence(rdb, db)
}

// TestOnlyAnInsertThatSentRowsIsLeftForTheRepair: an INSERT refused before any row was
// sent (the table is away) ends its registration as any other, leaving nothing to
// repair; one whose events part was written before a view failed ends unsure: its
// pixel-day is left for the privacy worker's repair, and the pixel counts as held
// (the watermark is withheld) until then.
func TestOnlyAnInsertThatSentRowsIsLeftForTheRepair(t *testing.T) {
	w, cfg, fence := fencedWorld(t, "erase-unsure")
	ctx, db := context.Background(), w.ch.Database
	exec := func(q string) {
		t.Helper()
		if err := w.conn.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	produce := func(b *schema.Batch) {
		t.Helper()
		if err := w.prod.ProduceSync(ctx, record(b, 0)).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	reg := cfg.Registerer.(*prometheus.Registry)
	waitCounter := func(name string, want float64) {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); metric(t, reg, name) < want; time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s stayed below %v", name, want)
			}
		}
	}
	now := time.Now().Add(-time.Minute)

	w.start(cfg)
	produce(oneEvent(w.ws, 1, "a@example.com", now))
	waitCount(t, w, "SELECT count() FROM events", 1)
	exec("RENAME TABLE " + db + ".events TO " + db + ".events_away")
	produce(oneEvent(w.ws, 1, "a@example.com", now))
	waitCounter("svc_rollup_insert_errors_total", 1)
	exec("RENAME TABLE " + db + ".events_away TO " + db + ".events")
	waitCount(t, w, "SELECT count() FROM events", 2)
	if u, err := fence.Unsure(ctx); err != nil || len(u) != 0 {
		t.Fatalf("an INSERT that sent no row was left for a repair: %v %v", u, err)
	}

	exec("CREATE MATERIALIZED VIEW " + db + ".aaa_fail_mv ENGINE = Memory AS SELECT throwIf(value = 666) AS failed FROM " + db + ".events")
	b := oneEvent(w.ws, 2, "b@example.com", now)
	b.Events[0].HasValue, b.Events[0].Value = true, 666_0000
	produce(b)
	waitCount(t, w, "SELECT count() FROM events", 3)
	waitCounter("svc_rollup_unsure_inserts_total", 1)
	exec("DROP TABLE " + db + ".aaa_fail_mv")
	u, err := fence.Unsure(ctx)
	if err != nil || len(u) != 1 {
		t.Fatalf("want the failed INSERT left for the repair: %v %v", u, err)
	}
	px := uuid.UUID(b.Pixel)
	want := []erasure.Slice{{Workspace: uuid.UUID(w.ws), PixelDay: erasure.PixelDay{Pixel: px, Date: now.UTC().Truncate(24 * time.Hour)}}}
	for _, ss := range u {
		if !reflect.DeepEqual(ss, want) {
			t.Fatalf("its slices %v, want %v", ss, want)
		}
	}
	if held, _, err := fence.HoldState(ctx, px); err != nil || !held {
		t.Fatalf("the pixel of the INSERT ended unsure is not held: %v %v", held, err)
	}
	if got := metric(t, reg, "svc_rollup_unsure_inserts_total"); got != 1 {
		t.Fatalf("%v INSERTs ended unsure, want 1", got)
	}
}

func hexDigest(d [32]byte) string {
	const digits = "0123456789abcdef"
	out := make([]byte, 64)
	for i, c := range d {
		out[2*i], out[2*i+1] = digits[c>>4], digits[c&15]
	}
	return string(out)
}

func count(t *testing.T, w *world, q string, args ...any) uint64 {
	t.Helper()
	var n uint64
	if err := w.conn.QueryRow(context.Background(), q, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func waitCount(t *testing.T, w *world, q string, want uint64) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		n := count(t, w, q)
		if n == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d, want %d", q, n, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestWatermarkWaitsForAnInsertLeftOpen: a consumer that gets partitions publishes no
// watermark while an INSERT registered before (a previous owner's, killed as its INSERT
// was cut between its parts) may have left the rollups short: not while it is within
// its lease, not once it lapsed, only once the privacy worker repaired it.
func TestWatermarkWaitsForAnInsertLeftOpen(t *testing.T) {
	w, cfg, fence := fencedWorld(t, "wm-gate")
	rdb, ctx, db := cfg.Redis, context.Background(), w.ch.Database
	now := time.Now().Add(-time.Minute)
	b := oneEvent(w.ws, 3, "c@example.com", now)
	dead := []erasure.Slice{{Workspace: uuid.UUID(w.ws), PixelDay: erasure.PixelDay{Pixel: uuid.UUID(b.Pixel), Date: now.UTC().Truncate(24 * time.Hour)}}}
	lapses := time.Now().Add(2 * time.Second)
	if _, err := fence.Begin(ctx, "svc-rollup-dead-owner", dead, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := w.prod.ProduceSync(ctx, record(b, 0)).FirstErr(); err != nil {
		t.Fatal(err)
	}
	w.start(cfg)
	waitCount(t, w, "SELECT count() FROM events", 1)
	published := func() bool {
		t.Helper()
		_, ok, err := rollups.IngestedThrough(ctx, rdb, db)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	for until := lapses.Add(1500 * time.Millisecond); time.Now().Before(until); time.Sleep(50 * time.Millisecond) {
		if published() {
			t.Fatalf("a watermark was published %v before the open INSERT's lease ended (negative: after)", time.Until(lapses).Round(time.Millisecond))
		}
	}
	if err := fence.Repaired(ctx, "svc-rollup-dead-owner"); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); !published(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no watermark 10 s after the repair")
		}
	}
}
