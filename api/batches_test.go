package api_test

import (
	"context"
	"encoding/hex"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"svc/lib/apikey"
	"svc/lib/ids"
	"svc/lib/svctest"
	"svc/schema"
	"svc/schema/apitest"
	"svc/schema/trace"
	"svc/schema/workspace"
)

// evAt is an event of name that occurred at at, with extra members.
func evAt(name string, at time.Time, extra string) string {
	return fmt.Sprintf(`{"event_name":%q,"occurred_at":%q,"consent":{"measurement":true}%s}`, name, at.UTC().Format(time.RFC3339), extra)
}

// The life of one batch through the whole pipeline: GET /batches/{request_id} says
// when it was received, how many of its events were stored, rejected (by rule) and
// dropped as copies (in the batch by the edge, across batches by the consumer), the
// Kafka record it was written as (the one Kafka holds), when ClickHouse stored it, and
// the local days of the pixel's zone its events counted in; a batch refused whole is
// there too; another workspace's request, an unknown one and a malformed id are 404.
func TestBatchLifeThroughThePipeline(t *testing.T) {
	p := newPipelineOf(t, 100, true)
	tn := p.tenant(t, false)
	ctx := context.Background()
	const zone = "America/New_York"
	if _, err := p.Keys.SetPixelTimeZone(ctx, tn.Pixel.ID, zone); err != nil {
		t.Fatal(err)
	}
	loc, _ := time.LoadLocation(zone)
	now := time.Now().UTC()
	if r := p.Do(t, "POST", "/events", tn.Secret, batch(tn.PixelID(), ev("lead", `,"event_id":"first"`))); r.Status != 202 {
		t.Fatalf("%d %s", r.Status, r.Body)
	}
	old := now.Add(-50 * time.Hour)
	body := batch(tn.PixelID(),
		ev("purchase", `,"event_id":"again"`),
		ev("purchase", `,"event_id":"again"`), // a copy in the batch: the edge
		ev("purchase", `,"value":1,"currency":"EURO"`),
		ev("lead", `,"event_id":"first"`), // a copy of the first batch's: the consumer
		evAt("lead", old, ``))
	r := p.Do(t, "POST", "/events", tn.Secret, body)
	if r.Status != 202 {
		t.Fatalf("%d %s", r.Status, r.Body)
	}
	reqID := r.JSON(t)["request_id"].(string)
	var got map[string]any
	svctest.WaitFor(t, 20*time.Second, "GET /batches/"+reqID+" with the consumer's duplicate", func() bool {
		got = nil
		r := p.get(t, tn.Secret, "/batches/"+reqID, &got)
		if r.Status != 200 && r.Status != 404 {
			t.Fatalf("GET /batches: %d %s", r.Status, r.Body)
		}
		return got != nil && got["accepted"] == 2.0 && got["duplicates"] == 2.0
	})
	// The Kafka record that holds the request.
	var part, off float64 = -1, -1
	for _, rec := range topicRecords(t, p.seeds, schema.TopicEvents) {
		var b schema.Batch
		if err := schema.DecodeBatch(rec.Value, &b); err == nil && b.RequestID == reqID {
			part, off = float64(rec.Partition), float64(rec.Offset)
		}
	}
	days := map[string]float64{}
	days[now.Add(-time.Minute).In(loc).Format(time.DateOnly)] += 1
	days[old.In(loc).Format(time.DateOnly)] += 1
	var wantDays []any
	for _, d := range []time.Time{old, now.Add(-time.Minute)} {
		wantDays = append(wantDays, map[string]any{"date": d.In(loc).Format(time.DateOnly), "events": days[d.In(loc).Format(time.DateOnly)]})
	}
	want := map[string]any{"request_id": reqID, "pixel_id": tn.PixelID(), "pixel_id_uuid": tn.Pixel.ID.String(),
		"key_id": "key_" + tn.Key.ID.String(), "key_id_uuid": tn.Key.ID.String(), "status": 202.0, "events": 5.0,
		"accepted": 2.0, "rejected": 1.0, "rejected_by_rule": map[string]any{"iso4217": 1.0}, "duplicates": 2.0,
		"kafka_partition": part, "kafka_offset": off, "stored_copies": 1.0, "time_zone": zone, "days": wantDays}
	for k, v := range want {
		if fmt.Sprint(got[k]) != fmt.Sprint(v) {
			t.Errorf("%s: %v, want %v (answer %v)", k, got[k], v, got)
		}
	}
	recv, err1 := time.Parse(time.RFC3339, fmt.Sprint(got["received_at"]))
	stored, err2 := time.Parse(time.RFC3339, fmt.Sprint(got["stored_at"]))
	if err1 != nil || err2 != nil || recv.Before(now.Add(-2*time.Second)) || stored.Before(recv) || time.Since(stored) > time.Minute {
		t.Errorf("received_at %v, stored_at %v: want received after %v and stored after it", got["received_at"], got["stored_at"], now)
	}

	// A batch refused whole (no acceptable event) is there too, with nothing stored.
	refused := apitest.Problem(t, p.Do(t, "POST", "/events", tn.Secret, batch(tn.PixelID(), ev("lead", `,"value":1`), `{"event_name":"x"}`)), 422, "invalid_request")
	rid := refused["request_id"].(string)
	svctest.WaitFor(t, 20*time.Second, "GET /batches/"+rid, func() bool {
		got = nil
		return p.get(t, tn.Secret, "/batches/"+rid, &got).Status == 200
	})
	if got["status"] != 422.0 || got["accepted"] != 0.0 || got["rejected"] != 2.0 || got["events"] != 2.0 ||
		got["kafka_partition"] != nil || got["stored_at"] != nil || got["stored_copies"] != 0.0 || len(got["days"].([]any)) != 0 {
		t.Errorf("refused batch: %v", got)
	}

	// 404: another workspace's key, an unknown request id, a malformed one, another kind.
	other := p.tenant(t, false)
	if nf := apitest.Problem(t, p.Do(t, "GET", "/batches/"+reqID, other.Secret, ""), 404, "not_found"); !strings.Contains(fmt.Sprint(nf["detail"]), "poll") ||
		!strings.Contains(fmt.Sprint(nf["suggested_action"]), "poll again") {
		t.Fatalf("a request not on record: %v; want the detail and advice to say a fresh one may not be stored yet", nf)
	}
	for _, id := range []string{"req_0123456789abcdef01234567", "req_zz", "pxl_" + tn.Pixel.ID.String(), reqID + "0"} {
		apitest.Problem(t, p.Do(t, "GET", "/batches/"+id, tn.Secret, ""), 404, "not_found")
	}
	// A sandbox key of a showroom sees none of the live workspace's requests; a key
	// without pixels:read is refused.
	show := p.tenant(t, true)
	apitest.Problem(t, p.Do(t, "GET", "/batches/"+reqID, show.Secret, ""), 404, "not_found")
	_, noScope := p.Key(t, workspace.KeySpec{WorkspaceID: tn.Workspace.ID, Env: apikey.Live, Scopes: []string{"events:write"}})
	apitest.Problem(t, p.Do(t, "GET", "/batches/"+reqID, noScope, ""), 403, "insufficient_scope")
}

// A retry that Kafka took twice (its first edge died after the acknowledgement, before
// it stored the answer; the client retried with the same Idempotency-Key and another
// edge produced it again under a new request id) is stored once, under the first
// request: GET /batches of the retry's request id shows accepted 0, its events as
// duplicates (rule duplicate_batch) and no stored copy, the first request's still one
// copy with every event. Both are looked for within trace.LookBack (8 days): past it,
// 404.
func TestBatchRetriedAsACopyAndTheLookBack(t *testing.T) {
	p := newPipelineOf(t, 100, true)
	var ahead atomic.Int64 // the read API's clock, ahead of the real one by this
	p.API.Now = func() time.Time { return time.Now().Add(time.Duration(ahead.Load())) }
	tn := p.tenant(t, false)
	r := p.Do(t, "POST", "/events", tn.Secret, batch(tn.PixelID(), ev("lead", ""), ev("lead", ""), ev("purchase", "")),
		"Idempotency-Key", "copy-"+hex.EncodeToString(randBytes(4)))
	if r.Status != 202 {
		t.Fatalf("%d %s", r.Status, r.Body)
	}
	first := r.JSON(t)["request_id"].(string)
	life := func(reqID, what string, done func(map[string]any) bool) map[string]any {
		t.Helper()
		var got map[string]any
		svctest.WaitFor(t, 20*time.Second, what, func() bool {
			got = nil
			r := p.get(t, tn.Secret, "/batches/"+reqID, &got)
			if r.Status != 200 && r.Status != 404 {
				t.Fatalf("GET /batches/%s: %d %s", reqID, r.Status, r.Body)
			}
			return got != nil && done(got)
		})
		return got
	}
	life(first, "the first request stored", func(m map[string]any) bool { return m["stored_copies"] == 1.0 })

	// The second copy: the first's record, as another edge produces it for the retry.
	var orig *kgo.Record
	for _, rec := range topicRecords(t, p.seeds, schema.TopicEvents) {
		var b schema.Batch
		if err := schema.DecodeBatch(rec.Value, &b); err == nil && b.RequestID == first {
			orig = rec
		}
	}
	if orig == nil {
		t.Fatal("the first request's record is not in Kafka")
	}
	var b schema.Batch
	if err := schema.DecodeBatch(orig.Value, &b); err != nil {
		t.Fatal(err)
	}
	retry := ids.RequestID()
	b.RequestID = retry
	b.ReceivedAt = time.Now().UnixMilli()
	cl, err := kgo.NewClient(kgo.SeedBrokers(p.seeds...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	dup := &kgo.Record{Topic: schema.TopicEvents, Partition: orig.Partition, Key: orig.Key, Headers: orig.Headers,
		Value: schema.AppendBatch(nil, &b)}
	if err := cl.ProduceSync(context.Background(), dup).FirstErr(); err != nil {
		t.Fatal(err)
	}
	got := life(retry, "the retry's copy counted as duplicates", func(m map[string]any) bool { return m["duplicates"] == 3.0 })
	want := map[string]any{"status": 202.0, "events": 3.0, "accepted": 0.0, "rejected": 0.0, "duplicates": 3.0,
		"stored_copies": 0.0, "kafka_partition": nil, "stored_at": nil}
	for k, v := range want {
		if fmt.Sprint(got[k]) != fmt.Sprint(v) {
			t.Errorf("retry %s: %v, want %v (answer %v)", k, got[k], v, got)
		}
	}
	got = life(first, "the first request", func(map[string]any) bool { return true })
	if got["accepted"] != 3.0 || got["duplicates"] != 0.0 || got["stored_copies"] != 1.0 {
		t.Errorf("first request after the copy: %v", got)
	}

	// The look-back: both are found 2 minutes before it ends, neither 2 minutes after.
	for _, id := range []string{first, retry} {
		ahead.Store(int64(trace.LookBack - 2*time.Minute))
		if r := p.Do(t, "GET", "/batches/"+id, tn.Secret, ""); r.Status != 200 {
			t.Errorf("GET /batches/%s %s ahead: %d %s", id, trace.LookBack-2*time.Minute, r.Status, r.Body)
		}
		ahead.Store(int64(trace.LookBack + 2*time.Minute))
		apitest.Problem(t, p.Do(t, "GET", "/batches/"+id, tn.Secret, ""), 404, "not_found")
	}
}
