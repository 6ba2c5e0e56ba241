package ingest

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"svc/lib/apikey"
	"svc/lib/svctest"
	"svc/schema"
	"svc/schema/apitest"
	"svc/schema/rejection"
	"svc/schema/workspace"
)

// topicRecords reads every record of topic.
func (rg *rig) topicRecords(t *testing.T, topic string) []*kgo.Record {
	return svctest.TopicRecords(t, rg.seeds, topic)
}

// rejectionRecords decodes every record of the rejections topic.
func (rg *rig) rejectionRecords(t *testing.T) []rejection.Record {
	t.Helper()
	var out []rejection.Record
	for _, r := range rg.topicRecords(t, schema.TopicRejections) {
		var d rejection.Record
		if err := rejection.Decode(r.Value, &d); err != nil {
			t.Fatal(err)
		}
		if string(r.Key) != string(d.Pixel[:]) {
			t.Fatalf("record key %x, pixel %x", r.Key, d.Pixel)
		}
		out = append(out, d)
	}
	return out
}

// A 202 with rejected events writes one rejection record (request id, key, pixel,
// entries, identity values withheld) once its batch landed; a refusal of a known pixel
// (422, 429) writes one too; a pixel of another workspace, a clean 202 and a dry run
// write none.
func TestRejectionRecordsOnTheTopic(t *testing.T) {
	rg := newRig(t)
	tn := rg.Tenant(t, false)
	good := eventJSON("purchase", "", true)
	if r := rg.Do(t, "POST", "/events", tn.Secret, batchJSON(tn.PixelID(), good)); r.Status != 202 {
		t.Fatalf("%d %s", r.Status, r.Body)
	}
	if r := rg.Do(t, "POST", "/events?validate_only=true", tn.Secret, batchJSON(tn.PixelID(), good, `{"event_name":"x"}`)); r.Status != 200 {
		t.Fatalf("%d %s", r.Status, r.Body)
	}
	if n := len(rg.rejectionRecords(t)); n != 0 {
		t.Fatalf("%d rejection records after a clean batch and a dry run", n)
	}
	bad := eventJSON("lead", "Ada@Example.com", true)
	r := rg.Do(t, "POST", "/events", tn.Secret, batchJSON(tn.PixelID(), good, bad))
	if r.Status != 202 {
		t.Fatalf("%d %s", r.Status, r.Body)
	}
	// Handed to the producer after the batch's acknowledgement, before the 202.
	svctest.WaitFor(t, 5*time.Second, "the 202's record", func() bool { return len(rg.rejectionRecords(t)) >= 1 })
	recs := rg.rejectionRecords(t)
	if len(recs) != 1 {
		t.Fatalf("%d rejection records, want 1", len(recs))
	}
	d := recs[0]
	if d.RequestID != r.Header.Get("Request-Id") || d.Status != 202 || d.Events != 2 || d.Key != schema.UUID(tn.Key.ID) ||
		d.Workspace != schema.UUID(tn.Workspace.ID) || d.Pixel != schema.UUID(tn.Pixel.ID) || len(d.Entries) != 1 {
		t.Fatalf("record %+v", d)
	}
	if e := d.Entries[0]; e.Index != 1 || e.Field != "identity.email" || e.Rule != "normalised" || e.Value != rejection.Withheld {
		t.Fatalf("entry %+v", e)
	}
	if strings.Contains(strings.ToLower(string(rg.topicRecords(t, schema.TopicRejections)[0].Value)), "example.com") {
		t.Fatal("the record holds the address")
	}

	apitest.Problem(t, rg.Do(t, "POST", "/events", tn.Secret, batchJSON(tn.PixelID(), `{"event_name":"x"}`)), 422, "invalid_request")
	_, tight := rg.Key(t, workspace.KeySpec{WorkspaceID: tn.Workspace.ID, Env: apikey.Live, Burst: 1})
	rg.Do(t, "POST", "/events", tight, batchJSON(tn.PixelID(), good))
	limited := rg.Do(t, "POST", "/events", tight, batchJSON(tn.PixelID(), good))
	apitest.Problem(t, limited, 429, "rate_limited")
	other := rg.Tenant(t, false)
	apitest.Problem(t, rg.Do(t, "POST", "/events", tn.Secret, batchJSON(other.PixelID(), `{"event_name":"x"}`)), 404, "not_found")
	svctest.WaitFor(t, 5*time.Second, "the refusals' records", func() bool { return len(rg.rejectionRecords(t)) >= 3 })
	recs = rg.rejectionRecords(t)
	if len(recs) != 3 || recs[1].Status != 422 || recs[2].Status != 429 || recs[2].RequestID != limited.Header.Get("Request-Id") ||
		recs[2].Entries[0].Index != rejection.Batch || recs[2].Entries[0].Rule != "rate_limited" {
		t.Fatalf("records %+v", recs)
	}
}

// An attempt answered 503 because Kafka failed its batch's record leaves no rejection
// record: its record is sent only once the batch landed. A retry without an
// Idempotency-Key, answered 202, then has them kept once, under its own request id.
// (Before, the rejections' record was produced beside the batch's and landed alone.)
func TestRejectionsOfA503NotKept(t *testing.T) {
	rg := newRig(t)
	tn := rg.Tenant(t, false)
	fault := rg.kafka.Cluster().Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: schema.TopicEvents,
		Err: kerr.InvalidRecord, Count: -1}) // the batch's record fails; a record of another topic in the same request lands
	body := batchJSON(tn.PixelID(), eventJSON("purchase", "", true), `{"event_name":"x"}`)
	apitest.Problem(t, rg.Do(t, "POST", "/events", tn.Secret, body), 503, "service_unavailable")
	time.Sleep(300 * time.Millisecond) // a record produced beside the batch's would be acknowledged by now
	if recs := rg.rejectionRecords(t); len(recs) != 0 {
		t.Fatalf("the 503 left %d rejection records (%+v), want none", len(recs), recs)
	}
	fault.Remove()
	ok := rg.Do(t, "POST", "/events", tn.Secret, body)
	if ok.Status != 202 {
		t.Fatalf("retry: %d %s", ok.Status, ok.Body)
	}
	svctest.WaitFor(t, 5*time.Second, "the retry's record", func() bool { return len(rg.rejectionRecords(t)) >= 1 })
	time.Sleep(200 * time.Millisecond)
	recs := rg.rejectionRecords(t)
	if len(recs) != 1 || recs[0].RequestID != ok.Header.Get("Request-Id") || recs[0].Status != 202 || len(recs[0].Entries) != 1 {
		t.Fatalf("after the retry's 202: %+v, want one record of the retry", recs)
	}
}

// Kafka refusing a 202's rejections' record alone: the 202 stands (its events are in)
// and the loss is counted in svc_ingest_rejection_records_total{outcome="failed"}, as
// the rejected-events page says.
func TestRejectionsRecordRefusedAloneIsCounted(t *testing.T) {
	rg := newRig(t)
	tn := rg.Tenant(t, false)
	const metric = "svc_ingest_rejection_records_total"
	failed := map[string]string{"outcome": "failed"}
	before := rg.counter(t, metric, failed)
	fault := rg.kafka.Cluster().Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: schema.TopicRejections,
		Err: kerr.InvalidRecord, Count: -1})
	defer fault.Remove()
	r := rg.Do(t, "POST", "/events", tn.Secret, batchJSON(tn.PixelID(), eventJSON("purchase", "", true), `{"event_name":"x"}`))
	if r.Status != 202 || r.JSON(t)["rejected"] != 1.0 {
		t.Fatalf("%d %s, want a 202 with one rejection", r.Status, r.Body)
	}
	svctest.WaitFor(t, 5*time.Second, "the refused record counted", func() bool { return rg.counter(t, metric, failed) == before+1 })
	if n := len(rg.records(t)); n != 1 {
		t.Fatalf("%d batches in Kafka, want the 202's one", n)
	}
	if recs := rg.rejectionRecords(t); len(recs) != 0 {
		t.Fatalf("%d rejection records, want none (Kafka refused it)", len(recs))
	}
}

// An attempt answered 503 while its batch's acknowledgement is overdue sends its
// rejections' record if the batch lands after all: the rejections are kept exactly
// when the events are.
func TestRejectionsOfAnOverdueBatchKeptWhenItLands(t *testing.T) {
	rg := newRig(t) // the edge answers 503 after DeliveryTimeout + 1 s = 2 s
	tn := rg.Tenant(t, false)
	kc := rg.kafka.Cluster()
	var slept atomic.Bool
	kc.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		kc.KeepControl()
		if slept.CompareAndSwap(false, true) {
			kc.SleepControl(func() { time.Sleep(2500 * time.Millisecond) }) // this produce is answered late, then lands
		}
		return nil, nil, false
	})
	body := batchJSON(tn.PixelID(), eventJSON("purchase", "", true), `{"event_name":"x"}`)
	late := rg.Do(t, "POST", "/events", tn.Secret, body)
	apitest.Problem(t, late, 503, "service_unavailable")
	if n := len(rg.rejectionRecords(t)); n != 0 {
		t.Fatalf("%d rejection records before the batch landed, want 0", n)
	}
	svctest.WaitFor(t, 10*time.Second, "the late batch's rejections", func() bool { return len(rg.rejectionRecords(t)) >= 1 })
	recs := rg.rejectionRecords(t)
	if len(recs) != 1 || recs[0].RequestID != late.Header.Get("Request-Id") || len(rg.records(t)) != 1 {
		t.Fatalf("records %+v, %d batches; want the late batch's one record", recs, len(rg.records(t)))
	}
}

func TestPixelOf(t *testing.T) {
	for body, want := range map[string]string{
		`{"pixel_id":"pxl_1","events":[]}`:                            "pxl_1",
		`{"events":[{"a":[1,{"pixel_id":"no"}]}], "pixel_id" : "p2"}`: "p2",
		`{"pixel_id":7}`: "", `[]`: "", `{"events":[`: "", ``: "", `{"x":"y"}`: "",
	} {
		if got := pixelOf([]byte(body)); got != want {
			t.Errorf("pixelOf(%s) = %q, want %q", body, got, want)
		}
	}
}
