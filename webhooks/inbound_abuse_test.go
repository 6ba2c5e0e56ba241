package webhooks

import (
	"context"
	"net/netip"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"svc/lib/httpserver"
	"svc/lib/signature"
	"svc/schema/apitest"
	"svc/schema/catalog"
	"svc/schema/workspace"
)

// TestInboundContentReplayUnderNewID: the signature covers "<t>.<body>", not the
// message id, so a captured message resent under a new SVC-Webhook-Id within the
// tolerance is still the same signed content. It is ignored, does not overwrite the
// correction sent after it, and does not burn the id it borrowed.
func TestInboundContentReplayUnderNewID(t *testing.T) {
	ie := newInbound(t)
	ctx := context.Background()
	sec := ie.secret(t)
	cmp := uuid.New()
	putCampaigns(t, ie.conn, ie.ws, cmp)
	day := ie.clock.Now().AddDate(0, 0, -2).Format("2006-01-02")
	impressions := func() int64 {
		t.Helper()
		as, err := catalog.CampaignActuals(ctx, ie.conn, ie.ws, cmp, catalog.ActualsQuery{Limit: 10})
		if err != nil || len(as) != 1 {
			t.Fatalf("actuals %+v, %v", as, err)
		}
		return int64(as[0].Impressions)
	}

	// The partner reports 100, then corrects it to 150 under a new id a minute later.
	t0 := ie.clock.Now()
	first := reported(cmp, day, 100, "10")
	firstSig := signature.Value(t0.Unix(), []byte(first), []byte(sec))
	if r := ie.srv.Do(t, "POST", ie.path, "", first, signature.Header, firstSig, signature.MessageIDHeader, "rep-1"); r.JSON(t)["outcome"] != Processed {
		t.Fatalf("first: %d %s", r.Status, r.Body)
	}
	ie.clock.Add(time.Minute)
	if r := ie.send(t, reported(cmp, day, 150, "15"), "rep-2", ie.clock.Now(), sec); r.JSON(t)["outcome"] != Processed {
		t.Fatalf("correction: %d %s", r.Status, r.Body)
	}
	// The content's guard outlives every instant at which a copy passes the signature
	// check: up to 2 × tolerance after the first arrival (t0 - tolerance).
	ttl, err := ie.rdb.TTL(ctx, ie.in.Store.contentKey(ie.ws, signature.Digest(t0.Unix(), []byte(first)))).Result()
	if err != nil || ttl < 2*ie.cfg.Tolerance {
		t.Fatalf("content guard TTL %s (%v), want at least %s", ttl, err, 2*ie.cfg.Tolerance)
	}
	// A message id is remembered for the replay window (30 days by default: TestConfigFromEnv).
	if ttl, err := ie.rdb.TTL(ctx, ie.in.Store.msgKey(ie.ws, "rep-2")).Result(); err != nil || ttl < ie.cfg.ReplayWindow-time.Hour || ttl > ie.cfg.ReplayWindow {
		t.Fatalf("message id guard TTL %s (%v), want %s", ttl, err, ie.cfg.ReplayWindow)
	}
	// An attacker resends the first message, byte for byte with its header, as new ids,
	// up to the end of the tolerance.
	for i, id := range []string{"rep-3", "rep-4"} {
		if i == 1 {
			ie.clock.Set(t0.Add(ie.cfg.Tolerance))
		}
		r := ie.srv.Do(t, "POST", ie.path, "", first, signature.Header, firstSig, signature.MessageIDHeader, id)
		if r.Status != 200 || r.JSON(t)["outcome"] != Ignored {
			t.Fatalf("replay as %s: %d %s", id, r.Status, r.Body)
		}
	}
	if n := impressions(); n != 150 {
		t.Fatalf("the replay overwrote the correction: impressions %d, want 150", n)
	}
	// The borrowed id is not burnt: the partner's own rep-3 is processed.
	if r := ie.send(t, reported(cmp, day, 175, "17"), "rep-3", ie.clock.Now(), sec); r.JSON(t)["outcome"] != Processed {
		t.Fatalf("the partner's rep-3 after the replay: %d %s", r.Status, r.Body)
	}
	if n := impressions(); n != 175 {
		t.Fatalf("impressions %d, want 175", n)
	}
}

// TestInboundFailuresThrottled: 400 unsigned posts from one address. Past the bound
// the address gets 429 rate_limited with Retry-After before any other work, and no
// row: webhook_inbound holds at most the bound of rows. The failures are counted by
// reason. Another address (behind a trusted proxy) is not affected.
func TestInboundFailuresThrottled(t *testing.T) {
	ie := newInboundWith(t, func(c *httpserver.Config) { c.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")} })
	reg := prometheus.NewRegistry()
	ie.in.Metrics = NewMetrics(reg)
	sec := ie.secret(t)
	bound := ie.cfg.InboundFailureBurst
	body := `{"type":"partner.ping","data":{}}`
	status := map[int]int{}
	for i := range 400 {
		r := ie.srv.Do(t, "POST", ie.path, "", body, signature.MessageIDHeader, "flood-"+strconv.Itoa(i))
		status[r.Status]++
		if r.Status == 429 {
			apitest.Problem(t, r, 429, "rate_limited")
			if ra, _ := strconv.Atoi(r.Header.Get("Retry-After")); ra < 1 {
				t.Fatalf("429 with Retry-After %q", r.Header.Get("Retry-After"))
			}
		}
	}
	if status[401] != bound || status[429] != 400-bound {
		t.Fatalf("answers %v: want %d × 401 then 429", status, bound)
	}
	// Even a good message from the throttled address waits; another address does not.
	good := `{"type":"partner.ping","data":{"n":1}}`
	sig := signature.Value(ie.clock.Now().Unix(), []byte(good), []byte(sec))
	apitest.Problem(t, ie.srv.Do(t, "POST", ie.path, "", good, signature.Header, sig, signature.MessageIDHeader, "good-1"), 429, "rate_limited")
	if r := ie.srv.Do(t, "POST", ie.path, "", good, signature.Header, sig, signature.MessageIDHeader, "good-1",
		"X-Forwarded-For", "198.51.100.7"); r.Status != 200 {
		t.Fatalf("another address: %d %s", r.Status, r.Body)
	}
	// The bucket refills: one interval later, one more failure is let through.
	ie.clock.Add(time.Minute / time.Duration(ie.cfg.InboundFailuresPerMinute))
	apitest.Problem(t, ie.srv.Do(t, "POST", ie.path, "", body, signature.MessageIDHeader, "late-1"), 401, "invalid_signature")
	apitest.Problem(t, ie.srv.Do(t, "POST", ie.path, "", body, signature.MessageIDHeader, "late-2"), 429, "rate_limited")

	ie.flush(t)
	rows, err := ie.logs.Inbound(context.Background(), ie.ws, Failed, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != bound+1 { // every failure let through is logged, none of the throttled
		t.Fatalf("%d failed rows in webhook_inbound, want %d", len(rows), bound+1)
	}
	want := map[string]float64{"invalid_signature": float64(bound + 1), "throttled": float64(400 - bound + 2)}
	if got := counterValues(t, reg, "svc_webhooks_inbound_failures_total", "reason"); got["invalid_signature"] != want["invalid_signature"] ||
		got["throttled"] != want["throttled"] {
		t.Fatalf("svc_webhooks_inbound_failures_total %v, want %v", got, want)
	}
}

// TestInboundLogRetention: the trigger scan removes the inbound log's months older
// than the retention (30 days by default) and keeps the rest.
func TestInboundLogRetention(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	ws := uuid.New()
	now := e.clock.Now()
	for i, at := range []time.Time{now.AddDate(0, -4, 0), now.AddDate(0, -3, 0), now.Add(-time.Hour)} {
		if err := e.logs.InsertInbound(ctx, InboundRow{WorkspaceID: ws, MessageID: "ret-" + strconv.Itoa(i), ReceivedAt: at,
			Outcome: Failed, Reason: "test", Status: 401}); err != nil {
			t.Fatal(err)
		}
	}
	tr := &Triggers{Config: e.cfg, Emitter: e.emitter(), Keys: workspace.NewStore(e.rdb), Conn: e.conn, Log: e.log, Now: e.clock.Now}
	if err := tr.ScanOnce(ctx); err != nil {
		t.Fatal(err)
	}
	rows, err := e.logs.Inbound(ctx, ws, "", 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || rows[0].MessageID != "ret-2" {
		t.Fatalf("after retention: %+v, want only ret-2", rows)
	}
}

// counterValues gathers a counter vector from reg: label value → count.
func counterValues(t *testing.T, reg *prometheus.Registry, name, label string) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == label {
					out[lp.GetValue()] += m.GetCounter().GetValue()
				}
			}
		}
	}
	return out
}
