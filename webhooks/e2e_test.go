package webhooks

import (
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	json "github.com/goccy/go-json"
	"github.com/google/uuid"

	"svc/lib/signature"
	"svc/lib/svctest"
	"svc/schema/apitest"
	"svc/schema/chtest"
)

// TestBinaryBothDirections runs the built `svc webhooks` with the admin commands, as an
// operator would: an inbound secret, a signed partner message (processed, then its
// replay ignored, both in inbound-log), an endpoint, a key expiring in two days whose
// key.expiring event is delivered after one failure, the attempts in `webhook
// deliveries`, a redelivery, and a clean exit on SIGTERM.
func TestBinaryBothDirections(t *testing.T) {
	svctest.SkipShort(t)
	apitest.Redis(t)
	cc, conn := chtest.NewDB(t)
	addr := svctest.FreeAddr(t)
	prefix := "test:wh:e2e:" + uuid.NewString()[:8] + ":"
	t.Cleanup(func() { cleanPrefix(apitest.Redis(t), prefix) })
	env := append(os.Environ(), "SVC_METRICS_ADDR=off", "SVC_REDIS_URL="+apitest.RedisURL(),
		"SVC_CLICKHOUSE_ADDR="+cc.Addr, "SVC_CLICKHOUSE_DB="+cc.Database, "SVC_WEBHOOKS_REDIS_PREFIX="+prefix,
		"SVC_WEBHOOKS_POLL=50ms", "SVC_WEBHOOKS_SCAN_INTERVAL=200ms", "SVC_WEBHOOKS_SCHEDULE=0s,1s,1h",
		"SVC_WEBHOOKS_ALLOW_NETS=127.0.0.0/8") // the receiver is an httptest server on loopback
	run := func(args ...string) map[string]any {
		t.Helper()
		return svctest.RunJSON(t, env, args...)
	}

	clock := &fakeClock{t: time.Now()}
	rcv := newReceiver(t, clock, func(w http.ResponseWriter, n int) {
		if n == 1 {
			w.WriteHeader(503)
			return
		}
		w.WriteHeader(200)
	})
	ws := run("admin", "workspace", "create", "--name", "webhooks e2e")["id"].(string)
	secret := run("admin", "webhook", "inbound-secret", "--workspace", ws)["secret"].(string)
	ep := run("admin", "webhook", "endpoint", "create", "--workspace", ws, "--url", rcv.URL+"/hook", "--kinds", KindKeyExpiring)
	rcv.secret = ep["secret"].(string)
	exp := time.Now().Add(48 * time.Hour).UTC().Format(time.RFC3339)
	run("admin", "key", "create", "--workspace", ws, "--env", "live", "--scopes", "events:write", "--expires", exp)

	srv := svctest.Start(t, env, addr, "webhooks")
	srv.WaitReady(t, 30*time.Second)

	cmp := uuid.New()
	putCampaigns(t, conn, uuid.MustParse(strings.TrimPrefix(ws, "org_")), cmp)
	body := fmt.Sprintf(`{"type":"actuals.reported","data":{"campaign_id":"cmp_%s","currency":"EUR","days":[{"date":"%s","impressions":5}]}}`,
		cmp, time.Now().UTC().AddDate(0, 0, -1).Format("2006-01-02"))
	for i, want := range []string{Processed, Ignored} {
		req, _ := http.NewRequest("POST", "http://"+addr+"/v1/webhooks/inbound/"+ws, strings.NewReader(body))
		req.Header.Set(signature.Header, signature.Value(time.Now().Unix(), []byte(body), []byte(secret)))
		req.Header.Set(signature.MessageIDHeader, "e2e-1")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		json.NewDecoder(resp.Body).Decode(&m)
		resp.Body.Close()
		if resp.StatusCode != 200 || m["outcome"] != want {
			t.Fatalf("message %d: %d %v", i+1, resp.StatusCode, m)
		}
	}
	// The replay's row is queued and written within a second (inboundlog.go).
	var logRows []any
	svctest.WaitFor(t, 10*time.Second, "both messages in inbound-log", func() bool {
		logRows = run("admin", "webhook", "inbound-log", "--workspace", ws)["data"].([]any)
		return len(logRows) == 2
	})

	svctest.WaitFor(t, 20*time.Second, "key.expiring delivered after one failure", func() bool { return len(rcv.Hits()) >= 2 })
	hits := rcv.Hits()
	if hits[0].EventID != hits[1].EventID || hits[1].Attempt != "2" || !hits[1].Valid {
		t.Fatalf("deliveries %+v", hits)
	}
	var dl []any
	svctest.WaitFor(t, 10*time.Second, "two rows in webhook deliveries", func() bool {
		dl = run("admin", "webhook", "deliveries", "--event", hits[0].EventID)["data"].([]any)
		return len(dl) == 2
	})
	run("admin", "webhook", "redeliver", hits[0].EventID)
	// The redelivery is the workspace's change: its audit log has it.
	if audit := run("admin", "audit", "list", "--workspace", ws)["data"].([]any); len(audit) == 0 ||
		audit[0].(map[string]any)["action"] != "webhook redeliver" {
		t.Fatalf("the workspace's audit log after a redelivery: %v", audit)
	}
	svctest.WaitFor(t, 10*time.Second, "redelivery", func() bool { return len(rcv.Hits()) == 3 })
	if h := rcv.Hits()[2]; h.EventID != hits[0].EventID || h.Attempt != "3" || string(h.Body) != string(hits[0].Body) {
		t.Fatalf("redelivery %+v", h)
	}

	if err := srv.Stop(t, 30*time.Second); err != nil {
		t.Fatalf("svc webhooks after SIGTERM: %v\n%s", err, srv.Output())
	}
	for _, s := range []string{secret, rcv.secret} {
		if strings.Contains(srv.Output(), s) {
			t.Fatal("a secret reached the log")
		}
	}
}
