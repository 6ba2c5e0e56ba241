package ingest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"svc/lib/apikey"
	"svc/lib/httpserver"
	"svc/lib/kafkabroker"
	"svc/lib/svctest"
	"svc/schema"
	"svc/schema/apitest"
	"svc/schema/workspace"
)

type rig struct {
	*apitest.Server
	bc    kafkabroker.Config
	kafka *kafkabroker.Embedded
	seeds []string
	reg   *prometheus.Registry
}

// counter returns the value of a counter in the edge's registry with the given labels.
func (rg *rig) counter(t *testing.T, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := rg.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if v, ok := labels[lp.GetName()]; ok && v != lp.GetValue() {
					continue next
				}
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}

// newRig starts an embedded broker (persisting to a temp dir), an edge producing to it,
// and an httpserver.Server serving POST /events over the real Redis.
func newRig(t *testing.T) *rig { return newRigWith(t, nil) }

// newRigWith is newRig with the edge's configuration changed by set (nil: unchanged).
func newRigWith(t *testing.T, set func(*Config)) *rig { return newRigServer(t, set, nil) }

// newRigServer is newRigWith with the HTTP server's configuration changed by srv too.
func newRigServer(t *testing.T, set func(*Config), srv func(*httpserver.Config)) *rig {
	bc := kafkabroker.Config{EmbeddedAddr: svctest.FreeAddr(t), DataDir: t.TempDir(), Partitions: 2}
	k, err := kafkabroker.StartEmbedded(bc, schema.Topics...)
	if err != nil {
		t.Fatal(err)
	}
	rg := &rig{bc: bc, kafka: k, seeds: k.Addrs()}
	t.Cleanup(func() { rg.kafka.Close() })
	cfg := Config{DeliveryTimeout: time.Second, MaxBufferedRecords: 1000, Linger: time.Millisecond}
	if set != nil {
		set(&cfg)
	}
	producer, err := NewProducer(bc, rg.seeds, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(producer.Close)
	rg.reg = prometheus.NewRegistry()
	edge := NewEdge(cfg, producer, nil, rg.reg)
	rg.Server = apitest.Start(t, edge.Routes(), srv)
	edge.keys = rg.Keys
	return rg
}

// records reads every record of the events topic.
func (rg *rig) records(t *testing.T) []*kgo.Record {
	return svctest.TopicRecords(t, rg.seeds, schema.TopicEvents)
}

func eventJSON(name, email string, consent bool) string {
	ts := time.Now().UTC().Add(-time.Minute).Format(time.RFC3339)
	id := ""
	if email != "" {
		id = `,"identity":{"email":"` + email + `"}`
	}
	return fmt.Sprintf(`{"event_name":%q,"occurred_at":%q,"value":19.99,"currency":"EUR","consent":{"measurement":%v}%s}`, name, ts, consent, id)
}

func batchJSON(pixel string, events ...string) string {
	return `{"pixel_id":"` + pixel + `","events":[` + strings.Join(events, ",") + `]}`
}

func TestAcceptedBatchReachesKafkaHashed(t *testing.T) {
	rg := newRig(t)
	tn := rg.Tenant(t, false)
	body := batchJSON(tn.PixelID(), eventJSON("purchase", "ada@example.com", true), eventJSON("lead", "bob@example.com", false),
		`{"event_name":"bad"}`)
	r := rg.Do(t, "POST", "/events", tn.Secret, body)
	if r.Status != 202 {
		t.Fatalf("%d %s", r.Status, r.Body)
	}
	m := r.JSON(t)
	if m["accepted"] != 2.0 || m["rejected"] != 1.0 || m["request_id"] != r.Header.Get("Request-Id") {
		t.Fatalf("202 body %s", r.Body)
	}
	rej := m["rejections"].([]any)[0].(map[string]any)
	if rej["index"] != 2.0 || rej["field"] != "occurred_at" || rej["rule"] != "required" {
		t.Fatalf("rejection %v", rej)
	}
	recs := rg.records(t)
	if len(recs) != 1 {
		t.Fatalf("%d records, want 1", len(recs))
	}
	rec := recs[0]
	for _, raw := range []string{"ada@example.com", "bob@example.com"} {
		if bytes.Contains(rec.Value, []byte(raw)) || bytes.Contains(rec.Key, []byte(raw)) {
			t.Fatalf("raw email %s in the record", raw)
		}
		for _, h := range rec.Headers {
			if bytes.Contains(h.Value, []byte(raw)) {
				t.Fatal("raw email in a header")
			}
		}
	}
	var b schema.Batch
	if err := schema.DecodeBatch(rec.Value, &b); err != nil {
		t.Fatal(err)
	}
	if b.Workspace != schema.UUID(tn.Workspace.ID) || b.Pixel != schema.UUID(tn.Pixel.ID) || b.Key != schema.UUID(tn.Key.ID) ||
		!bytes.Equal(rec.Key, tn.Pixel.ID[:]) || b.RequestID != m["request_id"] || b.Sandbox {
		t.Fatalf("record envelope %+v", b)
	}
	if len(b.Events) != 2 || !b.Events[0].HasEmail || b.Events[0].EmailSHA != sha256.Sum256([]byte("ada@example.com")) {
		t.Fatalf("first event %+v", b.Events[0])
	}
	// Known vector, as published on the developer pages.
	if fmt.Sprintf("%x", b.Events[0].EmailSHA) != "b5fc85e55755f9e0d030a10ab4429b6b2944855f9a0d60077fe832becbc41d72" {
		t.Fatalf("sha256(ada@example.com) = %x", b.Events[0].EmailSHA)
	}
	if b.Events[1].HasEmail || b.Events[1].Consent {
		t.Fatal("an unconsented event kept its identity")
	}
	if b.Events[0].Value != 199900 || string(b.Events[0].Currency[:]) != "EUR" {
		t.Fatalf("value %d %s", b.Events[0].Value, b.Events[0].Currency)
	}
	if a, r := rg.counter(t, "svc_ingest_events_total", map[string]string{"outcome": "accepted"}),
		rg.counter(t, "svc_ingest_events_total", map[string]string{"outcome": "rejected", "reason": "required"}); a != 2 || r != 1 {
		t.Fatalf("metrics: accepted %v rejected %v", a, r)
	}
}

func TestPixelMustBelongToTheKeysWorkspace(t *testing.T) {
	rg := newRig(t)
	a, b := rg.Tenant(t, false), rg.Tenant(t, false)
	show := rg.Tenant(t, true)
	ev := eventJSON("purchase", "", true)
	apitest.Problem(t, rg.Do(t, "POST", "/events", a.Secret, batchJSON(b.PixelID(), ev)), 404, "not_found")
	apitest.Problem(t, rg.Do(t, "POST", "/events", show.Secret, batchJSON(a.PixelID(), ev)), 404, "not_found")
	apitest.Problem(t, rg.Do(t, "POST", "/events", a.Secret, batchJSON(show.PixelID(), ev)), 404, "not_found")
	m := apitest.Problem(t, rg.Do(t, "POST", "/events", a.Secret, batchJSON("pxl_nope", ev)), 422, "invalid_request")
	if e := m["errors"].([]any)[0].(map[string]any); e["field"] != "pixel_id" || e["pointer"] != "/pixel_id" {
		t.Fatalf("errors %v", m["errors"])
	}
	// Raw UUID accepted; sandbox key reaches its showroom pixel.
	if r := rg.Do(t, "POST", "/events", a.Secret, batchJSON(a.Pixel.ID.String(), ev)); r.Status != 202 {
		t.Fatalf("raw uuid: %d %s", r.Status, r.Body)
	}
	if r := rg.Do(t, "POST", "/events", show.Secret, batchJSON(show.PixelID(), ev)); r.Status != 202 {
		t.Fatalf("sandbox: %d %s", r.Status, r.Body)
	}
	recs := rg.records(t)
	var sb schema.Batch
	sandboxSeen := false
	for _, rec := range recs {
		if err := schema.DecodeBatch(rec.Value, &sb); err != nil {
			t.Fatal(err)
		}
		sandboxSeen = sandboxSeen || sb.Sandbox
	}
	if len(recs) != 2 || !sandboxSeen {
		t.Fatalf("%d records, sandbox flagged %v", len(recs), sandboxSeen)
	}
}

func TestWholeBatchFailures(t *testing.T) {
	rg := newRig(t)
	tn := rg.Tenant(t, false)
	m := apitest.Problem(t, rg.Do(t, "POST", "/events", tn.Secret, batchJSON(tn.PixelID(), `{"event_name":"x"}`, `{"occurred_at":"nope"}`)), 422, "invalid_request")
	errs := m["errors"].([]any)
	if len(errs) != 2 || errs[1].(map[string]any)["pointer"] != "/events/1/occurred_at" || errs[1].(map[string]any)["rule"] != "iso8601_utc" {
		t.Fatalf("errors %v", errs)
	}
	many := make([]string, 51)
	for i := range many {
		many[i] = eventJSON("e", "", true)
	}
	m = apitest.Problem(t, rg.Do(t, "POST", "/events", tn.Secret, batchJSON(tn.PixelID(), many...)), 422, "invalid_request")
	if e := m["errors"].([]any)[0].(map[string]any); e["rule"] != "max_items" || e["value"] != 51.0 {
		t.Fatalf("errors %v", m["errors"])
	}
	apitest.Problem(t, rg.Do(t, "POST", "/events", tn.Secret, `{"pixel_id":`), 422, "invalid_request")
	apitest.Problem(t, rg.Oversize(t, "POST", "/events", tn.Secret, 1<<20+1), 413, "payload_too_large")
	// Scope.
	_, sec := rg.Key(t, workspace.KeySpec{WorkspaceID: tn.Workspace.ID, Env: apikey.Live, Scopes: []string{"plans:read"}})
	apitest.Problem(t, rg.Do(t, "POST", "/events", sec, batchJSON(tn.PixelID(), eventJSON("e", "", true))), 403, "insufficient_scope")
	apitest.Problem(t, rg.Do(t, "GET", "/events", tn.Secret, ""), 405, "method_not_allowed")
	if n := len(rg.records(t)); n != 0 {
		t.Fatalf("%d records from refused requests", n)
	}
}

func TestIdempotentRetryProducesOnce(t *testing.T) {
	rg := newRig(t)
	tn := rg.Tenant(t, false)
	body := batchJSON(tn.PixelID(), eventJSON("purchase", "ada@example.com", true))
	a := rg.Do(t, "POST", "/events", tn.Secret, body, "Idempotency-Key", "batch-1")
	b := rg.Do(t, "POST", "/events", tn.Secret, body, "Idempotency-Key", "batch-1")
	if a.Status != 202 || b.Status != 202 || string(a.Body) != string(b.Body) || b.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("a=%d %s b=%d %s", a.Status, a.Body, b.Status, b.Body)
	}
	apitest.Problem(t, rg.Do(t, "POST", "/events", tn.Secret, batchJSON(tn.PixelID(), eventJSON("other", "", true)), "Idempotency-Key", "batch-1"), 409, "idempotency_key_reuse")
	recs := rg.records(t)
	if n := len(recs); n != 1 {
		t.Fatalf("%d records, want 1", n)
	}
	// The batch id the consumer deduplicates by (and svc bench forgets by) is
	// BatchID(key, Idempotency-Key).
	want := schema.BatchID(tn.Key.ID, []byte("batch-1"))
	var got []byte
	for _, h := range recs[0].Headers {
		if h.Key == schema.HeaderBatchID {
			got = h.Value
		}
	}
	if string(got) != string(want[:]) {
		t.Fatalf("batch id header %x, want %x", got, want)
	}
}

// TestKafkaDownThenBack: with the broker stopped the edge answers 503 and never 202;
// once it is back, the retried batch is accepted exactly once.
func TestKafkaDownThenBack(t *testing.T) {
	rg := newRig(t)
	tn := rg.Tenant(t, false)
	if r := rg.Do(t, "POST", "/events", tn.Secret, batchJSON(tn.PixelID(), eventJSON("warm", "", true))); r.Status != 202 {
		t.Fatalf("warm-up: %d", r.Status)
	}
	rg.kafka.Close()
	body := batchJSON(tn.PixelID(), eventJSON("during-outage", "", true))
	r := rg.Do(t, "POST", "/events", tn.Secret, body, "Idempotency-Key", "outage-1")
	m := apitest.Problem(t, r, 503, "service_unavailable")
	if m["retryable"] != true || r.Header.Get("Retry-After") == "" {
		t.Fatalf("503 must be retryable with Retry-After: %v", m)
	}
	k, err := kafkabroker.StartEmbedded(rg.bc, schema.Topics...)
	if err != nil {
		t.Fatal(err)
	}
	rg.kafka = k
	deadline := time.Now().Add(20 * time.Second)
	for {
		r = rg.Do(t, "POST", "/events", tn.Secret, body, "Idempotency-Key", "outage-1")
		if r.Status == 202 {
			break
		}
		if r.Status != 503 && r.Status != 409 || time.Now().After(deadline) {
			t.Fatalf("retry: %d %s", r.Status, r.Body)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if again := rg.Do(t, "POST", "/events", tn.Secret, body, "Idempotency-Key", "outage-1"); again.Status != 202 || string(again.Body) != string(r.Body) {
		t.Fatalf("replay after recovery: %d", again.Status)
	}
	count := 0
	var b schema.Batch
	for _, rec := range rg.records(t) {
		if err := schema.DecodeBatch(rec.Value, &b); err != nil {
			t.Fatal(err)
		}
		if b.Events[0].Name == "during-outage" {
			count++
		}
	}
	if count != 1 {
		t.Fatalf("the retried batch is in Kafka %d times, want exactly 1", count)
	}
}

// outageCall is one request of TestKafkaOutageFailsFast.
type outageCall struct {
	start, end time.Time
	status     int
	retryAfter string
	name       string
}

// postTimed sends one batch of a single event named name, without failing the test
// from a goroutine.
func (rg *rig) postTimed(secret, pixel, name string) outageCall {
	c := outageCall{start: time.Now(), name: name}
	req, _ := http.NewRequest("POST", rg.URL+"/events", strings.NewReader(batchJSON(pixel, eventJSON(name, "", true))))
	req.Header.Set("Authorization", "Bearer "+secret)
	req.Header.Set("Content-Type", "application/json")
	resp, err := rg.Client.Do(req)
	if err == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		c.status, c.retryAfter = resp.StatusCode, resp.Header.Get("Retry-After")
	}
	c.end = time.Now()
	return c
}

// TestKafkaOutageFailsFast (issue 13): while the broker is down, new requests get 503
// service_unavailable with Retry-After at once instead of waiting out the delivery
// timeout one after another; within 1 s of the broker's return the edge accepts again;
// every batch answered 202 is in Kafka exactly once.
func TestKafkaOutageFailsFast(t *testing.T) {
	rg := newRig(t)
	tn := rg.Tenant(t, false)
	_, secret := rg.Key(t, workspace.KeySpec{WorkspaceID: tn.Workspace.ID, Env: apikey.Live, Burst: 100000, Daily: 10000000})
	var (
		mu    sync.Mutex
		calls []outageCall
	)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			c := rg.postTimed(secret, tn.PixelID(), fmt.Sprintf("outage-%d", i))
			mu.Lock()
			calls = append(calls, c)
			mu.Unlock()
			time.Sleep(10 * time.Millisecond)
		}
	}()
	time.Sleep(300 * time.Millisecond)
	downAt := time.Now()
	rg.kafka.Close()
	time.Sleep(2 * time.Second)
	k, err := kafkabroker.StartEmbedded(rg.bc, schema.Topics...)
	if err != nil {
		t.Fatal(err)
	}
	rg.kafka = k
	backAt := time.Now()
	time.Sleep(1500 * time.Millisecond)
	close(stop)
	<-done

	defer func() {
		if t.Failed() {
			for _, c := range calls {
				t.Logf("%s: started %s after the outage began, %d in %s", c.name, c.start.Sub(downAt), c.status, c.end.Sub(c.start))
			}
		}
	}()
	fast, firstOK := 0, time.Time{}
	for _, c := range calls {
		switch {
		case c.end.Before(downAt) && c.status != 202:
			t.Fatalf("%s before the outage: %d", c.name, c.status)
		case c.start.After(downAt.Add(400*time.Millisecond)) && c.start.Before(backAt.Add(-100*time.Millisecond)):
			if c.status != 503 || c.retryAfter == "" || c.end.Sub(c.start) > 100*time.Millisecond {
				t.Fatalf("%s during the outage: %d Retry-After %q in %s, want a 503 with Retry-After within 100ms",
					c.name, c.status, c.retryAfter, c.end.Sub(c.start))
			}
			fast++
		case c.status == 202 && c.start.After(downAt) && firstOK.IsZero():
			firstOK = c.end
		}
	}
	t.Logf("%d calls; %d fast 503s during the outage; first 202 %s after the broker's return", len(calls), fast, firstOK.Sub(backAt))
	if fast < 10 {
		t.Fatalf("only %d requests answered during the outage", fast)
	}
	if firstOK.IsZero() || firstOK.Sub(backAt) > time.Second {
		t.Fatalf("first 202 after the outage %s after the broker's return, want within 1s", firstOK.Sub(backAt))
	}
	promised := map[string]int{}
	for _, c := range calls {
		if c.status == 202 {
			promised[c.name] = 0
		}
	}
	var b schema.Batch
	for _, rec := range rg.records(t) {
		if err := schema.DecodeBatch(rec.Value, &b); err != nil {
			t.Fatal(err)
		}
		if _, ok := promised[b.Events[0].Name]; ok {
			promised[b.Events[0].Name]++
		}
	}
	for name, n := range promised {
		if n != 1 {
			t.Fatalf("%s was answered 202 and is in Kafka %d times, want 1", name, n)
		}
	}
}

// TestBrokerHealthTransitions: a failed probe marks Kafka down (and closes WentDown), a
// kick probes at once, and the first probe that succeeds marks it up and runs recovered.
func TestBrokerHealthTransitions(t *testing.T) {
	var fail atomic.Bool
	recovered := make(chan struct{}, 4)
	h := startHealth(func(context.Context) error {
		if fail.Load() {
			return errors.New("unreachable")
		}
		return nil
	}, func() { recovered <- struct{}{} }, nil, time.Hour, time.Second, slog.Default())
	defer h.Stop()
	wentDown := h.WentDown()
	fail.Store(true)
	h.Kick()
	select {
	case <-wentDown:
	case <-time.After(2 * time.Second):
		t.Fatal("a kick with Kafka unreachable did not mark it down")
	}
	if !h.Down() {
		t.Fatal("WentDown closed but Down is false")
	}
	fail.Store(false)
	h.Kick()
	select {
	case <-recovered:
	case <-time.After(2 * time.Second):
		t.Fatal("a kick with Kafka back did not mark it up")
	}
	if h.Down() {
		t.Fatal("recovered but Down is true")
	}
	select {
	case <-h.WentDown():
		t.Fatal("WentDown is closed while up")
	default:
	}
}

// TestSlowBodyAttackOnTheEdge is issue 13's measurement: 1,000 connections without
// credentials announce a 1 MiB batch to POST /events, send one byte and stall. Each is
// answered 401 on its headers and costs the edge at most 16 KiB of heap (it cost the
// announced megabyte until the read timeout); a request under way meanwhile is served.
func TestSlowBodyAttackOnTheEdge(t *testing.T) {
	rg := newRig(t)
	tn := rg.Tenant(t, false)
	const n = 1000
	base := apitest.HeapInuse()
	rg.StallBodies(t, "/events", "", n, 1<<20)
	growth := apitest.PeakHeapGrowth(base)
	t.Logf("heap growth %d KiB over %d connections: %d B each", growth>>10, n, growth/n)
	if growth/n > 16<<10 {
		t.Fatalf("each unauthenticated connection costs the edge %d B of heap, want at most 16 KiB", growth/n)
	}
	if r := rg.Do(t, "POST", "/events", tn.Secret, batchJSON(tn.PixelID(), eventJSON("during", "", true))); r.Status != 202 {
		t.Fatalf("a batch during the attack: %d %s", r.Status, r.Body)
	}
}

// TestEventIDTwiceInOneBatchIsOneEvent: an event_id sent twice in one batch is one
// event: the first accepted copy goes to Kafka, the second is refused in the 202 with
// rule duplicate_event_id and counted in duplicates (and in rejected: accepted +
// rejected is every event sent). A copy that is itself invalid is refused for that
// reason, and does not hide a later valid copy.
func TestEventIDTwiceInOneBatchIsOneEvent(t *testing.T) {
	rg := newRig(t)
	tn := rg.Tenant(t, false)
	ts := time.Now().UTC().Add(-10 * time.Minute).Format(time.RFC3339)
	ev := func(id string, value int) string {
		return fmt.Sprintf(`{"event_id":%q,"event_name":"purchase","occurred_at":%q,"value":%d,"currency":"EUR","consent":{"measurement":true}}`, id, ts, value)
	}
	body := batchJSON(tn.PixelID(), `{"event_id":"order-2","event_name":"purchase"}`, ev("order-1", 10), ev("order-2", 5),
		ev("order-1", 99), ev("order-3", 1), ev("order-1", 7))
	r := rg.Do(t, "POST", "/events", tn.Secret, body)
	if r.Status != 202 {
		t.Fatalf("%d %s", r.Status, r.Body)
	}
	m := r.JSON(t)
	if m["accepted"] != 3.0 || m["rejected"] != 3.0 || m["duplicates"] != 2.0 {
		t.Fatalf("202 body %s: want 3 accepted, 3 rejected of which 2 duplicates", r.Body)
	}
	var dups []int
	for _, x := range m["rejections"].([]any) {
		rj := x.(map[string]any)
		if rj["rule"] == "duplicate_event_id" {
			if rj["field"] != "event_id" || rj["value"] != "order-1" {
				t.Errorf("rejection %v", rj)
			}
			dups = append(dups, int(rj["index"].(float64)))
		}
	}
	if fmt.Sprint(dups) != "[3 5]" {
		t.Fatalf("duplicate_event_id at %v, want [3 5]: %s", dups, r.Body)
	}
	recs := rg.records(t)
	var b schema.Batch
	if len(recs) != 1 || schema.DecodeBatch(recs[0].Value, &b) != nil || len(b.Events) != 3 {
		t.Fatalf("%d records, %d events; want one record of 3", len(recs), len(b.Events))
	}
	if b.Events[0].ID != schema.ClientEventID([]byte("order-1")) || b.Events[0].Value != 100000 ||
		b.Events[1].ID != schema.ClientEventID([]byte("order-2")) {
		t.Fatalf("events %+v", b.Events)
	}
	// The record says that some of its events carry a client id; one without says none.
	if v := headerOf(recs[0], schema.HeaderClientIDs); v != "1" {
		t.Fatalf("header %s = %q, want 1", schema.HeaderClientIDs, v)
	}
	if r := rg.Do(t, "POST", "/events", tn.Secret, batchJSON(tn.PixelID(), eventJSON("purchase", "", true))); r.Status != 202 {
		t.Fatalf("%d %s", r.Status, r.Body)
	}
	if recs := rg.records(t); len(recs) != 2 || headerOf(recs[1], schema.HeaderClientIDs) != "0" {
		t.Fatalf("%d records; a batch without event_id has header %s = %q, want 0", len(recs), schema.HeaderClientIDs, headerOf(recs[len(recs)-1], schema.HeaderClientIDs))
	}
	if d := rg.counter(t, "svc_ingest_events_total", map[string]string{"outcome": "rejected", "reason": "duplicate_event_id"}); d != 2 {
		t.Fatalf("svc_ingest_events_total{reason=duplicate_event_id} %v, want 2", d)
	}
}

func headerOf(r *kgo.Record, key string) string {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return "(absent)"
}
