package ingest

import (
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"svc/lib/apikey"
	"svc/lib/svctest"
	"svc/schema"
	"svc/schema/apitest"
	"svc/schema/workspace"
)

// A dry run answers 200 with the body a 202 carries, runs every check (Idempotency-Key
// shape, pixel ownership, events' rules), spends one request like any request, and
// stores and produces nothing: nothing reaches Kafka (so nothing can reach ClickHouse),
// and its Idempotency-Key is neither reserved nor answered from.
func TestDryRunChecksEverythingAndStoresNothing(t *testing.T) {
	rg := newRig(t)
	tn := rg.Tenant(t, false)
	withID := strings.Replace(eventJSON("signup", "", true), `{`, `{"event_id":"order-1",`, 1)
	body := batchJSON(tn.PixelID(), eventJSON("purchase", "ada@example.com", true), `{"event_name":"bad"}`,
		strings.Replace(eventJSON("lead", "", true), `"EUR"`, `"EURO"`, 1), withID, withID)
	dry := rg.Do(t, "POST", "/events?validate_only=true", tn.Secret, body, "Idempotency-Key", "dry-1")
	if dry.Status != 200 || dry.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("dry run: %d %s", dry.Status, dry.Body)
	}
	if n := len(rg.records(t)); n != 0 {
		t.Fatalf("a dry run produced %d records", n)
	}
	// The same batch for real, with the same Idempotency-Key: it runs (the dry run
	// reserved nothing) and carries the same fields.
	real := rg.Do(t, "POST", "/events", tn.Secret, body, "Idempotency-Key", "dry-1")
	if real.Status != 202 || real.Header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("real run after the dry run: %d %v %s", real.Status, real.Header, real.Body)
	}
	dm, rm := dry.JSON(t), real.JSON(t)
	if dm["request_id"] != dry.Header.Get("Request-Id") || dm["request_id"] == rm["request_id"] {
		t.Fatalf("request ids: dry %v (header %s), real %v", dm["request_id"], dry.Header.Get("Request-Id"), rm["request_id"])
	}
	delete(dm, "request_id")
	delete(rm, "request_id")
	if !reflect.DeepEqual(dm, rm) || dm["accepted"] != 2.0 || dm["duplicates"] != 1.0 {
		t.Fatalf("dry run body %v, real 202 body %v", dm, rm)
	}
	if n := len(rg.records(t)); n != 1 {
		t.Fatalf("%d records after one real request", n)
	}
	// A dry run after it, with the same key, is checked afresh: no replay of the stored
	// 202, a request id of its own, nothing produced.
	again := rg.Do(t, "POST", "/events?validate_only=true", tn.Secret, body, "Idempotency-Key", "dry-1")
	if again.Status != 200 || again.Header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("dry run after the real one: %d %v %s", again.Status, again.Header, again.Body)
	}
	if am := again.JSON(t); am["request_id"] == real.JSON(t)["request_id"] || am["accepted"] != 2.0 {
		t.Fatalf("dry run after the real one answered %v (the real 202: %s)", am, real.Body)
	}
	if n := len(rg.records(t)); n != 1 {
		t.Fatalf("%d records after a dry run that followed the real request", n)
	}

	// Quota: a 200 spends one request, a 4xx none (as for any request).
	remaining := func(r apitest.Response) int {
		n, err := strconv.Atoi(r.Header.Get("RateLimit-Remaining"))
		if err != nil {
			t.Fatalf("RateLimit-Remaining %q", r.Header.Get("RateLimit-Remaining"))
		}
		return n
	}
	a := rg.Do(t, "POST", "/events?validate_only=true", tn.Secret, body)
	b := rg.Do(t, "POST", "/events?validate_only=true", tn.Secret, body)
	if a.Status != 200 || b.Status != 200 || remaining(b) != remaining(a)-1 {
		t.Fatalf("two dry runs: %d %d, remaining %s then %s", a.Status, b.Status, a.Header.Get("RateLimit-Remaining"), b.Header.Get("RateLimit-Remaining"))
	}
	bad := rg.Do(t, "POST", "/events?validate_only=true", tn.Secret, batchJSON(tn.PixelID(), `{"event_name":"bad"}`))
	apitest.Problem(t, bad, 422, "invalid_request")
	if remaining(bad) != remaining(b) {
		t.Fatalf("a refused dry run spent quota: remaining %d then %d", remaining(b), remaining(bad))
	}

	// Every check: the Idempotency-Key's shape, the parameter, the pixel's owner, the scope.
	p := apitest.Problem(t, rg.Do(t, "POST", "/events?validate_only=true", tn.Secret, body, "Idempotency-Key", strings.Repeat("k", 256)), 422, "invalid_request")
	if errs, _ := json.Marshal(p["errors"]); !strings.Contains(string(errs), `"Idempotency-Key"`) {
		t.Fatalf("long Idempotency-Key: %v", p)
	}
	p = apitest.Problem(t, rg.Do(t, "POST", "/events?validate_only=yes", tn.Secret, body), 422, "invalid_request")
	if errs, _ := json.Marshal(p["errors"]); !strings.Contains(string(errs), `"rule":"boolean"`) {
		t.Fatalf("validate_only=yes: %v", p)
	}
	other := rg.Tenant(t, false)
	apitest.Problem(t, rg.Do(t, "POST", "/events?validate_only=true", tn.Secret, batchJSON(other.PixelID(), eventJSON("x", "", true))), 404, "not_found")
	_, readOnly := rg.Key(t, workspace.KeySpec{WorkspaceID: tn.Workspace.ID, Env: apikey.Live, Scopes: []string{"pixels:read"}})
	apitest.Problem(t, rg.Do(t, "POST", "/events?validate_only=true", readOnly, body), 403, "insufficient_scope")
	if f := rg.Do(t, "POST", "/events?validate_only=false", tn.Secret, body); f.Status != 202 {
		t.Fatalf("validate_only=false: %d %s", f.Status, f.Body)
	}
	if n := len(rg.records(t)); n != 2 {
		t.Fatalf("%d records after two real requests", n)
	}
}

// A dry run does not touch Kafka: while Kafka fails every batch (a real request is
// answered 503), the same batch as a dry run is answered 200, and nothing is produced.
func TestDryRunAnswersWhileKafkaFails(t *testing.T) {
	rg := newRig(t)
	tn := rg.Tenant(t, false)
	fault := rg.kafka.Cluster().Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: schema.TopicEvents,
		Err: kerr.InvalidRecord, Count: -1})
	defer fault.Remove()
	body := batchJSON(tn.PixelID(), eventJSON("purchase", "", true))
	apitest.Problem(t, rg.Do(t, "POST", "/events", tn.Secret, body), 503, "service_unavailable")
	if r := rg.Do(t, "POST", "/events?validate_only=true", tn.Secret, body); r.Status != 200 || r.JSON(t)["accepted"] != 1.0 {
		t.Fatalf("dry run while Kafka fails: %d %s", r.Status, r.Body)
	}
	if n := len(rg.records(t)); n != 0 {
		t.Fatalf("%d records, want none", n)
	}
}

// A dry run is paced by the key's windows like any request: once they are spent (the
// daily quota, or the burst), a dry run gets 429 (quota_exceeded, rate_limited) with
// Retry-After, as a real request does then. A dry run's 429 is not kept for GET
// /rejections; a real request's is.
func TestDryRunRefusedOnceTheWindowsAreSpent(t *testing.T) {
	rg := newRig(t)
	tn := rg.Tenant(t, false)
	body := batchJSON(tn.PixelID(), eventJSON("purchase", "", true))
	_, daily := rg.Key(t, workspace.KeySpec{WorkspaceID: tn.Workspace.ID, Env: apikey.Live, Burst: 100, Daily: 2})
	_, burst := rg.Key(t, workspace.KeySpec{WorkspaceID: tn.Workspace.ID, Env: apikey.Live, Burst: 1, Daily: 1000})
	for _, c := range []struct {
		name, secret, code string
		allowed            int
	}{{"daily quota of 2", daily, "quota_exceeded", 2}, {"burst of 1", burst, "rate_limited", 1}} {
		for i := range c.allowed {
			if r := rg.Do(t, "POST", "/events?validate_only=true", c.secret, body); r.Status != 200 {
				t.Fatalf("%s: dry run %d: %d %s", c.name, i+1, r.Status, r.Body)
			}
		}
		r := rg.Do(t, "POST", "/events?validate_only=true", c.secret, body)
		apitest.Problem(t, r, 429, c.code)
		if r.Header.Get("Retry-After") == "" || r.Header.Get("RateLimit-Remaining") != "0" {
			t.Fatalf("%s: the dry run's 429 without Retry-After or RateLimit-Remaining 0: %v", c.name, r.Header)
		}
	}
	time.Sleep(300 * time.Millisecond) // a record of the refusals would be acknowledged by now
	if recs := rg.rejectionRecords(t); len(recs) != 0 {
		t.Fatalf("the dry runs' 429s left %d rejection records (%+v)", len(recs), recs)
	}
	real := rg.Do(t, "POST", "/events", daily, body)
	apitest.Problem(t, real, 429, "quota_exceeded")
	svctest.WaitFor(t, 5*time.Second, "the real request's refusal recorded", func() bool { return len(rg.rejectionRecords(t)) == 1 })
	if n := len(rg.records(t)); n != 0 {
		t.Fatalf("%d records of events after dry runs and a refused request", n)
	}
}
