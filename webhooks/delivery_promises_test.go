package webhooks

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"svc/lib/ids"
)

// The outbound promises of webhooks/README.md ("Retries", "Delivery log") and the
// developer page (api/docs/pages/webhooks.md), each held to its words.

// lastRow returns the newest delivery-log row of event ev at endpoint ep.
func lastRow(t *testing.T, e *testEnv, ep, ev uuid.UUID) DeliveryRow {
	t.Helper()
	ctx, cancel := contextTimeout()
	defer cancel()
	rows, err := e.logs.Deliveries(ctx, DeliveryFilter{Endpoint: ep, Event: ev, Limit: 100})
	if err != nil || len(rows) == 0 {
		t.Fatalf("delivery log of %s at %s: %d rows, %v", ev, ep, len(rows), err)
	}
	return rows[0]
}

// Promise (README "Retries"; SVC_WEBHOOKS_DISABLE_AFTER): "An endpoint whose deliveries
// have failed without a success for 72 h is disabled"; "Deliveries to a disabled
// endpoint are dropped (logged `dropped`)". The run starts at the first failure: a
// failure 72 h less a millisecond after it leaves the endpoint enabled (logged `retry`),
// the next failure, 72 h after it to the millisecond, disables it (logged `disabled`).
func TestOutboundDisabledAfter72hOfFailuresNotBefore(t *testing.T) {
	e := newEnv(t)
	if e.cfg.DisableAfter != 72*time.Hour {
		t.Fatalf("SVC_WEBHOOKS_DISABLE_AFTER defaults to %s, the README says 72h", e.cfg.DisableAfter)
	}
	ctx := context.Background()
	rcv := newReceiver(t, e.clock, func(w http.ResponseWriter, n int) { w.WriteHeader(500) })
	st, ws, ep := e.endpoint(t, rcv.URL)
	w := e.worker("w")
	em := e.emitter()
	t0 := e.clock.Now()
	ev1 := keyEvent(ws)
	if n, err := em.Emit(ctx, ev1); err != nil || n != 1 {
		t.Fatalf("Emit = %d, %v", n, err)
	}
	// Failures of ev1 at t0, +24 h, +48 h and 72 h less a millisecond: every gap under
	// the 36 h that starts a new run, so the run starts at t0 throughout.
	for _, at := range []time.Duration{0, 24 * time.Hour, 48 * time.Hour, 72*time.Hour - time.Millisecond} {
		e.clock.Set(t0.Add(at))
		if n, err := w.RunOnce(ctx); err != nil || n != 1 {
			t.Fatalf("t0+%s: RunOnce = %d, %v; want the next attempt of the first event", at, n, err)
		}
		got, err := st.Endpoint(ctx, ep.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !got.Enabled() {
			t.Fatalf("t0+%s: disabled (%s) before 72 h of failures", at, got.DisabledReason)
		}
		if got.FailingSince == nil || !got.FailingSince.Equal(t0) {
			t.Fatalf("t0+%s: failing since %v, want %s", at, got.FailingSince, t0)
		}
		if r := lastRow(t, e, ep.ID, ev1.ID); r.Outcome != "retry" || r.NextAttemptAt == nil || r.StatusCode != 500 {
			t.Fatalf("t0+%s: logged %+v, want outcome retry with a next attempt", at, r)
		}
	}
	// 72 h after the first failure, the next failure (a second event: the run is the
	// endpoint's, not one delivery's) disables the endpoint.
	e.clock.Set(t0.Add(72 * time.Hour))
	ev2 := keyEvent(ws)
	if n, err := em.Emit(ctx, ev2); err != nil || n != 1 {
		t.Fatalf("Emit of the second event = %d, %v", n, err)
	}
	if n, err := w.RunOnce(ctx); err != nil || n != 1 {
		t.Fatalf("t0+72h: RunOnce = %d, %v; want the second event's first attempt only", n, err)
	}
	got, err := st.Endpoint(ctx, ep.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Enabled() || !got.DisabledAt.Equal(t0.Add(72*time.Hour)) || got.DisabledReason == "" {
		t.Fatalf("t0+72h: disabled at %v (%q), want disabled at %s", got.DisabledAt, got.DisabledReason, t0.Add(72*time.Hour))
	}
	if r := lastRow(t, e, ep.ID, ev2.ID); r.Outcome != "disabled" || r.StatusCode != 500 || r.NextAttemptAt != nil {
		t.Fatalf("t0+72h: logged %+v, want outcome disabled, nothing scheduled", r)
	}
	// The first event's next attempt (due about 2 h after its fourth) is dropped: nothing
	// sent, logged dropped.
	e.clock.Add(3 * time.Hour)
	if n, err := w.RunOnce(ctx); err != nil || n != 1 {
		t.Fatalf("after disabling: RunOnce = %d, %v", n, err)
	}
	if r := lastRow(t, e, ep.ID, ev1.ID); r.Outcome != "dropped" || r.Attempt != 5 {
		t.Fatalf("after disabling: logged %+v, want attempt 5 dropped", r)
	}
	if d, err := st.Delivery(ctx, ep.ID, ev1.ID); err != nil || d.State != "dropped" {
		t.Fatalf("after disabling: delivery %+v, %v; want dropped", d, err)
	}
	if n := len(rcv.Hits()); n != 5 {
		t.Fatalf("the receiver got %d requests, want the 5 made before the endpoint was disabled", n)
	}
}

// Promise (README "Retries"; webhooks.md "Where an endpoint may be"; NewWorker):
// "2xx is delivered. … Any other answer, a redirect, … is a failure"; deliveries "do not
// follow redirects: a 3xx is a failed attempt". For each redirect a client would follow
// (301, 302, 303, 307, 308, to a receiver that would answer 200): the redirect's target
// gets nothing, the attempt is logged `retry` with the 3xx as its status_code, the
// delivery is rescheduled on the failure schedule (5 s, then 5 min, ±10 %), and the
// endpoint's run of failures starts (the failure counts towards disabling).
func TestOutboundRedirectIsAFailedAttemptNotFollowed(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	target := newReceiver(t, e.clock, func(w http.ResponseWriter, n int) { w.WriteHeader(200) })
	st := e.store()
	ws := uuid.New()
	codes := []int{301, 302, 303, 307, 308}
	eps := map[int]Endpoint{}
	for _, code := range codes {
		rcv := newReceiver(t, e.clock, func(w http.ResponseWriter, n int) {
			w.Header().Set("Location", target.URL+"/moved")
			w.WriteHeader(code)
		})
		ep, err := st.CreateEndpoint(ctx, ws, rcv.URL, nil)
		if err != nil {
			t.Fatal(err)
		}
		eps[code] = ep
	}
	ev := keyEvent(ws)
	if n, err := e.emitter().Emit(ctx, ev); err != nil || n != len(codes) {
		t.Fatalf("Emit = %d, %v; want %d deliveries", n, err, len(codes))
	}
	w := e.worker("w")
	t0 := e.clock.Now()
	for attempt, delay := range []time.Duration{5 * time.Second, 5 * time.Minute} {
		attempt++
		now := e.clock.Now()
		if n, err := w.RunOnce(ctx); err != nil || n != len(codes) {
			t.Fatalf("attempt %d: RunOnce = %d, %v; want %d", attempt, n, err, len(codes))
		}
		var latest time.Time
		for _, code := range codes {
			ep := eps[code]
			d, err := st.Delivery(ctx, ep.ID, ev.ID)
			if err != nil {
				t.Fatal(err)
			}
			lo, hi := now.Add(delay*9/10), now.Add(delay*11/10)
			if d.State != "pending" || d.Attempts != attempt || d.LastStatus != code || d.NextAt == nil ||
				d.NextAt.Before(lo) || d.NextAt.After(hi) {
				t.Fatalf("%d, attempt %d: delivery %+v; want pending, the next attempt %s on ±10%%", code, attempt, d, delay)
			}
			r := lastRow(t, e, ep.ID, ev.ID)
			if r.Outcome != "retry" || r.StatusCode != code || r.Attempt != attempt || r.NextAttemptAt == nil ||
				!r.NextAttemptAt.Equal(d.NextAt.Truncate(time.Second)) { // the log keeps whole seconds
				t.Fatalf("%d, attempt %d: logged %+v; want outcome retry, status_code %d, next_attempt_at %s",
					code, attempt, r, code, d.NextAt)
			}
			got, err := st.Endpoint(ctx, ep.ID)
			if err != nil || !got.Enabled() || got.FailingSince == nil || !got.FailingSince.Equal(t0) {
				t.Fatalf("%d, attempt %d: endpoint %+v, %v; want enabled, failing since %s", code, attempt, got, err, t0)
			}
			if d.NextAt.After(latest) {
				latest = *d.NextAt
			}
		}
		if n := len(target.Hits()); n != 0 {
			t.Fatalf("attempt %d: the redirect's target got %d requests; redirects must not be followed", attempt, n)
		}
		e.clock.Set(latest)
	}
}

// Promise (README "Retries": "`svc admin webhook redeliver EVT_ID [--endpoint whk_…]`
// starts a new round …; the body comes from Redis or, after 30 days, ClickHouse";
// webhooks.md: "**Resend** starts a new round of attempts with the same event `id` and
// body"; migration 0030: webhook_events keeps "the exact body delivered (a redelivery
// sends the same bytes)"). After the body has left Redis, a redelivery sends the
// original bytes, under the same SVC-Webhook-Id, signed over "<t>.<body>" with them:
// through EventMeta (what the command and the application's Resend call: it puts the
// body from ClickHouse back into Redis), and through the worker's own read of ClickHouse
// when the body leaves Redis between the redelivery and its attempt.
func TestOutboundRedeliveryAfterRedisSendsTheOriginalBodyFromClickHouse(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	rcv := newReceiver(t, e.clock, func(w http.ResponseWriter, n int) { w.WriteHeader(200) })
	st, ws, ep := e.endpoint(t, rcv.URL)
	rcv.secret = ep.Secrets[0].Secret
	ev := e.emitKey(t, ws)
	w := e.worker("w")
	if n, err := w.RunOnce(ctx); err != nil || n != 1 {
		t.Fatalf("first delivery: RunOnce = %d, %v", n, err)
	}
	hits := rcv.Hits()
	if len(hits) != 1 || !hits[0].Valid {
		t.Fatalf("first delivery: %+v", hits)
	}
	original := hits[0].Body
	if se, err := e.logs.Event(ctx, ev.ID); err != nil || string(se.Body) != string(original) {
		t.Fatalf("webhook_events holds %q (%v); want the body delivered %q", se.Body, err, original)
	}
	openLogs := func(context.Context) (*Logs, func(), error) { return e.logs, func() {}, nil }
	// forget removes the body from Redis, as its EventTTL (30 days) does.
	forget := func() {
		t.Helper()
		if err := e.rdb.Del(ctx, e.cfg.Prefix+"evt:"+ev.ID.String()).Err(); err != nil {
			t.Fatal(err)
		}
		if _, err := st.EventBody(ctx, ev.ID); !errors.Is(err, ErrNotFound) {
			t.Fatalf("the body is still in Redis: %v", err)
		}
	}
	e.clock.Add(EventTTL + 24*time.Hour)
	forget()

	// Round 2, as the command and Resend do it: EventMeta finds the event in ClickHouse.
	gotWS, kind, err := st.EventMeta(ctx, openLogs, ev.ID)
	if err != nil || gotWS != ws || kind != KindKeyExpiring {
		t.Fatalf("EventMeta = %s, %q, %v", gotWS, kind, err)
	}
	if err := st.Redeliver(ctx, ep.ID, ev.ID, ws, kind, e.clock.Now()); err != nil {
		t.Fatal(err)
	}
	if n, err := w.RunOnce(ctx); err != nil || n != 1 {
		t.Fatalf("redelivery through EventMeta: RunOnce = %d, %v", n, err)
	}
	// Round 3: the body leaves Redis again before the attempt; the worker reads ClickHouse.
	e.clock.Add(time.Hour)
	if err := st.Redeliver(ctx, ep.ID, ev.ID, ws, kind, e.clock.Now()); err != nil {
		t.Fatal(err)
	}
	forget()
	if n, err := w.RunOnce(ctx); err != nil || n != 1 {
		t.Fatalf("redelivery read by the worker: RunOnce = %d, %v", n, err)
	}

	hits = rcv.Hits()
	if len(hits) != 3 {
		t.Fatalf("the receiver got %d requests, want 3", len(hits))
	}
	for i, h := range hits[1:] {
		round := []string{"through EventMeta", "read by the worker"}[i]
		if string(h.Body) != string(original) {
			t.Fatalf("redelivery %s: body\n%s\nwant the original bytes\n%s", round, h.Body, original)
		}
		if !h.Valid {
			t.Fatalf("redelivery %s: the signature does not verify over <t>.<the bytes received>", round)
		}
		if h.EventID != ids.Format(ids.Event, ev.ID) || h.Attempt != strconv.Itoa(i+2) {
			t.Fatalf("redelivery %s: SVC-Webhook-Id %s attempt %s; want %s, attempt %d", round, h.EventID, h.Attempt,
				ids.Format(ids.Event, ev.ID), i+2)
		}
	}
	rows, err := e.logs.Deliveries(ctx, DeliveryFilter{Event: ev.ID})
	if err != nil {
		t.Fatal(err)
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].Attempt < rows[j].Attempt })
	var got []string
	for _, r := range rows {
		got = append(got, fmt.Sprintf("%d:%s", r.Attempt, r.Outcome))
	}
	if fmt.Sprint(got) != "[1:delivered 2:delivered 3:delivered]" {
		t.Fatalf("delivery log %v; want three attempts delivered", got)
	}
}

// An emitted event's ClickHouse row is what a redelivery after EventTTL sends ("the body
// comes from Redis or, after 30 days, ClickHouse"): when ClickHouse refuses it at
// emission, the row waits in Redis and the worker's next RunOnce writes it, byte for
// byte; the delivery itself is not held up.
func TestOutboundEventRowQueuedWhileClickHouseRefusesIt(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	rcv := newReceiver(t, e.clock, func(w http.ResponseWriter, n int) { w.WriteHeader(200) })
	_, ws, ep := e.endpoint(t, rcv.URL)
	rcv.secret = ep.Secrets[0].Secret
	// The table away: every INSERT into webhook_events fails, as with ClickHouse down.
	if err := e.conn.Exec(ctx, "RENAME TABLE webhook_events TO webhook_events_away"); err != nil {
		t.Fatal(err)
	}
	ev := keyEvent(ws)
	if n, err := e.emitter().Emit(ctx, ev); err != nil || n != 1 {
		t.Fatalf("Emit with webhook_events refusing its row = %d, %v; want the delivery scheduled", n, err)
	}
	if n, _ := e.rdb.LLen(ctx, e.cfg.Prefix+"eventq").Result(); n != 1 {
		t.Fatalf("%d event rows queued in Redis, want 1", n)
	}
	w := e.worker("w")
	if n, err := w.RunOnce(ctx); err != nil || n != 1 {
		t.Fatalf("delivery with webhook_events away: RunOnce = %d, %v", n, err)
	}
	if n, _ := e.rdb.LLen(ctx, e.cfg.Prefix+"eventq").Result(); n != 1 {
		t.Fatalf("after a flush ClickHouse refused: %d rows queued, want the 1 kept", n)
	}
	if err := e.conn.Exec(ctx, "RENAME TABLE webhook_events_away TO webhook_events"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.logs.Event(ctx, ev.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("the event is in ClickHouse before any flush: %v", err)
	}
	if _, err := w.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if n, _ := e.rdb.LLen(ctx, e.cfg.Prefix+"eventq").Result(); n != 0 {
		t.Fatalf("%d event rows still queued after ClickHouse took them", n)
	}
	hits := rcv.Hits()
	if len(hits) != 1 {
		t.Fatalf("the receiver got %d requests, want 1", len(hits))
	}
	se, err := e.logs.Event(ctx, ev.ID)
	if err != nil || string(se.Body) != string(hits[0].Body) || se.Kind != ev.Kind || se.WorkspaceID != ws ||
		!se.CreatedAt.Equal(e.clock.Now().Truncate(time.Second)) {
		t.Fatalf("webhook_events holds %+v (%v); want the body delivered %q, kind %s, workspace %s", se, err, hits[0].Body, ev.Kind, ws)
	}
}

// The delivery log, which every member of the workspace reads, holds no more than a
// short, printable account of a failed request (sendError): an endpoint that answers a
// 60,000-byte malformed header line is logged "malformed response", without the line; a
// host that does not resolve is logged without our resolver's address.
func TestOutboundErrorTextBounded(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_, _ = bufio.NewReader(c).ReadString('\n') // the request line is enough
				_, _ = io.WriteString(c, "HTTP/1.1 500 Oops\r\nX-Foo"+strings.Repeat("B", 60000)+"\r\n\r\n")
			}()
		}
	}()
	st := e.store()
	ws := uuid.New()
	bad, err := st.CreateEndpoint(ctx, ws, "http://"+ln.Addr().String()+"/hook", nil)
	if err != nil {
		t.Fatal(err)
	}
	nowhere, err := st.CreateEndpoint(ctx, ws, "http://no-such-host.invalid/hook", nil)
	if err != nil {
		t.Fatal(err)
	}
	ev := keyEvent(ws)
	if n, err := e.emitter().Emit(ctx, ev); err != nil || n != 2 {
		t.Fatalf("Emit = %d, %v", n, err)
	}
	if n, err := e.worker("w").RunOnce(ctx); err != nil || n != 2 {
		t.Fatalf("RunOnce = %d, %v", n, err)
	}
	if r := lastRow(t, e, bad.ID, ev.ID); r.Outcome != "retry" || !strings.HasPrefix(r.Error, "malformed response") ||
		len(r.Error) > maxErrorText || strings.Contains(r.Error, "BBB") {
		t.Fatalf("malformed answer logged as %q (%d bytes), outcome %s; want a short \"malformed response\"", r.Error[:min(len(r.Error), 120)], len(r.Error), r.Outcome)
	}
	if r := lastRow(t, e, nowhere.ID, ev.ID); !strings.HasPrefix(r.Error, "dns: no-such-host.invalid: ") || strings.Contains(r.Error, ":53") {
		t.Fatalf("unresolvable host logged as %q; want \"dns: no-such-host.invalid: …\" without the resolver", r.Error)
	}
	for in, want := range map[string]string{
		"ok":                            "ok",
		"a\x00b\nc":                     "a?b?c",
		strings.Repeat("é", 150):        strings.Repeat("é", 100) + "…",
		"\xff" + strings.Repeat("x", 5): "?xxxxx",
	} {
		if got := boundText(in); got != want {
			t.Errorf("boundText(%q) = %q, want %q", in[:min(len(in), 20)], got, want)
		}
	}
}
