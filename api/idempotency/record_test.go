package idempotency

import (
	"bytes"
	"testing"
)

// A done record reads back as the response it stored, byte for byte, whatever the body
// holds (newlines included); anything else is not a done record.
func TestDoneRecordRoundTrip(t *testing.T) {
	fp := Fingerprint("POST", "/events", []byte(`{"pixel_id":"px_1"}`))
	for _, st := range []Stored{
		{Status: 202, ContentType: "application/json", Body: []byte("{\"accepted\":1,\n\"rejected\":0}\n")},
		{Status: 422, ContentType: "application/problem+json", Body: []byte(`{"code":"invalid_request"}`)},
		{Status: 200, ContentType: "", Body: nil},
	} {
		got, ok := parseDone(string(doneRecord(fp, st)))
		if !ok || got.Status != st.Status || got.ContentType != st.ContentType || !bytes.Equal(got.Body, st.Body) {
			t.Errorf("round trip of %+v: got %+v, ok %v", st, got, ok)
		}
	}
	for _, bad := range []string{"", "P" + fp, "D" + fp, "D" + fp + "2x2application/json\n{}", "D" + fp + "202application/json"} {
		if _, ok := parseDone(bad); ok {
			t.Errorf("parseDone(%q) accepted a record that is not a done record", bad)
		}
	}
	if o, st := OutcomeOf([]any{int64(Replay), "garbage"}); o != InUse || st != nil {
		t.Errorf("an unreadable record gave %v, %v; want InUse (retry later)", o, st)
	}
}
