package webhooks

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	json "github.com/goccy/go-json"
	"github.com/google/uuid"

	"svc/lib/ids"
)

func contextTimeout() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 30*time.Second)
}

// hit is one request the test receiver got.
type hit struct {
	EventID string
	Attempt string
	Valid   bool
	Body    []byte
}

// receiver answers each request through answer(n), n counting requests per event id
// from 1, and records what it got.
type receiver struct {
	*httptest.Server
	mu     sync.Mutex
	hits   []hit
	per    map[string]int
	secret string
	clock  *fakeClock
}

func newReceiver(t *testing.T, clock *fakeClock, answer func(w http.ResponseWriter, n int)) *receiver {
	r := &receiver{per: map[string]int{}, clock: clock}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		id := req.Header.Get("SVC-Webhook-Id")
		r.per[id]++
		n := r.per[id]
		r.hits = append(r.hits, hit{EventID: id, Attempt: req.Header.Get("SVC-Webhook-Attempt"),
			Valid: verifyIndependently(req.Header.Get("SVC-Signature"), body, r.secret, clock.Now()), Body: body})
		r.mu.Unlock()
		answer(w, n)
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *receiver) Hits() []hit {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]hit(nil), r.hits...)
}

func keyEvent(ws uuid.UUID) Event {
	kid := uuid.New()
	exp := time.Now().Add(72 * time.Hour).UTC().Truncate(time.Second)
	return Event{ID: EventID(KindKeyExpiring, kid.String(), exp.Format(time.RFC3339)), Kind: KindKeyExpiring,
		WorkspaceID: ws, Data: KeyExpiring{KeyID: ids.Format(ids.Key, kid), KeyIDUUID: kid.String(), Env: "live",
			Scopes: []string{"events:write"}, ExpiresAt: exp, ExpiresInSeconds: 72 * 3600}}
}

// TestOutboundScheduleAndLog: a receiver fails three times (the second with 503 and
// Retry-After: 3600) then succeeds; each attempt follows the schedule, is signed
// verifiably, and has its row in the delivery log.
func TestOutboundScheduleAndLog(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	rcv := newReceiver(t, e.clock, func(w http.ResponseWriter, n int) {
		switch n {
		case 1, 3:
			w.WriteHeader(500)
		case 2:
			w.Header().Set("Retry-After", "3600")
			w.WriteHeader(503)
		default:
			w.WriteHeader(204)
		}
	})
	st := e.store()
	ws := uuid.New()
	ep, err := st.CreateEndpoint(ctx, ws, rcv.URL+"/hook?token=abc", []string{KindKeyExpiring})
	if err != nil {
		t.Fatal(err)
	}
	rcv.secret = ep.Secrets[0].Secret
	// An endpoint that does not take the kind gets nothing.
	if _, err := st.CreateEndpoint(ctx, ws, rcv.URL+"/other", []string{KindDayClosed}); err != nil {
		t.Fatal(err)
	}
	ev := keyEvent(ws)
	em := e.emitter()
	if n, err := em.Emit(ctx, ev); err != nil || n != 1 {
		t.Fatalf("Emit = %d, %v; want 1 delivery", n, err)
	}
	// Emitting the same event again schedules nothing.
	if n, err := em.Emit(ctx, ev); err != nil || n != 0 {
		t.Fatalf("second Emit = %d, %v; want 0", n, err)
	}
	w := e.worker("w1")
	wantDelay := []time.Duration{5 * time.Second, time.Hour /* Retry-After over 5 min */, 30 * time.Minute}
	for attempt := 1; attempt <= 4; attempt++ {
		before := e.clock.Now()
		if n, err := w.RunOnce(ctx); err != nil || n != 1 {
			t.Fatalf("attempt %d: RunOnce = %d, %v", attempt, n, err)
		}
		d, err := st.Delivery(ctx, ep.ID, ev.ID)
		if err != nil {
			t.Fatal(err)
		}
		if d.Attempts != attempt {
			t.Fatalf("attempts = %d, want %d", d.Attempts, attempt)
		}
		if attempt == 4 {
			if d.State != "delivered" {
				t.Fatalf("state %s after the fourth attempt", d.State)
			}
			break
		}
		if d.State != "pending" || d.NextAt == nil {
			t.Fatalf("attempt %d: state %s next %v", attempt, d.State, d.NextAt)
		}
		got, want := d.NextAt.Sub(before), wantDelay[attempt-1]
		lo, hi := time.Duration(float64(want)*0.9)-time.Millisecond, time.Duration(float64(want)*1.1)+time.Millisecond
		if attempt == 2 {
			lo, hi = want, want // Retry-After exactly, no jitter
		}
		if got < lo || got > hi {
			t.Fatalf("attempt %d: next attempt in %s, want %s ±10%%", attempt, got, want)
		}
		// Not due a moment before.
		e.clock.Set(d.NextAt.Add(-time.Second))
		if n, _ := w.RunOnce(ctx); n != 0 {
			t.Fatalf("attempt %d made early", attempt+1)
		}
		e.clock.Set(*d.NextAt)
	}
	hits := rcv.Hits()
	if len(hits) != 4 {
		t.Fatalf("receiver got %d requests, want 4", len(hits))
	}
	for i, h := range hits {
		if h.EventID != ids.Format(ids.Event, ev.ID) || h.Attempt != fmt.Sprint(i+1) || !h.Valid {
			t.Fatalf("request %d: id %s attempt %s signature valid %v", i+1, h.EventID, h.Attempt, h.Valid)
		}
		if string(h.Body) != string(hits[0].Body) {
			t.Fatalf("request %d: body differs from the first", i+1)
		}
	}
	var envl Envelope
	if err := json.Unmarshal(hits[0].Body, &envl); err != nil || envl.Type != KindKeyExpiring || envl.ID != ids.Format(ids.Event, ev.ID) {
		t.Fatalf("body %s: %v", hits[0].Body, err)
	}
	rows, err := e.logs.Deliveries(ctx, DeliveryFilter{Event: ev.ID})
	if err != nil {
		t.Fatal(err)
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].Attempt < rows[j].Attempt })
	wantOut := []string{Retry, Retry, Retry, Delivered}
	wantStatus := []int{500, 503, 500, 204}
	if len(rows) != 4 {
		t.Fatalf("delivery log has %d rows, want 4: %+v", len(rows), rows)
	}
	for i, r := range rows {
		if r.Attempt != i+1 || r.Outcome != wantOut[i] || r.StatusCode != wantStatus[i] || r.EndpointID != ep.ID || r.WorkspaceID != ws {
			t.Fatalf("row %d: %+v", i, r)
		}
		if (r.NextAttemptAt == nil) != (i == 3) {
			t.Fatalf("row %d next_attempt_at %v", i, r.NextAttemptAt)
		}
	}
	if due, _ := st.Due(ctx); due != 0 {
		t.Fatalf("%d deliveries still scheduled", due)
	}
}

// TestOutboundRestartAndTwoWorkers: many events, two workers (each its own store, as
// two processes) running at once, a worker that dies holding claims, a restart: every
// event is delivered, no (event, attempt) is ever sent twice.
func TestOutboundRestartAndTwoWorkers(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	rcv := newReceiver(t, e.clock, func(w http.ResponseWriter, n int) {
		if n == 1 {
			w.WriteHeader(502)
			return
		}
		w.WriteHeader(200)
	})
	st, ws, ep := e.endpoint(t, rcv.URL)
	rcv.secret = ep.Secrets[0].Secret
	const events = 30
	em := e.emitter()
	for range events {
		if _, err := em.Emit(ctx, keyEvent(ws)); err != nil {
			t.Fatal(err)
		}
	}
	// A worker claims a few attempts and dies before making them.
	dead := e.store()
	lost, err := dead.ClaimDue(ctx, e.clock.Now(), e.cfg.Lease, 3)
	if err != nil || len(lost) != 3 {
		t.Fatalf("claim = %d, %v", len(lost), err)
	}
	// Two live workers, started fresh (a restart as far as the schedule is concerned).
	w1, w2 := e.worker("w1"), e.worker("w2")
	deadline := time.Now().Add(60 * time.Second)
	for {
		var wg sync.WaitGroup
		for _, w := range []*Worker{w1, w2} {
			wg.Add(1)
			go func(w *Worker) {
				defer wg.Done()
				for {
					n, err := w.RunOnce(ctx)
					if err != nil {
						t.Error(err)
						return
					}
					if n == 0 {
						return
					}
				}
			}(w)
		}
		wg.Wait()
		due, _ := st.Due(ctx)
		if due == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d deliveries still scheduled", due)
		}
		e.clock.Add(e.cfg.Lease + time.Second) // past every backoff of round 1 and the dead lease
	}
	hits := rcv.Hits()
	seen := map[string]bool{}
	delivered := map[string]bool{}
	for _, h := range hits {
		k := h.EventID + "#" + h.Attempt
		if seen[k] {
			t.Fatalf("attempt %s of %s sent twice", h.Attempt, h.EventID)
		}
		seen[k] = true
		if !h.Valid {
			t.Fatalf("bad signature on %s", k)
		}
		if rcv.per[h.EventID] >= 2 {
			delivered[h.EventID] = true
		}
	}
	if len(delivered) != events {
		t.Fatalf("%d events delivered, want %d", len(delivered), events)
	}
	// The three lost claims were attempt 1 of their events; their deliveries went on
	// with attempts 2 and 3.
	for _, c := range lost {
		id := ids.Format(ids.Event, c.Event)
		if seen[id+"#1"] || !seen[id+"#2"] || !seen[id+"#3"] {
			t.Fatalf("event %s after a lost claim: attempts seen %v %v %v", id, seen[id+"#1"], seen[id+"#2"], seen[id+"#3"])
		}
	}
	// The dead worker's late finish changes nothing.
	if ok, err := dead.Finish(ctx, lost[0], nil, "delivered", 200); err != nil || ok {
		t.Fatalf("stale finish = %v, %v; want refused", ok, err)
	}
	rows, err := e.logs.Deliveries(ctx, DeliveryFilter{Endpoint: ep.ID, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != len(hits) {
		t.Fatalf("delivery log has %d rows for %d requests:\n%s", len(rows), len(hits), unmatchedRows(rows, seen))
	}
}

// unmatchedRows lists the delivery-log rows that no request matched, or that repeat one.
func unmatchedRows(rows []DeliveryRow, seen map[string]bool) string {
	var b strings.Builder
	logged := map[string]int{}
	for _, r := range rows {
		k := ids.Format(ids.Event, r.EventID) + "#" + strconv.Itoa(r.Attempt)
		if logged[k]++; logged[k] > 1 || !seen[k] {
			fmt.Fprintf(&b, "%s: outcome %s, status %d, error %q, worker %s, logged %d times\n",
				k, r.Outcome, r.StatusCode, r.Error, r.Worker, logged[k])
		}
	}
	return b.String()
}

// TestOutboundDisable: 410 disables at once; a run of failures longer than
// DisableAfter disables too; later deliveries to a disabled endpoint are dropped.
func TestOutboundDisable(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	gone := newReceiver(t, e.clock, func(w http.ResponseWriter, n int) { w.WriteHeader(410) })
	down := newReceiver(t, e.clock, func(w http.ResponseWriter, n int) { w.WriteHeader(500) })
	st := e.store()
	ws := uuid.New()
	epGone, _ := st.CreateEndpoint(ctx, ws, gone.URL, nil)
	epDown, _ := st.CreateEndpoint(ctx, ws, down.URL, nil)
	w := e.worker("w")
	em := e.emitter()
	ev := keyEvent(ws)
	em.Emit(ctx, ev)
	w.RunOnce(ctx)
	g, _ := st.Endpoint(ctx, epGone.ID)
	if g.Enabled() || g.DisabledReason == "" {
		t.Fatalf("410 did not disable: %+v", g)
	}
	// Keep the other one failing for DisableAfter.
	for range 20 {
		e.clock.Add(12 * time.Hour)
		w.RunOnce(ctx)
		if d, _ := st.Endpoint(ctx, epDown.ID); !d.Enabled() {
			break
		}
	}
	d, _ := st.Endpoint(ctx, epDown.ID)
	if d.Enabled() {
		t.Fatal("failing endpoint not disabled after DisableAfter")
	}
	rows, _ := e.logs.Deliveries(ctx, DeliveryFilter{Endpoint: epDown.ID, Limit: 100})
	if len(rows) == 0 || rows[0].Outcome != Disabled {
		t.Fatalf("last row %+v, want disabled", rows)
	}
	// A new event goes nowhere; redelivery to a disabled endpoint is dropped.
	if n, _ := em.Emit(ctx, keyEvent(ws)); n != 0 {
		t.Fatalf("emitted to %d disabled endpoints", n)
	}
	if err := st.Redeliver(ctx, epGone.ID, ev.ID, ws, KindKeyExpiring, e.clock.Now()); err != nil {
		t.Fatal(err)
	}
	w.RunOnce(ctx)
	if dl, _ := st.Delivery(ctx, epGone.ID, ev.ID); dl.State != "dropped" {
		t.Fatalf("redelivery to a disabled endpoint: state %s", dl.State)
	}
	if len(gone.Hits()) != 1 {
		t.Fatalf("disabled endpoint got %d requests", len(gone.Hits()))
	}
}

// A receiver's Retry-After is honoured up to SVC_WEBHOOKS_MAX_RETRY_AFTER (24 h), and a
// delivery that failed every attempt of the schedule (ten by default) is failed, its last
// row gave_up, and nothing more is scheduled (webhooks.md; an endpoint failing for less
// than DisableAfter stays enabled).
func TestOutboundGivesUpAfterTheSchedule(t *testing.T) {
	e := newEnv(t)
	e.cfg.DisableAfter = 10000 * time.Hour
	ctx := context.Background()
	rcv := newReceiver(t, e.clock, func(w http.ResponseWriter, n int) {
		w.Header().Set("Retry-After", "200000") // 55 h
		w.WriteHeader(503)
	})
	st, ws, ep := e.endpoint(t, rcv.URL)
	ev := e.emitKey(t, ws)
	w := e.worker("w")
	attempts := len(e.cfg.Schedule)
	for a := 1; a <= attempts; a++ {
		if n, err := w.RunOnce(ctx); err != nil || n != 1 {
			t.Fatalf("attempt %d: RunOnce = %d, %v", a, n, err)
		}
		d, err := st.Delivery(ctx, ep.ID, ev.ID)
		if err != nil || d.Attempts != a {
			t.Fatalf("attempt %d: %+v, %v", a, d, err)
		}
		if a < attempts {
			if d.State != "pending" || d.NextAt == nil || d.NextAt.Sub(e.clock.Now()) != e.cfg.MaxRetryAfter {
				t.Fatalf("attempt %d: %+v, want the next %s on (Retry-After capped)", a, d, e.cfg.MaxRetryAfter)
			}
			e.clock.Add(e.cfg.MaxRetryAfter)
			continue
		}
		if d.State != "failed" || d.NextAt != nil {
			t.Fatalf("after the last attempt: %+v, want failed with nothing scheduled", d)
		}
	}
	e.clock.Add(48 * time.Hour)
	if n, err := w.RunOnce(ctx); err != nil || n != 0 {
		t.Fatalf("after giving up: RunOnce = %d, %v", n, err)
	}
	rows, err := e.logs.Deliveries(ctx, DeliveryFilter{Endpoint: ep.ID, Limit: 100})
	if err != nil || len(rows) != attempts || rows[0].Outcome != GaveUp {
		t.Fatalf("rows %+v (%v); want %d, the newest gave_up", rows, err, attempts)
	}
	if got, _ := st.Endpoint(ctx, ep.ID); !got.Enabled() {
		t.Fatal("the endpoint was disabled before DisableAfter")
	}
}
