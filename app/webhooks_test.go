package app

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"svc/lib/ids"
	"svc/lib/process"
	"svc/schema/webhook"
)

// webhooksRig is the application with the webhooks role's state under a private prefix.
func webhooksRig(t *testing.T) *rig {
	rg := newRig(t, false)
	prefix := "test:appwh:" + uuid.NewString()[:8] + ":"
	rg.app.Webhooks = newWebhookStore(rg.Redis, WebhookConfig{Prefix: prefix})
	t.Cleanup(func() { _, _ = process.UnlinkPattern(context.Background(), rg.Redis, prefix+"*") })
	return rg
}

// The Webhooks screens change endpoints through schema/webhook: create (the secret
// shown once; internal addresses refused with the policy's reason), rotate, disable,
// enable, resend a delivery (a new round in the schedule); the delivery log with its
// attempts, codes and refusals; the inbound secret (shown once) and log. Each change is
// in the audit log; a viewer is refused every change; another workspace's endpoint is
// 404, as its events are.
func TestWebhooksScreens(t *testing.T) {
	rg := webhooksRig(t)
	ctx := context.Background()
	st := rg.app.Webhooks
	ws, other := rg.Workspace(t, false), rg.Workspace(t, false)
	adm := rg.member(t, ws, uniqueEmail("admin"), RoleAdmin)

	// Internal addresses are refused, with the reason; nothing is created.
	for _, u := range []string{"http://127.0.0.1:8123/?query=SELECT+1", "http://169.254.169.254/latest/meta-data", "http://localhost/", "http://10.1.2.3/"} {
		p := adm.post("/app/webhooks", "/app/webhooks", url.Values{"url": {u}})
		if p.Status != 422 || !strings.Contains(p.Body, "address_not_allowed") {
			t.Fatalf("%s: %d\n%s", u, p.Status, p.Body)
		}
	}
	if eps, _ := st.Endpoints(ctx, ws.ID); len(eps) != 0 {
		t.Fatalf("%d endpoints after refusals", len(eps))
	}
	if p := adm.get("/app/webhooks"); !strings.Contains(p.Body, "loopback, private, link-local") {
		t.Fatalf("the screen does not state the address policy:\n%s", p.Body)
	}

	// Create: the secret once, the endpoint in the store.
	p := adm.post("/app/webhooks", "/app/webhooks", url.Values{"url": {"https://hooks.example.com/svc?token=t0ken"}, "kind": {webhook.KindKeyExpiring}})
	secret := secretOf(t, p)
	eps, err := st.Endpoints(ctx, ws.ID)
	if err != nil || len(eps) != 1 || eps[0].Secrets[0].Secret != secret || eps[0].Kinds[0] != webhook.KindKeyExpiring {
		t.Fatalf("endpoints %+v %v", eps, err)
	}
	ep := eps[0]
	eid := ids.Format(ids.Endpoint, ep.ID)
	if p := adm.get("/app/webhooks/" + eid); p.Status != 200 || strings.Contains(p.Body, secret) || !strings.Contains(p.Body, "No deliveries yet") {
		t.Fatalf("the endpoint's page: %d\n%s", p.Status, p.Body)
	}

	// Rotate: a new secret, both sign during the overlap.
	p = adm.post("/app/webhooks/"+eid, "/app/webhooks/"+eid+"/rotate", url.Values{"overlap": {"1h"}})
	secret2 := secretOf(t, p)
	if e, _ := st.Endpoint(ctx, ep.ID); secret2 == secret || len(e.SigningSecrets(time.Now())) != 2 || e.Secrets[0].Secret != secret2 {
		t.Fatalf("after the rotation: %+v", e.Secrets)
	}

	// The delivery log: an event's attempts (one refused by the address policy, one
	// answered 500), grouped, with codes and errors; resend starts a new round.
	ev := uuid.New()
	body := `{"id":"` + ids.Format(ids.Event, ev) + `","type":"key.expiring","workspace_id_uuid":"` + ws.ID.String() + `"}`
	if _, _, err := st.PutEvent(ctx, ev, []byte(body)); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Enqueue(ctx, ep.ID, ev, ws.ID, webhook.KindKeyExpiring, time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	logs, err := rg.app.webhookLogs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC().Truncate(time.Second)
	next := now.Add(time.Hour)
	if err := logs.InsertDeliveries(ctx, []webhook.DeliveryRow{
		{WorkspaceID: ws.ID, EndpointID: ep.ID, EventID: ev, Kind: webhook.KindKeyExpiring, Attempt: 1, AttemptedAt: now.Add(-time.Minute),
			Outcome: webhook.Retry, Error: "address_not_allowed: 10.0.0.7 is private", NextAttemptAt: &now, Worker: "test"},
		{WorkspaceID: ws.ID, EndpointID: ep.ID, EventID: ev, Kind: webhook.KindKeyExpiring, Attempt: 2, AttemptedAt: now,
			StatusCode: 500, LatencyMS: 12, Outcome: webhook.Retry, NextAttemptAt: &next, Worker: "test"},
	}); err != nil {
		t.Fatal(err)
	}
	p = adm.get("/app/webhooks/" + eid)
	for _, want := range []string{ids.Format(ids.Event, ev), "address_not_allowed: 10.0.0.7 is private", `data-status="500"`, `data-attempt="2"`, "resend-" + ids.Format(ids.Event, ev)} {
		if !strings.Contains(p.Body, want) {
			t.Fatalf("the deliveries lack %q:\n%s", want, p.Body)
		}
	}
	resend := "/app/webhooks/" + eid + "/deliveries/" + ids.Format(ids.Event, ev) + "/resend"
	if p := adm.post("/app/webhooks/"+eid, resend, url.Values{}); p.Status != 303 {
		t.Fatalf("resend: %d\n%s", p.Status, p.Body)
	}
	if d, err := st.Delivery(ctx, ep.ID, ev); err != nil || d.State != "pending" || d.NextAt == nil || d.NextAt.After(time.Now().Add(time.Second)) {
		t.Fatalf("after the resend: %+v %v (want pending, due now)", d, err)
	}

	// Disable, enable.
	if p := adm.post("/app/webhooks/"+eid, "/app/webhooks/"+eid+"/disable", url.Values{}); p.Status != 303 {
		t.Fatalf("disable: %d", p.Status)
	}
	if p := adm.post("/app/webhooks/"+eid, "/app/webhooks/"+eid+"/disable", url.Values{}); p.Status != 303 {
		t.Fatalf("disable: %d", p.Status)
	}
	if e, _ := st.Endpoint(ctx, ep.ID); e.Enabled() {
		t.Fatal("still enabled")
	}
	if p := adm.post("/app/webhooks/"+eid, resend, url.Values{}); p.Status != 409 {
		t.Fatalf("resend to a disabled endpoint: %d", p.Status)
	}
	for i := 0; i < 2; i++ { // the second finds it enabled: no change, no entry in the audit log
		if p := adm.post("/app/webhooks/"+eid, "/app/webhooks/"+eid+"/enable", url.Values{}); p.Status != 303 {
			t.Fatalf("enable %d: %d", i+1, p.Status)
		}
	}
	if e, _ := st.Endpoint(ctx, ep.ID); !e.Enabled() {
		t.Fatal("still disabled")
	}

	// The inbound secret: shown once, then only its id; the log's outcomes.
	p = adm.post("/app/webhooks/inbound", "/app/webhooks/inbound/secret", url.Values{"overlap": {"24h"}})
	inSecret := secretOf(t, p)
	if ss, _ := st.InboundSecrets(ctx, ws.ID); len(ss) != 1 || ss[0].Secret != inSecret {
		t.Fatalf("inbound secrets %+v", ss)
	}
	if err := logs.InsertInbound(ctx, webhook.InboundRow{WorkspaceID: ws.ID, MessageID: "msg_1", ReceivedAt: now, Type: "actuals.reported",
		Outcome: webhook.Failed, Reason: "invalid_signature", Status: 401, RequestID: "req_1"}); err != nil {
		t.Fatal(err)
	}
	p = adm.get("/app/webhooks/inbound")
	if strings.Contains(p.Body, inSecret) || !strings.Contains(p.Body, "invalid_signature") || !strings.Contains(p.Body, "/v1/webhooks/inbound/"+ids.Format(ids.Org, ws.ID)) {
		t.Fatalf("the inbound page:\n%s", p.Body)
	}
	if p := adm.get("/app/webhooks/inbound?outcome=processed"); strings.Contains(p.Body, "invalid_signature") {
		t.Fatal("the filter shows a failed message under processed")
	}

	// The audit log has every change, under the admin commands' names, never a secret
	// or the URL's query.
	entries, err := rg.app.Audit.List(ctx, ws.ID, 100)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, e.Action+" "+e.Target+" "+e.Detail)
	}
	all := strings.Join(got, "\n")
	for _, want := range []string{"webhook endpoint create " + eid + " host=hooks.example.com kinds=key.expiring", "webhook endpoint rotate-secret " + eid,
		"webhook redeliver " + eid + " event=" + ids.Format(ids.Event, ev), "webhook endpoint disable " + eid, "webhook endpoint enable " + eid, "webhook inbound-secret"} {
		if !strings.Contains(all, want) {
			t.Fatalf("the audit log lacks %q:\n%s", want, all)
		}
	}
	for _, once := range []string{"webhook endpoint disable " + eid, "webhook endpoint enable " + eid} {
		if n := strings.Count(all, once); n != 1 {
			t.Fatalf("%q %d times in the audit log, want once", once, n)
		}
	}
	for _, leak := range []string{secret, secret2, inSecret, "t0ken"} {
		if strings.Contains(all, leak) {
			t.Fatalf("the audit log holds %q", leak)
		}
	}

	// A viewer sees, without forms, and is refused every change.
	viewer := rg.member(t, ws, uniqueEmail("viewer"), RoleViewer)
	if p := viewer.get("/app/webhooks/" + eid); p.Status != 200 || strings.Contains(p.Body, "rotate-submit") || strings.Contains(p.Body, "resend-") {
		t.Fatalf("the viewer's page: %d", p.Status)
	}
	// A viewer sees where deliveries go, not the receiver's path or token in it; the admin
	// sees the whole URL.
	for _, page := range []string{"/app/webhooks/" + eid, "/app/webhooks"} {
		if p := viewer.get(page); strings.Contains(p.Body, "t0ken") || !strings.Contains(p.Body, "https://hooks.example.com/…") {
			t.Fatalf("the viewer's %s shows the URL's path or query", page)
		}
	}
	if p := adm.get("/app/webhooks/" + eid); !strings.Contains(p.Body, "t0ken") {
		t.Fatalf("the admin's page hides the URL: %d", p.Status)
	}
	for _, path := range []string{"/app/webhooks", "/app/webhooks/" + eid + "/rotate", "/app/webhooks/" + eid + "/disable", resend, "/app/webhooks/inbound/secret"} {
		if p := viewer.post("/app/webhooks", path, url.Values{"url": {"https://x.example.com/"}, "overlap": {"0s"}}); p.Status != 403 {
			t.Fatalf("a viewer's POST %s: %d", path, p.Status)
		}
	}
	if e, _ := st.Endpoint(ctx, ep.ID); !e.Enabled() || e.Secrets[0].Secret != secret2 {
		t.Fatal("a viewer changed the endpoint")
	}

	// Another workspace's endpoint, an unknown one, a malformed id: 404; and this
	// endpoint with another workspace's event.
	oep, err := st.CreateEndpoint(ctx, other.ID, "https://other.example.com/", nil)
	if err != nil {
		t.Fatal(err)
	}
	oid := ids.Format(ids.Endpoint, oep.ID)
	for _, path := range []string{"/app/webhooks/" + oid, "/app/webhooks/" + ids.Format(ids.Endpoint, uuid.New()), "/app/webhooks/whk_nope"} {
		if p := adm.get(path); p.Status != 404 {
			t.Fatalf("GET %s: %d", path, p.Status)
		}
	}
	if p := adm.post("/app/webhooks/"+eid, "/app/webhooks/"+oid+"/disable", url.Values{}); p.Status != 404 {
		t.Fatalf("disabling another workspace's endpoint: %d", p.Status)
	}
	if e, _ := st.Endpoint(ctx, oep.ID); !e.Enabled() {
		t.Fatal("another workspace's endpoint was disabled")
	}
	oev := uuid.New()
	if _, _, err := st.PutEvent(ctx, oev, []byte(`{"type":"key.expiring","workspace_id_uuid":"`+other.ID.String()+`"}`)); err != nil {
		t.Fatal(err)
	}
	if p := adm.post("/app/webhooks/"+eid, "/app/webhooks/"+eid+"/deliveries/"+ids.Format(ids.Event, oev)+"/resend", url.Values{}); p.Status != 404 {
		t.Fatalf("resending another workspace's event: %d", p.Status)
	}
}
