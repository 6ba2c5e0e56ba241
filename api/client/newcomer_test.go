package client_test

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	json "github.com/goccy/go-json"
	"github.com/prometheus/client_golang/prometheus"

	"svc/api/client"
	"svc/lib/kafkabroker"
	"svc/lib/signature"
	"svc/rollup"
	"svc/schema"
)

// TestNewcomerFromDiscovery follows what a newcomer has: a key, the discovery document
// (which needs that key) and what it links. From /.well-known/svc it finds the base URL
// and the OpenAPI document; sends the documented POST /events example (with its own
// pixel and the current time); reads the event back from GET /pixel-rollups once the
// pipeline has rolled it up; and verifies a webhook signed the way the discovery
// document says.
func TestNewcomerFromDiscovery(t *testing.T) {
	rg := newRig(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- rollup.Run(ctx, rollup.Config{Group: "newcomer", BatchRows: 1000, BatchInterval: 50 * time.Millisecond,
			RetryMin: 20 * time.Millisecond, RetryMax: 300 * time.Millisecond, InsertTimeout: 5 * time.Second,
			RevokeTimeout: 3 * time.Second, SessionTimeout: 3 * time.Second, RebalanceTimeout: 10 * time.Second,
			Table: "events", Topic: schema.TopicEvents, DeadTopic: schema.TopicDeadEvent,
			Kafka:      kafkabroker.Config{Brokers: rg.seeds, EmbeddedAddr: "127.0.0.1:0", Partitions: 1},
			ClickHouse: rg.ch, Registerer: prometheus.NewRegistry()})
	}()
	t.Cleanup(func() { cancel(); <-done })
	tn := rg.Tenant(t, false)

	disc := rg.Do(t, "GET", "/.well-known/svc", tn.Secret, "").JSON(t)
	base := disc["base_url"].(string)
	oaURL := disc["openapi"].(string)
	var oa map[string]any
	if err := json.Unmarshal(rg.Do(t, "GET", strings.TrimPrefix(oaURL, rg.URL), "", "").Body, &oa); err != nil {
		t.Fatal(err)
	}
	post := oa["paths"].(map[string]any)["/events"].(map[string]any)["post"].(map[string]any)
	example := post["requestBody"].(map[string]any)["content"].(map[string]any)["application/json"].(map[string]any)["example"].(map[string]any)
	example["pixel_id"] = tn.PixelID()
	ev := example["events"].([]any)[0].(map[string]any)
	ev["occurred_at"] = time.Now().UTC().Format(time.RFC3339)
	if post["x-required-scope"] != "events:write" || post["x-rateLimit"] == nil {
		t.Fatalf("POST /events documents scope %v, limits %v", post["x-required-scope"], post["x-rateLimit"])
	}

	c := client.New(base, tn.Secret)
	resp, err := c.Do(context.Background(), "POST", "/events", example, client.NewIdempotencyKey())
	if err != nil {
		t.Fatal(err)
	}
	if resp.Status != 202 || !strings.Contains(string(resp.Body), `"accepted":1`) {
		t.Fatalf("POST /events: %d %s", resp.Status, resp.Body)
	}

	q := url.Values{"pixel_id": {tn.PixelID()}}
	deadline := time.Now().Add(60 * time.Second)
	for {
		rows, err := client.List[client.Object](c, "/pixel-rollups", q).All(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) == 1 && rows[0]["events"] == float64(1) {
			if rows[0]["event_name"] != ev["event_name"] || rows[0]["currency"] != ev["currency"] || rows[0]["unique_people"] != float64(1) {
				t.Fatalf("rollup %v does not match the event sent", rows[0])
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the event never appeared in GET /pixel-rollups: %v", rows)
		}
		time.Sleep(200 * time.Millisecond)
	}

	sig := disc["auth"].(map[string]any)["webhook_signatures"].(map[string]any)
	if sig["header"] != signature.Header || sig["tolerance_seconds"] != float64(300) {
		t.Fatalf("discovery's webhook signatures: %v", sig)
	}
	body := []byte(`{"type":"rollup.day_closed","data":{}}`)
	secret := []byte("whsec_newcomer")
	if err := client.VerifyWebhook(signature.Value(time.Now().Unix(), body, secret), body, time.Now(), secret); err != nil {
		t.Fatal(err)
	}
}
