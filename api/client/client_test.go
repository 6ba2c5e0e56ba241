package client_test

import (
	"context"
	"errors"
	"fmt"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"svc/api"
	"svc/api/client"
	"svc/api/docs"
	"svc/ingest"
	"svc/lib/apikey"
	"svc/lib/chpool"
	"svc/lib/kafkabroker"
	"svc/lib/limits"
	"svc/lib/signature"
	"svc/schema"
	"svc/schema/apitest"
	"svc/schema/catalog"
	"svc/schema/chtest"
	"svc/schema/workspace"
)

// rig is the real service in-process: the ingest edge producing to an embedded broker,
// and the read API over a private ClickHouse database holding the showroom, on one
// httpserver.Server over the real Redis.
type rig struct {
	*apitest.Server
	ch    chpool.Config
	conn  driver.Conn
	seeds []string
}

func newRig(t *testing.T) *rig {
	t.Helper()
	ch, conn := chtest.NewDB(t)
	rdb := apitest.Redis(t)
	bc := kafkabroker.Config{EmbeddedAddr: "127.0.0.1:0", DataDir: t.TempDir(), Partitions: 1}
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
	edge := ingest.NewEdge(icfg, producer, workspace.NewStore(rdb), prometheus.NewRegistry())
	a := &api.API{Conn: conn}
	s := apitest.Start(t, append(append(edge.Routes(), a.Routes()...), docs.Routes()...), nil)
	a.Keys = s.Keys
	if _, err := catalog.SeedShowroom(context.Background(), s.Keys, conn); err != nil {
		t.Fatal(err)
	}
	return &rig{Server: s, ch: ch, conn: conn, seeds: k.Addrs()}
}

// attempt is one HTTP exchange the client made.
type attempt struct {
	method, path, idemKey string
	status                int
}

// recorder is an http.RoundTripper that records every attempt and can lose the
// response of chosen attempts (the request reaches the server; the client sees a
// connection error), as a flaky network does.
type recorder struct {
	mu       sync.Mutex
	attempts []attempt
	lose     func(n int, r *http.Request) bool
}

func (rc *recorder) RoundTrip(r *http.Request) (*http.Response, error) {
	rc.mu.Lock()
	n := len(rc.attempts)
	rc.mu.Unlock()
	resp, err := http.DefaultTransport.RoundTrip(r)
	a := attempt{method: r.Method, path: r.URL.Path, idemKey: r.Header.Get("Idempotency-Key")}
	if err == nil {
		a.status = resp.StatusCode
	}
	rc.mu.Lock()
	rc.attempts = append(rc.attempts, a)
	rc.mu.Unlock()
	if err == nil && rc.lose != nil && rc.lose(n, r) {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return nil, errors.New("connection reset by peer (simulated: the response was lost)")
	}
	return resp, err
}

func (rc *recorder) log() []attempt {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]attempt(nil), rc.attempts...)
}

func (rg *rig) client(secret string, rc *recorder) *client.Client {
	c := client.New(rg.URL+"/v1", secret)
	c.HTTP = &http.Client{Transport: rc, Timeout: 30 * time.Second}
	c.BaseDelay = 20 * time.Millisecond
	return c
}

func TestSendEventsReusesOneKeyAcrossRetries(t *testing.T) {
	rg := newRig(t)
	tn := rg.Tenant(t, false)
	rc := &recorder{lose: func(n int, r *http.Request) bool { return n == 0 }}
	c := rg.client(tn.Secret, rc)
	batch := client.Batch{PixelID: tn.PixelID(), Events: []client.Event{{
		EventName: "purchase", OccurredAt: time.Now().UTC(), Value: 49.9, Currency: "EUR",
		Consent: client.Consent{Measurement: true}, Email: "  Ada@Example.com ",
	}}}
	res, err := c.SendEvents(context.Background(), batch)
	if err != nil {
		t.Fatal(err)
	}
	if res.Accepted != 1 || res.Rejected != 0 || res.Attempts != 2 || !res.Replayed {
		t.Fatalf("result %+v: want 1 accepted, answered on the 2nd attempt from the first one's record", res)
	}
	log := rc.log()
	if len(log) != 2 || log[0].status != 202 || log[0].idemKey == "" || log[1].idemKey != log[0].idemKey || res.IdempotencyKey != log[0].idemKey {
		t.Fatalf("attempts %+v: want two with the same Idempotency-Key", log)
	}
	// The next logical batch gets its own key and is counted on its own.
	res2, err := c.SendEvents(context.Background(), batch)
	if err != nil {
		t.Fatal(err)
	}
	if res2.Replayed || res2.IdempotencyKey == res.IdempotencyKey || res2.Accepted != 1 {
		t.Fatalf("second batch %+v", res2)
	}
}

func TestProblemsAreTypedAndOnlyRetryableOnesRetried(t *testing.T) {
	rg := newRig(t)
	tn := rg.Tenant(t, false)
	_, secret := rg.Key(t, workspace.KeySpec{WorkspaceID: tn.Workspace.ID, Env: apikey.Live, Scopes: []string{"events:write"}})
	rc := &recorder{}
	c := rg.client(secret, rc)
	err := c.Get(context.Background(), "/plans", nil, nil)
	var p *client.Problem
	if !errors.As(err, &p) || p.Code != "insufficient_scope" || p.Status != 403 || p.RequiredScope != "plans:read" ||
		p.Retryable || !strings.HasSuffix(p.DocURL, "/developers/errors/insufficient_scope") || !strings.HasPrefix(p.RequestID, "req_") {
		t.Fatalf("GET /plans without the scope: %v", err)
	}
	if n := len(rc.log()); n != 1 {
		t.Fatalf("a non-retryable problem was sent %d times", n)
	}
	var events []client.Event
	for i := 0; i < client.MaxBatch+1; i++ {
		events = append(events, client.Event{EventName: "view", OccurredAt: time.Now(), Consent: client.Consent{Measurement: false}})
	}
	_, err = c.SendEvents(context.Background(), client.Batch{PixelID: tn.PixelID(), Events: events})
	if !errors.As(err, &p) || p.Code != "invalid_request" || len(p.Errors) == 0 || p.Errors[0].Rule != "max_items" {
		t.Fatalf("51 events: %v", err)
	}
	bad := client.New(rg.URL+"/v1", "svc_live_not_a_key")
	if err := bad.Get(context.Background(), "/me", nil, nil); !errors.As(err, &p) || p.Code != "invalid_key" {
		t.Fatalf("bad key: %v", err)
	}
}

// spend takes n requests of k's windows straight from the limiter (as other processes
// using the key would), fast enough that almost nothing refills meanwhile.
func spend(t *testing.T, rg *rig, k apikey.Key, n int) {
	t.Helper()
	b, d := limits.Windows(k.Burst, k.Daily)
	for i := 0; i < n; i++ {
		if _, err := rg.Deps.Limits.Take(context.Background(), k.ID.String(), b, d); err != nil {
			t.Fatal(err)
		}
	}
}

func TestRetryAfterIsHonoured(t *testing.T) {
	rg := newRig(t)
	tn := rg.Tenant(t, false)
	k, secret := rg.Key(t, workspace.KeySpec{WorkspaceID: tn.Workspace.ID, Env: apikey.Live, Burst: 120})
	spend(t, rg, k, 122)
	rc := &recorder{}
	c := rg.client(secret, rc)
	c.PaceBelow = -1 // no pacing: meet the 429
	start := time.Now()
	if err := c.Get(context.Background(), "/me", nil, nil); err != nil {
		t.Fatal(err)
	}
	log := rc.log()
	if len(log) < 2 || log[0].status != 429 || log[len(log)-1].status != 200 {
		t.Fatalf("attempts %+v: want a 429 then success", log)
	}
	if el := time.Since(start); el < 900*time.Millisecond {
		t.Fatalf("retried after %s, before Retry-After", el)
	}
}

func TestPacingKeepsClearOfTheLimit(t *testing.T) {
	rg := newRig(t)
	tn := rg.Tenant(t, false)
	k, secret := rg.Key(t, workspace.KeySpec{WorkspaceID: tn.Workspace.ID, Env: apikey.Live, Burst: 120})
	spend(t, rg, k, 116)
	rc := &recorder{}
	c := rg.client(secret, rc)
	start := time.Now()
	for i := 0; i < 8; i++ {
		if err := c.Get(context.Background(), "/me", nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	for _, a := range rc.log() {
		if a.status != 200 {
			t.Fatalf("attempts %+v: pacing should have avoided every refusal", rc.log())
		}
	}
	if el := time.Since(start); el < 2*time.Second {
		t.Fatalf("8 requests with few remaining took %s: not paced", el)
	}
}

func TestIteratorFollowsNextCursor(t *testing.T) {
	rg := newRig(t)
	ws, err := rg.Keys.Workspace(context.Background(), catalog.ShowroomWorkspace)
	if err != nil {
		t.Fatal(err)
	}
	_, secret := rg.Key(t, workspace.KeySpec{WorkspaceID: ws.ID, Env: apikey.Sandbox, Burst: 10000, Daily: 100000})
	c := rg.client(secret, &recorder{})
	var all struct {
		Data []client.Object `json:"data"`
	}
	if err := c.Get(context.Background(), "/plans", url.Values{"limit": {"1000"}}, &all); err != nil {
		t.Fatal(err)
	}
	if len(all.Data) < 2 {
		t.Fatalf("showroom has %d plans; the walk needs several", len(all.Data))
	}
	got, err := client.List[client.Object](c, "/plans", url.Values{"limit": {"1"}}).All(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	seen := map[any]bool{}
	for _, p := range got {
		if seen[p["id"]] {
			t.Fatalf("plan %v listed twice", p["id"])
		}
		seen[p["id"]] = true
	}
	if len(got) != len(all.Data) {
		t.Fatalf("walked %d plans by cursor, %d in one page", len(got), len(all.Data))
	}
	for _, p := range all.Data {
		if !seen[p["id"]] {
			t.Fatalf("plan %v missing from the walk", p["id"])
		}
	}
	// Started at an offset (deprecated, still served), the walk goes on by cursor.
	rest, err := client.List[client.Object](c, "/plans", url.Values{"limit": {"1"}, "offset": {"1"}}).All(context.Background())
	if err != nil || len(rest) != len(all.Data)-1 {
		t.Fatalf("walked %d plans from offset 1 (%v), want %d", len(rest), err, len(all.Data)-1)
	}
}

func TestVerifyWebhook(t *testing.T) {
	body := []byte(`{"id":"evt_1","type":"rollup.day_closed","data":{}}`)
	old, cur := []byte("whsec_old"), []byte("whsec_current")
	now := time.Now()
	// The service's own signer, with two secrets while one rotates.
	h := signature.Value(now.Unix(), body, old, cur)
	if err := client.VerifyWebhook(h, body, now, cur); err != nil {
		t.Fatalf("valid signature: %v", err)
	}
	if err := client.VerifyWebhook(h, append([]byte(nil), append(body, ' ')...), now, cur); !errors.Is(err, client.ErrSignatureMismatch) {
		t.Fatalf("tampered body: %v", err)
	}
	if err := client.VerifyWebhook(h, body, now, []byte("other")); !errors.Is(err, client.ErrSignatureMismatch) {
		t.Fatalf("wrong secret: %v", err)
	}
	if err := client.VerifyWebhook(h, body, now.Add(301*time.Second), cur); !errors.Is(err, client.ErrSignatureTimestamp) {
		t.Fatalf("stale: %v", err)
	}
	if err := client.VerifyWebhook(h, body, now.Add(-301*time.Second), cur); !errors.Is(err, client.ErrSignatureTimestamp) {
		t.Fatalf("from the future: %v", err)
	}
	for _, bad := range []string{"v1=00", "t=abc,v1=" + strings.Repeat("0", 64), fmt.Sprintf("t=%d", now.Unix()), "garbage"} {
		if err := client.VerifyWebhook(bad, body, now, cur); !errors.Is(err, client.ErrSignatureMalformed) {
			t.Errorf("%q: %v", bad, err)
		}
	}
	if err := client.VerifyWebhook("", body, now, cur); !errors.Is(err, client.ErrSignatureMissing) {
		t.Errorf("empty header: %v", err)
	}
	// And the service accepts what the client signs (partners sending inbound messages).
	if err := signature.Verify(client.SignWebhook(cur, now, body), body, [][]byte{cur}, now, signature.Tolerance); err != nil {
		t.Fatalf("the service rejects the client's signature: %v", err)
	}
}

// ImportActuals sends a row without spend as the API documents it (absent: 0), not as
// an empty amount the API refuses.
func TestImportActualsWithoutSpend(t *testing.T) {
	rg := newRig(t)
	ctx := context.Background()
	_, secret := rg.Key(t, workspace.KeySpec{WorkspaceID: catalog.ShowroomWorkspace, Env: apikey.Sandbox, Burst: 100, Daily: 1000,
		Scopes: []string{"plans:read", "actuals:write"}})
	c := rg.client(secret, &recorder{})
	var plans struct {
		Data []client.Object `json:"data"`
	}
	if err := c.Get(ctx, "/plans", url.Values{"limit": {"1"}}, &plans); err != nil || len(plans.Data) == 0 {
		t.Fatalf("plans: %v %v", plans.Data, err)
	}
	planID := plans.Data[0]["id"].(string)
	var lines struct {
		Data []client.Object `json:"data"`
	}
	if err := c.Get(ctx, "/plans/"+planID+"/lines", nil, &lines); err != nil || len(lines.Data) == 0 {
		t.Fatalf("lines: %v %v", lines.Data, err)
	}
	res, err := c.ImportActuals(ctx, []client.ActualsRow{{PlanID: planID, LineID: lines.Data[0]["id"].(string), Date: "2026-09-14", Impressions: 10, Currency: "EUR"}}, "")
	if err != nil || res.Upserted != 1 {
		t.Fatalf("import without spend: %+v %v", res, err)
	}
}
