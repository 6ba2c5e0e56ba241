package ingest

import (
	"testing"

	"github.com/google/uuid"

	"svc/lib/apikey"
	"svc/lib/ids"
	"svc/schema/apitest"
	"svc/schema/workspace"
)

// TestPixelIDOfAnotherKindIs422: a pixel_id of another kind (pln_<uuid>, …) is answered
// as a malformed one: 422 invalid_request with the errors[] entry pixel_id / rule
// pixel_id / the value sent, never 500; the answers refund their quota (a key with a
// daily quota of 3 makes a dozen of them, then its batch is accepted), and nothing
// reaches Kafka.
func TestPixelIDOfAnotherKindIs422(t *testing.T) {
	rg := newRig(t)
	tn := rg.Tenant(t, false)
	_, secret := rg.Key(t, workspace.KeySpec{WorkspaceID: tn.Workspace.ID, Env: apikey.Live, Burst: 3, Daily: 3})
	ev := eventJSON("purchase", "", true)
	values := []string{"pxl_nope", "x_" + uuid.NewString()}
	for _, k := range []ids.Prefix{ids.Org, ids.Plan, ids.Line, ids.Campaign, ids.Study, ids.Finding, ids.Key,
		ids.Endpoint, ids.Event, ids.Erasure} {
		values = append(values, string(k)+tn.Pixel.ID.String()) // the pixel's own UUID under another kind
	}
	for _, v := range values {
		r := rg.Do(t, "POST", "/events", secret, batchJSON(v, ev))
		if r.Status != 422 {
			t.Fatalf("pixel_id %s: %d %s, want 422", v, r.Status, r.Body)
		}
		m := apitest.Problem(t, r, 422, "invalid_request")
		errs, _ := m["errors"].([]any)
		if len(errs) != 1 {
			t.Fatalf("pixel_id %s: errors %v", v, m["errors"])
		}
		if e := errs[0].(map[string]any); e["field"] != "pixel_id" || e["rule"] != "pixel_id" || e["value"] != v || e["pointer"] != "/pixel_id" {
			t.Fatalf("pixel_id %s: errors[0] = %v", v, e)
		}
	}
	// A pixel_id holding an address is refused alike, its value withheld (an answer never
	// echoes a contact detail).
	m := apitest.Problem(t, rg.Do(t, "POST", "/events", secret, batchJSON("ada.lovelace@example.com", ev)), 422, "invalid_request")
	if errs, _ := m["errors"].([]any); len(errs) != 1 || errs[0].(map[string]any)["value"] != withheldValue {
		t.Fatalf("pixel_id with an address: errors %v", m["errors"])
	}
	if n := len(rg.records(t)); n != 0 {
		t.Fatalf("%d records from refused batches", n)
	}
	if r := rg.Do(t, "POST", "/events", secret, batchJSON(tn.PixelID(), ev)); r.Status != 202 {
		t.Fatalf("a good batch after %d refused ones: %d %s", len(values), r.Status, r.Body)
	}
}
