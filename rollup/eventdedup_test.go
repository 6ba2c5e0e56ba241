package rollup

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kgo"

	"svc/lib/svctest"
	"svc/schema"
	"svc/schema/apitest"
)

// idBatch is a batch of pixel pix accepted at received (Unix ms), one purchase of value
// 1 EUR per client event id, in order.
func (e *world) idBatch(pix int, received int64, ids ...string) *schema.Batch {
	b := &schema.Batch{Workspace: e.ws, ReceivedAt: received, RequestID: "req_ids"}
	b.Pixel[0], b.Pixel[1] = 0x50, byte(pix)
	b.Key[0] = 0x4B
	for _, id := range ids {
		b.Events = append(b.Events, schema.Event{ID: schema.ClientEventID([]byte(id)), Name: "purchase",
			OccurredAt: time.Now().Add(-10 * time.Minute).UnixMilli(), Consent: true, HasValue: true, Value: 10000,
			Currency: [3]byte{'E', 'U', 'R'}})
	}
	return b
}

// TestCopiesOfAClientEventIDAreDropped: the first copy of a pixel's client event id is
// stored; a copy in a later batch (with another value), a second copy inside one
// record, and copies up to a second short of the window after the stored one are
// dropped before the INSERT; the same id on another pixel, and a copy accepted exactly
// the window after the stored one, are stored (the latter starting a new window, whose
// copies are dropped again). Rollups and raw table hold exactly the stored events; the
// copies are counted in svc_rollup_duplicate_events_total and kept as rejections (rule
// duplicate_event_id, the rejections table GET /rejections reads). A new group reading
// everything again changes nothing.
func TestCopiesOfAClientEventIDAreDropped(t *testing.T) {
	w := newWorld(t, 2)
	rdb := apitest.Redis(t)
	const window = time.Hour
	t0 := time.Now().Truncate(time.Second).Add(-time.Minute).UnixMilli()
	sec := int64(1000)
	type rec struct {
		b     *schema.Batch
		store []bool // which events the consumer stores
	}
	recs := []rec{
		{w.idBatch(0, t0, "x", "y"), []bool{true, true}},
		{w.idBatch(0, t0+4*sec, "x", "z"), []bool{false, true}},    // x again, 4 s later
		{w.idBatch(0, t0, "w", "w"), []bool{true, false}},          // twice in one record (an edge before issue 27)
		{w.idBatch(1, t0, "x"), []bool{true}},                      // another pixel: another event
		{w.idBatch(0, t0+3599*sec, "x"), []bool{false}},            // a second short of the window
		{w.idBatch(0, t0+3600*sec, "x"), []bool{true}},             // the window after: stored, a new window
		{w.idBatch(0, t0+3601*sec, "x", "y"), []bool{false, true}}, // x within its new window; y (stored at t0) past its own
		{w.idBatch(0, t0+3604*sec, "y", "z"), []bool{false, true}}, // y within its new window; z (stored at t0+4 s) at the end of its own
	}
	recs[1].b.Events[0].Value = 990000 // the copy carries another value: the stored one stays
	// A record whose edge says none of its events carries a client id is not read for
	// them (schema.HeaderClientIDs): its x is stored though it would be a copy.
	said := rec{w.idBatch(0, t0+3605*sec, "x"), []bool{true}}
	recs = append(recs, said)
	var krecs []*kgo.Record
	copies := 0
	for _, r := range recs {
		kept := *r.b
		kept.Events = nil
		for i, ok := range r.store {
			if ok {
				kept.Events = append(kept.Events, r.b.Events[i])
			} else {
				copies++
			}
		}
		w.addAll(&kept)
		kr := record(r.b, int32(r.b.Pixel[1])%2)
		if r.b == said.b {
			kr.Headers = append(kr.Headers, kgo.RecordHeader{Key: schema.HeaderClientIDs, Value: []byte("0")})
		}
		krecs = append(krecs, kr)
	}
	if err := w.prod.ProduceSync(context.Background(), krecs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	cfg := w.config("g-eventids")
	cfg.Redis, cfg.EventIDWindow, cfg.RejectionSamples = rdb, window, 100
	stop := w.start(cfg)
	w.waitExact(20 * time.Second)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if got := metric(t, cfg.Registerer, "svc_rollup_duplicate_events_total"); got != float64(copies) {
		t.Fatalf("svc_rollup_duplicate_events_total %v, want %d", got, copies)
	}
	// Each copy is kept as a rejection (GET /rejections): rule duplicate_event_id.
	var px0 schema.UUID
	px0[0] = 0x50
	q := `SELECT sum(rejections), countIf(field = 'event_id' AND status = 202 AND value = ?) FROM rejections
		WHERE pixel_id = toUUID(?) AND rule = 'duplicate_event_id'`
	var n uint64
	var xs uint64
	deadline := time.Now().Add(20 * time.Second)
	for {
		if err := w.conn.QueryRow(context.Background(), q, fmt.Sprintf("%q", uuid.UUID(schema.ClientEventID([]byte("x")))),
			uuid.UUID(px0).String()).Scan(&n, &xs); err != nil {
			t.Fatal(err)
		}
		if n >= uint64(copies) || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if n != uint64(copies) || xs != 3 {
		t.Fatalf("rejections of rule duplicate_event_id: %d (of them x: %d); want %d (x: 3)", n, xs, copies)
	}
	cfg2 := w.config("g-eventids-2")
	cfg2.Redis, cfg2.EventIDWindow = rdb, window
	stop2 := w.start(cfg2)
	time.Sleep(2 * time.Second)
	w.waitExact(10 * time.Second)
	if err := stop2(); err != nil {
		t.Fatal(err)
	}
}

// TestEventIDCopiesExactThroughKillsAndRebalances: batches that repeat client event ids
// (within and across records, on every partition) are stored exactly once per pixel and
// id while the consumer is killed after its claims and before its INSERT (its records
// claimed but not stored: the next reader must store them, not take them for copies),
// and while members join and leave; and the rejections table counts each copy left out
// once (the killed consumer had produced their record; the next reader produces it again).
func TestEventIDCopiesExactThroughKillsAndRebalances(t *testing.T) {
	w := newWorld(t, 4)
	w.copies = true
	rdb := apitest.Redis(t)
	w.produce(300)
	cfg := w.config("g-eventid-kill")
	cfg.Redis = rdb
	var killed func() bool
	cfg.testBeforeInsert, killed = killOn(2, "killed mid-flush")
	stop := w.start(cfg)
	svctest.WaitFor(t, 20*time.Second, "the second flush", killed)
	stopKilled(t, stop)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			w.produce(10)
			time.Sleep(20 * time.Millisecond)
		}
	}()
	member := func() func() error {
		c := w.config("g-eventid-kill")
		c.Redis = rdb
		return w.start(c)
	}
	a := member()
	time.Sleep(time.Second)
	b := member()
	time.Sleep(1500 * time.Millisecond)
	if err := a(); err != nil {
		t.Fatalf("stop a: %v", err)
	}
	c := member()
	time.Sleep(time.Second)
	cancel()
	wg.Wait()
	w.waitExact(30 * time.Second)
	w.waitCopyRejections(30 * time.Second)
	for _, stop := range []func() error{b, c} {
		if err := stop(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestEventIDCopiesExactAfterAKillBetweenInsertAndCommit: a consumer killed after its
// third INSERT, before that commit, while batches trickle in. The next reader starts
// after the committed records, so it knows their claims only from the logs the flushes
// wrote; the killed flush's records come again, are skipped as stored and claimed
// again. Later copies of every stored id are dropped, not stored a second time (without
// the flushes' logs, 339 and 95 events were stored twice in two runs).
func TestEventIDCopiesExactAfterAKillBetweenInsertAndCommit(t *testing.T) {
	w := newWorld(t, 4)
	w.copies = true
	rdb := apitest.Redis(t)
	cfg := w.config("g-eventid-insert-kill")
	cfg.Redis = rdb
	var killed func() bool
	cfg.testAfterInsert, killed = killOn(3, "killed after the INSERT")
	stop := w.start(cfg)
	// Batches trickle in, so that each flush stores ids first seen since the one before
	// (all at once, the first poll would decide, and its flush log, every claim).
	svctest.WaitFor(t, 20*time.Second, "the third INSERT", func() bool {
		w.produce(5)
		return killed()
	})
	stopKilled(t, stop)
	w.produce(200) // copies of the stored records' ids among them
	cfg2 := w.config("g-eventid-insert-kill")
	cfg2.Redis = rdb
	stop2 := w.start(cfg2)
	w.waitExact(30 * time.Second)
	w.waitCopyRejections(30 * time.Second)
	if err := stop2(); err != nil {
		t.Fatal(err)
	}
	if metric(t, cfg2.Registerer, "svc_rollup_skipped_records_total") == 0 {
		t.Error("the next consumer skipped nothing: the kill did not leave an uncommitted insert")
	}
}
