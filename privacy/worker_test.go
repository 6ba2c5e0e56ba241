package privacy_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"svc/lib/svctest"
	"svc/schema/erasure"
	"svc/schema/workspace"
)

// TestErasureRemovesOnePersonOnly: three people's events over two pixels and three
// days; erasing one clears every stored event of that hash in the workspace, drops
// unique_people by exactly one on each day the person was counted and nowhere else,
// leaves events and value unchanged, and leaves another workspace's identical hash
// alone. The record lists the rebuilt days and counts; the announcement fires once.
func TestErasureRemovesOnePersonOnly(t *testing.T) {
	w := newWorld(t)
	wsA, wsB := uuid.New(), uuid.New()
	px1, px2, pxB := uuid.New(), uuid.New(), uuid.New()
	today := time.Now().UTC().Truncate(24 * time.Hour)
	d0, d1, d2 := today.AddDate(0, 0, -2), today.AddDate(0, 0, -1), today
	recv := time.Now().Add(-time.Minute)
	var evs []ev
	for i, d := range []time.Time{d0, d1, d2} {
		for _, p := range []string{"ada@example.com", "bob@example.com", "cy@example.com"} {
			px := px1
			if p == "cy@example.com" || i == 2 {
				px = px2
			}
			evs = append(evs, ev{ws: wsA, pixel: px, day: d, name: "purchase", value: 100000, consent: true, email: p, received: recv})
		}
	}
	// Ada on d1 also without consent (no identity kept) and twice on px1 d0.
	evs = append(evs, ev{ws: wsA, pixel: px1, day: d1, name: "purchase", value: 5, consent: false, email: "ada@example.com", received: recv},
		ev{ws: wsA, pixel: px1, day: d0, name: "lead", value: 7, consent: true, email: "ada@example.com", received: recv})
	// The same person in workspace B.
	evs = append(evs, ev{ws: wsB, pixel: pxB, day: d1, name: "purchase", value: 1, consent: true, email: "ada@example.com", received: recv})
	w.store(evs...)

	beforeA1, beforeA2, beforeB := w.rollups(wsA, px1, false), w.rollups(wsA, px2, false), w.rollups(wsB, pxB, false)
	totalA := w.count("SELECT count() FROM events WHERE workspace_id = toUUID(?)", wsA.String())
	e := w.request(wsA, false, "ada@example.com", false, time.Now())
	w.runOnce()

	if n := w.withHash(wsA, "ada@example.com"); n != 0 {
		t.Fatalf("%d events of workspace A still carry the erased hash", n)
	}
	if n := w.withHash(wsB, "ada@example.com"); n != 1 {
		t.Fatalf("workspace B's event lost its identity too (%d left, want 1)", n)
	}
	if n := w.count("SELECT count() FROM events WHERE workspace_id = toUUID(?)", wsA.String()); n != totalA {
		t.Fatalf("events of A: %d, want %d (erasure must keep the events)", n, totalA)
	}
	for name, pair := range map[string][2]map[string]day{"px1": {beforeA1, w.rollups(wsA, px1, false)}, "px2": {beforeA2, w.rollups(wsA, px2, false)}} {
		before, after := pair[0], pair[1]
		if len(before) != len(after) {
			t.Fatalf("%s: %d rollup rows after, %d before", name, len(after), len(before))
		}
		for k, b := range before {
			a := after[k]
			want := b.people
			if adaCounted(k, name, d0, d1, d2) {
				want--
			}
			if a.events != b.events || a.value != b.value || a.consented != b.consented || a.people != want {
				t.Errorf("%s %s: after %+v, before %+v, want unique_people %d", name, k, a, b, want)
			}
		}
	}
	if after := w.rollups(wsB, pxB, false); len(after) != 1 || after[d1.Format("2006-01-02")+"|purchase"] != beforeB[d1.Format("2006-01-02")+"|purchase"] {
		t.Fatalf("workspace B's rollups changed: %+v → %+v", beforeB, after)
	}
	got := w.get(e)
	v := got.View()
	if v.Status != "completed" || *v.EventsAffected != 4 || *v.EventsRemaining != 0 || len(v.DaysRecomputed) != 3 || v.CompletedAt == nil {
		t.Fatalf("record: %+v", v)
	}
	if len(w.done) != 1 || w.done[0].ID != e.ID {
		t.Fatalf("announced %d erasures, want exactly this one", len(w.done))
	}
	w.runOnce() // nothing left to do: no second announcement
	if len(w.done) != 1 {
		t.Fatalf("announced again on an idle run")
	}
}

// adaCounted reports whether Ada was among the unique people of rollup row k of pixel
// px (per the fixture above): px1 on d0 (purchase and lead) and d1 (purchase), px2 on d2.
func adaCounted(k, px string, d0, d1, d2 time.Time) bool {
	switch px {
	case "px1":
		return k == d0.Format("2006-01-02")+"|purchase" || k == d0.Format("2006-01-02")+"|lead" || k == d1.Format("2006-01-02")+"|purchase"
	default:
		return k == d2.Format("2006-01-02")+"|purchase"
	}
}

// TestErasureScopeFollowsRequestTime: without suppression only events received up to
// the request lose the identity (a later event of the person is new data); with
// suppression every one does. A sandbox erasure touches only sandbox rows.
func TestErasureScopeFollowsRequestTime(t *testing.T) {
	w := newWorld(t)
	ws, px := uuid.New(), uuid.New()
	today := time.Now().UTC().Truncate(24 * time.Hour)
	at := time.Now().UTC().Truncate(time.Second).Add(-time.Hour)
	w.store(
		ev{ws: ws, pixel: px, day: today, name: "a", consent: true, email: "x@example.com", received: at.Add(-time.Second)},
		ev{ws: ws, pixel: px, day: today, name: "b", consent: true, email: "x@example.com", received: at},
		ev{ws: ws, pixel: px, day: today, name: "c", consent: true, email: "x@example.com", received: at.Add(time.Second)},
		ev{ws: ws, pixel: px, day: today, name: "d", consent: true, email: "y@example.com", received: at.Add(time.Second)},
		ev{ws: ws, pixel: px, sandbox: true, day: today, name: "s", consent: true, email: "y@example.com", received: at},
		ev{ws: ws, pixel: px, day: today, name: "e", consent: true, email: "z@example.com", received: at.Add(-time.Hour - time.Second)},
		ev{ws: ws, pixel: px, day: today, name: "f", consent: true, email: "z@example.com", received: at.Add(-time.Hour + time.Second)},
	)
	// x and z in one batch, each with its own request time.
	w.request(ws, false, "x@example.com", false, at)
	w.request(ws, false, "z@example.com", false, at.Add(-time.Hour))
	w.runOnce()
	if n := w.count("SELECT count() FROM events WHERE has_email = 1 AND event_name = 'e'"); n != 0 {
		t.Fatalf("z's event received before z's request kept the identity")
	}
	if n := w.count("SELECT count() FROM events WHERE has_email = 1 AND event_name = 'f'"); n != 1 {
		t.Fatalf("z's event received after z's request (but before x's) lost the identity")
	}
	if n := w.count("SELECT count() FROM events WHERE has_email = 1 AND event_name IN ('a', 'b')"); n != 0 {
		t.Fatalf("%d events received up to the request kept the identity", n)
	}
	if n := w.count("SELECT count() FROM events WHERE has_email = 1 AND event_name = 'c'"); n != 1 {
		t.Fatalf("the event received after the request lost its identity without suppression")
	}
	w.request(ws, false, "y@example.com", true, at.Add(-time.Hour))
	w.runOnce()
	if n := w.count("SELECT count() FROM events WHERE has_email = 1 AND event_name = 'd'"); n != 0 {
		t.Fatalf("a suppressing erasure left a later event's identity")
	}
	if n := w.count("SELECT count() FROM events WHERE has_email = 1 AND event_name = 's'"); n != 1 {
		t.Fatalf("a live erasure touched a sandbox row")
	}
	if people := w.rollups(ws, px, false)[today.Format("2006-01-02")+"|c"].people; people != 1 {
		t.Fatalf("unique_people of c: %d, want 1", people)
	}
}

// TestRetentionRemovesOldRowsOnly: a workspace with a 10-day retention loses the raw
// events of days before the cutoff and keeps the rest; a workspace without retention
// keeps everything; rollups keep every day.
func TestRetentionRemovesOldRowsOnly(t *testing.T) {
	w := newWorld(t)
	kept, limited := uuid.New(), uuid.New()
	if err := workspace.NewRetention(w.rdb).Set(context.Background(), limited, 10); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = workspace.NewRetention(w.rdb).Set(context.Background(), limited, 0) })
	if err := workspace.NewRetention(w.rdb).Set(context.Background(), kept, 3); err == nil {
		t.Fatal("a 3-day retention was accepted (days must be final before they go)")
	}
	px1, px2 := uuid.New(), uuid.New()
	now := time.Now().UTC()
	cutoff := workspace.RetentionCutoff(now, 10)
	var evs []ev
	for _, age := range []int{30, 12, 11, 10, 9, 1} {
		d := now.Truncate(24*time.Hour).AddDate(0, 0, -age)
		evs = append(evs, ev{ws: limited, pixel: px1, day: d, name: "purchase", value: 10000, consent: true, email: "a@example.com", received: now},
			ev{ws: kept, pixel: px2, day: d, name: "purchase", value: 10000, consent: true, email: "a@example.com", received: now})
	}
	w.store(evs...)
	before1, before2 := w.rollups(limited, px1, false), w.rollups(kept, px2, false)
	n, err := w.worker.ApplyRetention(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if n != 3 { // ages 30, 12, 11: before today-10
		t.Fatalf("removed %d rows, want 3", n)
	}
	if old := w.count("SELECT count() FROM events WHERE workspace_id = toUUID(?) AND event_date < toDate(?)", limited.String(), cutoff.Format("2006-01-02")); old != 0 {
		t.Fatalf("%d rows before the cutoff remain", old)
	}
	if left := w.count("SELECT count() FROM events WHERE workspace_id = toUUID(?)", limited.String()); left != 3 {
		t.Fatalf("%d rows of the limited workspace left, want 3 (ages 10, 9, 1)", left)
	}
	if all := w.count("SELECT count() FROM events WHERE workspace_id = toUUID(?)", kept.String()); all != 6 {
		t.Fatalf("the workspace without retention has %d rows, want 6", all)
	}
	if after := w.rollups(limited, px1, false); len(after) != 6 || after[cutoff.AddDate(0, 0, -20).Format("2006-01-02")+"|purchase"] != before1[cutoff.AddDate(0, 0, -20).Format("2006-01-02")+"|purchase"] {
		t.Fatalf("rollups changed by retention: %+v → %+v", before1, after)
	}
	if after := w.rollups(kept, px2, false); len(after) != len(before2) {
		t.Fatalf("rollups of the other workspace changed")
	}
}

// TestResumeRebuildsRecordedDays: a worker that died after erasing the stored events
// but before rebuilding the rollups left the erasure planned, with its days recorded;
// the next run finds nothing left to erase yet rebuilds those days, and an announcement
// that failed is retried by the run after.
func TestResumeRebuildsRecordedDays(t *testing.T) {
	w := newWorld(t)
	ws, px := uuid.New(), uuid.New()
	today := time.Now().UTC().Truncate(24 * time.Hour)
	recv := time.Now().Add(-time.Minute)
	w.store(ev{ws: ws, pixel: px, day: today, name: "purchase", consent: true, email: "gone@example.com", received: recv},
		ev{ws: ws, pixel: px, day: today, name: "purchase", consent: true, email: "stays@example.com", received: recv})
	e := w.request(ws, false, "gone@example.com", false, time.Now())
	// The dead worker's work: planned (days recorded), then the mutation.
	e.Stage, e.EventsAffected, e.StartedAt = erasure.StagePlanned, 1, time.Now().UTC().Truncate(time.Second)
	e.Days = []erasure.PixelDay{{Pixel: px, Date: today}}
	if err := erasure.Write(context.Background(), w.conn, time.Now(), e); err != nil {
		t.Fatal(err)
	}
	if err := w.conn.Exec(context.Background(), "ALTER TABLE events UPDATE has_email = 0, email_sha256 = toFixedString('', 32) WHERE workspace_id = toUUID(?) AND email_sha256 = unhex(?)",
		ws.String(), hexOf(email("gone@example.com"))); err != nil {
		t.Fatal(err)
	}
	svctest.WaitFor(t, 20*time.Second, "the mutation applied", func() bool { return w.withHash(ws, "gone@example.com") == 0 })
	if p := w.rollups(ws, px, false)[today.Format("2006-01-02")+"|purchase"].people; p != 2 {
		t.Fatalf("before the resumed run unique_people is %d, want 2 (the view never saw the mutation)", p)
	}
	fail := true
	w.worker.Completed = func(_ context.Context, got *erasure.Erasure) error {
		if fail {
			fail = false
			return context.DeadlineExceeded
		}
		w.done = append(w.done, got)
		return nil
	}
	if err := w.worker.RunOnce(context.Background()); err == nil {
		t.Fatal("a failed announcement did not fail the run")
	}
	if got := w.get(e); got.Stage != erasure.StageRecomputed || got.LastError == "" {
		t.Fatalf("after a failed announcement: stage %s, last error %q", got.Stage, got.LastError)
	}
	if p := w.rollups(ws, px, false)[today.Format("2006-01-02")+"|purchase"].people; p != 1 {
		t.Fatalf("the recorded day was not rebuilt: unique_people %d, want 1", p)
	}
	w.runOnce()
	got := w.get(e)
	if got.Stage != erasure.StageCompleted || got.EventsAffected != 1 || len(got.Days) != 1 || len(w.done) != 1 || got.LastError != "" {
		t.Fatalf("resumed erasure: %+v, announced %d", got.View(), len(w.done))
	}
}
