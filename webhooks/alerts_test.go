package webhooks

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	json "github.com/goccy/go-json"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"svc/ingest"
	"svc/lib/chpool"
	"svc/lib/kafkabroker"
	"svc/lib/svctest"
	"svc/rollup"
	"svc/schema"
	"svc/schema/apitest"
	"svc/schema/rejection"
	"svc/schema/rollups"
	"svc/schema/workspace"
)

// alertWorld is the whole pipeline for the alerts: the edge over an embedded Kafka,
// the consumer groups (events and rejections) writing the test's ClickHouse database,
// the webhooks role's triggers and worker on the test's clock, and a receiver that
// verifies every signature independently.
type alertWorld struct {
	e   *testEnv
	srv *apitest.Server
	tn  apitest.Tenant
	rcv *receiver
	tr  *Triggers
	// start is the minute the world began in: every event the test sends is received
	// from it on.
	start time.Time
}

func newAlertWorld(t *testing.T, a workspace.Alerts, opts ...func(*rollup.Config, *testEnv)) *alertWorld {
	t.Helper()
	e := newEnv(t)
	bc := kafkabroker.Config{EmbeddedAddr: "127.0.0.1:0", DataDir: t.TempDir(), Partitions: 2}
	k, err := kafkabroker.StartEmbedded(bc, schema.Topics...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(k.Close)
	icfg := ingest.Config{DeliveryTimeout: 5 * time.Second, MaxBufferedRecords: 1000, Linger: time.Millisecond}
	producer, err := ingest.NewProducer(bc, k.Addrs(), icfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(producer.Close)
	srv := apitest.Start(t, ingest.NewEdge(icfg, producer, workspace.NewStore(e.rdb), prometheus.NewRegistry()).Routes(), nil)
	group := make([]byte, 4)
	_, _ = rand.Read(group)
	rcfg := rollup.Config{Group: "alerts-" + hex.EncodeToString(group), BatchRows: 1000, BatchInterval: 50 * time.Millisecond,
		RetryMin: 20 * time.Millisecond, RetryMax: 300 * time.Millisecond, InsertTimeout: 5 * time.Second, RevokeTimeout: 3 * time.Second,
		SessionTimeout: 3 * time.Second, RebalanceTimeout: 10 * time.Second, Table: "events", Topic: schema.TopicEvents,
		DeadTopic: schema.TopicDeadEvent, Kafka: kafkabroker.Config{Brokers: k.Addrs(), EmbeddedAddr: "127.0.0.1:0", Partitions: 2},
		ClickHouse: e.cfg.ClickHouse, Registerer: prometheus.NewRegistry(), RejectionSamples: 100}
	for _, o := range opts {
		o(&rcfg, e)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- rollup.Run(ctx, rcfg) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("rollup: %v", err)
		}
	})
	w := &alertWorld{e: e, srv: srv, tn: srv.Tenant(t, false), start: time.Now().UTC().Truncate(time.Minute)}
	w.rcv = newReceiver(t, e.clock, func(rw http.ResponseWriter, n int) { rw.WriteHeader(200) })
	ep, err := e.store().CreateEndpoint(context.Background(), w.tn.Workspace.ID, w.rcv.URL, []string{KindRejectionsRising, KindPixelSilent})
	if err != nil {
		t.Fatal(err)
	}
	w.rcv.secret = ep.Secrets[0].Secret
	if err := workspace.NewAlertSettings(e.rdb).Set(context.Background(), w.tn.Workspace.ID, a); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = workspace.NewAlertSettings(e.rdb).Set(context.Background(), w.tn.Workspace.ID, workspace.Alerts{})
	})
	w.tr = &Triggers{Config: e.cfg, Emitter: e.emitter(), Keys: srv.Keys, Conn: e.conn, Log: e.log, Now: e.clock.Now}
	return w
}

// send posts one batch of valid and invalid events for pixel and checks the answer:
// 202, or 422 when none is valid.
func (w *alertWorld) send(t *testing.T, pixel uuid.UUID, valid, invalid int) {
	t.Helper()
	at := time.Now().UTC().Add(-time.Minute).Format(time.RFC3339)
	var evs []string
	for range valid {
		evs = append(evs, fmt.Sprintf(`{"event_name":"purchase","occurred_at":%q,"value":1,"currency":"EUR","consent":{"measurement":true}}`, at))
	}
	for range invalid {
		evs = append(evs, fmt.Sprintf(`{"event_name":"purchase","occurred_at":%q,"value":1,"currency":"EURO","consent":{"measurement":true}}`, at))
	}
	body := `{"pixel_id":"pxl_` + pixel.String() + `","events":[` + strings.Join(evs, ",") + `]}`
	r := w.srv.Do(t, "POST", "/events", w.tn.Secret, body)
	if valid == 0 { // a batch of none acceptable is refused whole, its rejections recorded
		apitest.Problem(t, r, 422, "invalid_request")
		return
	}
	if r.Status != 202 {
		t.Fatalf("POST /events: %d %s", r.Status, r.Body)
	}
	if m := r.JSON(t); m["accepted"] != float64(valid) {
		t.Fatalf("POST /events: accepted %v, want %d: %s", m["accepted"], valid, r.Body)
	}
}

// stored waits until ClickHouse holds accepted and rejected events of pixel received
// since the world began.
func (w *alertWorld) stored(t *testing.T, pixel uuid.UUID, accepted, rejected uint64) {
	t.Helper()
	svctest.WaitFor(t, 30*time.Second, "the consumers storing the events and rejections", func() bool {
		to := time.Now().UTC().Add(2 * time.Minute)
		got, err := readWindows(context.Background(), w.e.conn, w.tn.Workspace.ID, false, []uuid.UUID{pixel}, w.start, to)
		if err != nil {
			t.Fatal(err)
		}
		return got[pixel].Accepted == accepted && got[pixel].rejected() == rejected
	})
}

// tick runs the triggers n times, then the worker until nothing is due, and returns
// every delivery so far, decoded (each signature verified).
func (w *alertWorld) tick(t *testing.T, n int) []map[string]any {
	t.Helper()
	ctx := context.Background()
	for range n {
		if err := w.tr.ScanOnce(ctx); err != nil {
			t.Fatal(err)
		}
	}
	wk := w.e.worker("w")
	for {
		if k, err := wk.RunOnce(ctx); err != nil {
			t.Fatal(err)
		} else if k == 0 {
			break
		}
	}
	var out []map[string]any
	for _, h := range w.rcv.Hits() {
		if !h.Valid {
			t.Fatalf("delivery %s: signature does not verify", h.EventID)
		}
		var m map[string]any
		if err := json.Unmarshal(h.Body, &m); err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
	return out
}

// nextMinute moves the test's clock into the minute after the current one, so that
// the alerts' window (whole minutes up to the current one) holds what was just sent.
func (w *alertWorld) nextMinute() {
	w.e.clock.Set(time.Now().UTC().Truncate(time.Minute).Add(time.Minute + time.Second))
}

func want(t *testing.T, d map[string]any, fields map[string]any) {
	t.Helper()
	for k, v := range fields {
		if fmt.Sprint(d[k]) != fmt.Sprint(v) {
			t.Errorf("data.%s = %v, want %v (%v)", k, d[k], v, d)
		}
	}
}

// A rising share of rejections through the whole pipeline: 20 accepted and 10
// rejected events in the window (a third; threshold 0.2) fire exactly one
// pixel.rejections_rising however many ticks see it, with the window's exact figures;
// once enough accepted events bring the share under the threshold, one "cleared".
func TestRejectionsRisingFiresOncePerEpisode(t *testing.T) {
	w := newAlertWorld(t, workspace.Alerts{RejectionsThreshold: 0.2, RejectionsWindow: 5 * time.Minute, RejectionsMinEvents: 10})
	px := w.tn.Pixel.ID
	w.send(t, px, 20, 0)
	w.send(t, px, 0, 10)
	w.stored(t, px, 20, 10)
	w.nextMinute()
	got := w.tick(t, 3)
	if len(got) != 1 {
		t.Fatalf("%d deliveries, want exactly one: %v", len(got), got)
	}
	if got[0]["type"] != KindRejectionsRising {
		t.Fatalf("type %v", got[0]["type"])
	}
	d := got[0]["data"].(map[string]any)
	end := w.e.clock.Now().Truncate(time.Minute)
	want(t, d, map[string]any{"pixel_id": w.tn.PixelID(), "state": "firing", "received": 30, "accepted": 20, "rejected": 10,
		"share": 0.3333, "threshold": 0.2, "min_events": 10, "window_seconds": 300, "cleared_at": nil,
		"window_end": end.Format(time.RFC3339), "window_start": end.Add(-5 * time.Minute).Format(time.RFC3339),
		"since": end.Format(time.RFC3339), "rejected_by_rule": map[string]any{"iso4217": 10.0}})
	first := got[0]["id"]
	w.e.clock.Add(2 * time.Minute) // later ticks, whose windows still hold the rejections: nothing new
	if got := w.tick(t, 2); len(got) != 1 {
		t.Fatalf("%d deliveries two minutes on, want still one: %v", len(got), got)
	}

	w.send(t, px, 50, 0) // 10 of 80: 0.125
	w.stored(t, px, 70, 10)
	w.nextMinute()
	got = w.tick(t, 2)
	if len(got) != 2 {
		t.Fatalf("%d deliveries, want the firing one and one cleared: %v", len(got), got)
	}
	d = got[1]["data"].(map[string]any)
	want(t, d, map[string]any{"state": "cleared", "received": 80, "rejected": 10, "share": 0.125, "since": end.Format(time.RFC3339)})
	if d["cleared_at"] == nil || got[1]["id"] == first {
		t.Errorf("cleared: id %v (firing %v), cleared_at %v", got[1]["id"], first, d["cleared_at"])
	}
}

// The window ends at the events' completeness watermark: while the events consumer is
// behind, the accepted events of the last minutes are not stored yet while their
// rejections may be, and a window read there would fire on a share that is not real.
func TestRejectionsRisingWaitsForTheWatermark(t *testing.T) {
	w := newAlertWorld(t, workspace.Alerts{RejectionsThreshold: 0.2, RejectionsWindow: 5 * time.Minute, RejectionsMinEvents: 10})
	px := w.tn.Pixel.ID
	w.send(t, px, 0, 10) // the rejections are stored; their accepted events are behind
	w.stored(t, px, 0, 10)
	w.nextMinute()
	ctx, db := context.Background(), w.e.cfg.ClickHouse.Database
	t.Cleanup(func() { w.e.rdb.Del(context.Background(), rollups.WatermarkKey(db)) })
	behind := w.start.Add(-time.Minute)
	if err := rollups.WatermarkRaise(ctx, w.e.rdb, db, "events.v1@test", 2, map[int32]time.Time{0: behind, 1: behind}); err != nil {
		t.Fatal(err)
	}
	if got := w.tick(t, 2); len(got) != 0 {
		t.Fatalf("fired on minutes past the watermark: %v", got)
	}
	w.send(t, px, 45, 0) // the accepted events, stored: 10 of 100 rejected, below 0.2
	w.send(t, px, 45, 0)
	w.stored(t, px, 90, 10)
	w.nextMinute()
	caught := w.e.clock.Now().Add(time.Minute)
	if err := rollups.WatermarkRaise(ctx, w.e.rdb, db, "events.v1@test", 2, map[int32]time.Time{0: caught, 1: caught}); err != nil {
		t.Fatal(err)
	}
	if got := w.tick(t, 2); len(got) != 0 {
		t.Fatalf("fired at a share of 0.1: %v", got)
	}
}

// An episode whose firing event could not be emitted (the emission failed after the
// episode was opened) emits it at the next scan: it is not lost for the episode's life.
func TestFiringEmittedAfterAFailedEmission(t *testing.T) {
	w := newAlertWorld(t, workspace.Alerts{RejectionsThreshold: 0.2, RejectionsWindow: 5 * time.Minute, RejectionsMinEvents: 10})
	px := w.tn.Pixel.ID
	w.send(t, px, 20, 0)
	w.send(t, px, 0, 10)
	w.stored(t, px, 20, 10)
	w.nextMinute()
	// An endpoint record that cannot be read makes the emission fail.
	ctx := context.Background()
	bad, prefix := uuid.New(), w.e.store().Prefix()
	eps := prefix + "ws:" + w.tn.Workspace.ID.String() + ":eps"
	w.e.rdb.HSet(ctx, prefix+"ep:"+bad.String(), "json", "{")
	w.e.rdb.SAdd(ctx, eps, bad.String())
	if err := w.tr.ScanOnce(ctx); err == nil {
		t.Fatal("the scan succeeded with an endpoint that cannot be read")
	}
	w.e.rdb.SRem(ctx, eps, bad.String())
	w.e.rdb.Del(ctx, prefix+"ep:"+bad.String())
	// By the retry the share fell below the threshold: the firing event tells of the
	// window that fired (10 of 30), then the cleared one of this scan's (10 of 80).
	w.send(t, px, 50, 0)
	w.stored(t, px, 70, 10)
	w.nextMinute()
	got := w.tick(t, 2)
	if len(got) != 2 {
		t.Fatalf("%d deliveries after the failed emission, want the firing one and the cleared one: %v", len(got), got)
	}
	byState := map[any]map[string]any{}
	for _, d := range got {
		data := d["data"].(map[string]any)
		byState[data["state"]] = data
	}
	if byState["firing"] == nil || byState["cleared"] == nil {
		t.Fatalf("deliveries %v, want one firing and one cleared", got)
	}
	want(t, byState["firing"], map[string]any{"received": 30, "rejected": 10, "share": 0.3333})
	want(t, byState["cleared"], map[string]any{"received": 80, "rejected": 10, "share": 0.125})
}

// An episode clears when its window holds fewer than min_events events, whatever the
// share: 10 of 30 rejected fires at a minimum of 10; with the minimum raised to 50 the
// same window (a share of 0.3333, above the threshold) clears it. A second episode,
// fired at the minimum of 10 again, clears once its events have left the window.
func TestRejectionsRisingClearsBelowMinEvents(t *testing.T) {
	alerts := workspace.Alerts{RejectionsThreshold: 0.2, RejectionsWindow: 5 * time.Minute, RejectionsMinEvents: 10}
	w := newAlertWorld(t, alerts)
	px := w.tn.Pixel.ID
	w.send(t, px, 20, 0)
	w.send(t, px, 0, 10)
	w.stored(t, px, 20, 10)
	w.nextMinute()
	if got := w.tick(t, 1); len(got) != 1 || got[0]["data"].(map[string]any)["state"] != "firing" {
		t.Fatalf("deliveries %v, want one firing", got)
	}
	setMin := func(n int) {
		a := alerts
		a.RejectionsMinEvents = n
		if err := workspace.NewAlertSettings(w.e.rdb).Set(context.Background(), w.tn.Workspace.ID, a); err != nil {
			t.Fatal(err)
		}
	}
	setMin(50)
	got := w.tick(t, 2)
	if len(got) != 2 {
		t.Fatalf("%d deliveries with min_events 50, want the firing one and one cleared: %v", len(got), got)
	}
	want(t, got[1]["data"].(map[string]any), map[string]any{"state": "cleared", "received": 30, "rejected": 10,
		"share": 0.3333, "min_events": 50})

	setMin(10) // a minute on, the window still holds the events: a new episode, which clears once the window is past them
	w.e.clock.Add(time.Minute)
	if got := w.tick(t, 1); len(got) != 3 || got[2]["data"].(map[string]any)["state"] != "firing" {
		t.Fatalf("deliveries %v, want a second firing", got)
	}
	w.e.clock.Add(alerts.RejectionsWindow + time.Minute)
	got = w.tick(t, 1)
	if len(got) != 4 {
		t.Fatalf("%d deliveries once the window left the events, want a second cleared: %v", len(got), got)
	}
	want(t, got[3]["data"].(map[string]any), map[string]any{"state": "cleared", "received": 0, "rejected": 0, "min_events": 10})
}

// Below the threshold nothing is sent: 2 rejected of 22 (0.09 < 0.2) on one pixel, and
// 5 rejected of 5 on another (a share of 1, but fewer events than the minimum of 10).
func TestRejectionsBelowThresholdFireNothing(t *testing.T) {
	w := newAlertWorld(t, workspace.Alerts{RejectionsThreshold: 0.2, RejectionsWindow: 5 * time.Minute, RejectionsMinEvents: 10})
	px := w.tn.Pixel.ID
	few := w.srv.Pixel(t, w.tn.Workspace.ID).ID
	w.send(t, px, 20, 2)
	w.send(t, few, 0, 5)
	w.stored(t, px, 20, 2)
	w.stored(t, few, 0, 5)
	w.nextMinute()
	if got := w.tick(t, 3); len(got) != 0 {
		t.Fatalf("%d deliveries, want none: %v", len(got), got)
	}
}

// Copies of an event_id the pixel already had are dropped by the consumer and kept as
// rejections of rule duplicate_event_id, which the alert's share leaves out (as GET
// /pixels does): 20 events, then the same 20 again, is a share of 0, not 20 of 40.
func TestRejectionsRisingLeavesOutEventIDCopies(t *testing.T) {
	// The consumer's event-id claims need Redis, which the other alert tests leave out
	// (with it, TestRejectionsRisingFiresOncePerEpisode's later windows, on the test's
	// clock, no longer see its events).
	w := newAlertWorld(t, workspace.Alerts{RejectionsThreshold: 0.2, RejectionsWindow: 5 * time.Minute, RejectionsMinEvents: 10},
		func(c *rollup.Config, e *testEnv) { c.Redis = e.rdb })
	px := w.tn.Pixel.ID
	at := time.Now().UTC().Add(-time.Minute).Format(time.RFC3339)
	var evs []string
	for i := range 20 {
		evs = append(evs, fmt.Sprintf(`{"event_id":"order-%d","event_name":"purchase","occurred_at":%q,"value":1,"currency":"EUR","consent":{"measurement":true}}`, i, at))
	}
	body := `{"pixel_id":"pxl_` + px.String() + `","events":[` + strings.Join(evs, ",") + `]}`
	for range 2 {
		if r := w.srv.Do(t, "POST", "/events", w.tn.Secret, body); r.Status != 202 {
			t.Fatalf("POST /events: %d %s", r.Status, r.Body)
		}
	}
	svctest.WaitFor(t, 30*time.Second, "the 20 copies stored as duplicate_event_id rejections", func() bool {
		var n uint64
		err := w.e.conn.QueryRow(context.Background(), "SELECT sum(toUInt64(rejections)) FROM "+rejection.Table+
			" WHERE toString(pixel_id) = ? AND rule = ?", px.String(), schema.RuleDuplicateEventID).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		return n == 20
	})
	svctest.WaitFor(t, 30*time.Second, "the 20 events stored", func() bool {
		got, err := readWindows(context.Background(), w.e.conn, w.tn.Workspace.ID, false, []uuid.UUID{px}, w.start, time.Now().UTC().Add(2*time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		return got[px].Accepted == 20
	})
	w.nextMinute()
	if got := w.tick(t, 3); len(got) != 0 {
		t.Fatalf("%d deliveries, want none (the copies are not rejections of the sender's events): %v", len(got), got)
	}
}

// A pixel that goes silent: one accepted event, then nothing for the workspace's
// period (1 minute) fires exactly one pixel.silent, since the event's reception; an
// accepted event afterwards clears it. A pixel with no accepted event at all is not
// announced.
func TestPixelSilentFiresOnceAndClears(t *testing.T) {
	w := newAlertWorld(t, workspace.Alerts{SilentAfter: time.Minute})
	px := w.tn.Pixel.ID
	// A second pixel that never had an accepted event is not announced: the deliveries
	// below are the first pixel's alone.
	w.srv.Pixel(t, w.tn.Workspace.ID)
	w.send(t, px, 1, 0)
	w.stored(t, px, 1, 0)
	last, err := readLastAccepted(context.Background(), w.e.conn, w.tn.Workspace.ID, false, []uuid.UUID{px}, time.Now().Add(-time.Hour))
	if err != nil || last[px].IsZero() {
		t.Fatalf("last accepted %v, %v", last, err)
	}
	if got := w.tick(t, 1); len(got) != 0 {
		t.Fatalf("silent after %s: %v", time.Since(last[px]), got)
	}
	w.e.clock.Set(last[px].Add(time.Minute + time.Second))
	// A consumer that stalled at the last event (its partition's watermark there): not
	// a silence, nothing is known past it.
	ctx, db := context.Background(), w.e.cfg.ClickHouse.Database
	stalled := map[int32]time.Time{0: last[px], 1: last[px]}
	if err := rollups.WatermarkRaise(ctx, w.e.rdb, db, "events.v1@test", 2, stalled); err != nil {
		t.Fatal(err)
	}
	if got := w.tick(t, 2); len(got) != 0 {
		t.Fatalf("silent while the consumer is behind: %v", got)
	}
	w.e.rdb.Del(ctx, rollups.WatermarkKey(db))
	got := w.tick(t, 3)
	if len(got) != 1 || got[0]["type"] != KindPixelSilent {
		t.Fatalf("%d deliveries, want exactly one pixel.silent: %v", len(got), got)
	}
	want(t, got[0]["data"].(map[string]any), map[string]any{"pixel_id": w.tn.PixelID(), "state": "firing",
		"since": last[px].Format(time.RFC3339), "silent_after_seconds": 60, "cleared_at": nil})
	w.e.clock.Add(5 * time.Minute)
	if got := w.tick(t, 2); len(got) != 1 {
		t.Fatalf("%d deliveries five minutes on, want still one: %v", len(got), got)
	}

	time.Sleep(time.Until(last[px].Add(1100 * time.Millisecond))) // received_at is in whole seconds
	w.send(t, px, 1, 0)
	w.stored(t, px, 2, 0)
	got = w.tick(t, 1)
	if len(got) != 2 {
		t.Fatalf("%d deliveries, want the silence and its end: %v", len(got), got)
	}
	d := got[1]["data"].(map[string]any)
	want(t, d, map[string]any{"state": "cleared", "since": last[px].Format(time.RFC3339)})
	if d["last_accepted_at"] == nil || d["cleared_at"] == nil {
		t.Errorf("cleared: %v", d)
	}
}

// TestAcceptedMinutesRetention: the scan drops the days of pixel_accepted_minutes older
// than acceptedMinutesKept (partitions by day of reception) and keeps the later ones.
func TestAcceptedMinutesRetention(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	ws, px := uuid.New(), uuid.New()
	now := e.clock.Now()
	old, edge, kept := now.Add(-acceptedMinutesKept-48*time.Hour), now.Add(-acceptedMinutesKept+24*time.Hour), now.Add(-time.Hour)
	for _, at := range []time.Time{old, edge, kept} {
		if err := e.conn.Exec(ctx, "INSERT INTO pixel_accepted_minutes SELECT toUUID(?), 0, toUUID(?), toStartOfMinute(toDateTime(?)), toDate(toDateTime(?)), countState(), maxState(toDateTime(?, 'UTC')) FROM system.one",
			ws.String(), px.String(), at.Unix(), at.Unix(), at.Unix()); err != nil {
			t.Fatal(err)
		}
	}
	tr := &Triggers{Config: e.cfg, Emitter: e.emitter(), Keys: workspace.NewStore(e.rdb), Conn: e.conn, Log: e.log, Now: e.clock.Now}
	if err := tr.ScanOnce(ctx); err != nil {
		t.Fatal(err)
	}
	var minutes []time.Time
	err := chpool.EachRow(ctx, e.conn, "SELECT minute FROM pixel_accepted_minutes WHERE pixel_id = toUUID(?) ORDER BY minute", []any{px.String()},
		func(s chpool.Row) error {
			var m time.Time
			minutes = append(minutes, m)
			return s.Scan(&minutes[len(minutes)-1])
		})
	if err != nil {
		t.Fatal(err)
	}
	if len(minutes) != 2 || !minutes[0].Equal(edge.Truncate(time.Minute)) {
		t.Fatalf("minutes after the retention: %v, want the two of the last %v", minutes, acceptedMinutesKept)
	}
}

// A share equal to the threshold reaches it, for every threshold of two decimals and the
// counts that give it; a share below it does not.
func TestShareReachedAtTheThreshold(t *testing.T) {
	for pct := uint64(1); pct <= 100; pct++ {
		threshold, _ := strconv.ParseFloat(fmt.Sprintf("0.%02d", pct%100), 64)
		if pct == 100 {
			threshold = 1
		}
		for _, received := range []uint64{100, 200, 1000, 3700} {
			at := pct * received / 100
			if !shareReached(at, received, threshold) {
				t.Fatalf("%d of %d does not reach %v", at, received, threshold)
			}
			if shareReached(at-1, received, threshold) {
				t.Fatalf("%d of %d reaches %v", at-1, received, threshold)
			}
		}
	}
}

// A slow emitter's record of a firing event it sent changes only the episode it sent it
// for: an episode another process closed and opened anew meanwhile is left as it is.
func TestFiringEmittedLeavesANewerEpisode(t *testing.T) {
	st, ctx, px := newEnv(t).emitter().Store, context.Background(), uuid.New()
	s1 := time.Now().UTC().Truncate(time.Second).Add(-time.Hour)
	e1, err := st.openEpisode(ctx, KindRejectionsRising, px, s1, []byte(`{"share":0.5}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := st.closeEpisode(ctx, KindRejectionsRising, px); err != nil {
		t.Fatal(err)
	}
	s2 := s1.Add(30 * time.Minute)
	if _, err := st.openEpisode(ctx, KindRejectionsRising, px, s2, []byte(`{"share":0.6}`)); err != nil {
		t.Fatal(err)
	}
	if err := st.firingEmitted(ctx, KindRejectionsRising, px, e1); err != nil {
		t.Fatal(err)
	}
	ep, open, err := st.episodeOf(ctx, KindRejectionsRising, px)
	if err != nil || !open || !ep.Since.Equal(s2) || !ep.Pending {
		t.Fatalf("episode %+v (open %v, %v), want the newer one, still pending", ep, open, err)
	}
	t.Cleanup(func() { _ = st.closeEpisode(context.Background(), KindRejectionsRising, px) })
}
