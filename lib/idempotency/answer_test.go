package idempotency

import (
	"bytes"
	"math/rand"
	"strings"
	"testing"
)

// The answers POST /events and POST /imports/actuals give, as the handlers write them.
var (
	clean202 = Stored{Status: 202, ContentType: "application/json",
		Body: []byte(`{"accepted":50,"rejected":0,"rejections":[],"request_id":"req_0123456789abcdef01234567"}`)}
	oneRejection = Stored{Status: 202, ContentType: "application/json",
		Body: []byte(`{"accepted":7,"rejected":1,"rejections":[{"index":7,"field":"occurred_at","rule":"required","value":null}],"request_id":"req_89abcdef0123456789abcdef"}`)}
	twoRejections = Stored{Status: 202, ContentType: "application/json",
		Body: []byte(`{"accepted":48,"rejected":2,"rejections":[{"index":43,"field":"currency","rule":"required_with_value","value":null},{"index":45,"field":"identity.email","rule":"normalised","value":"(withheld: contact details are never echoed)"}],"request_id":"req_4e96cdcc6c8cd28aa7c62e80"}`)}
	// The same with "duplicates" (issue 27), as the edge writes them since.
	clean202d = Stored{Status: 202, ContentType: "application/json",
		Body: []byte(`{"accepted":50,"rejected":0,"duplicates":0,"rejections":[],"request_id":"req_0123456789abcdef01234567"}`)}
	oneRejectionD = Stored{Status: 202, ContentType: "application/json",
		Body: []byte(`{"accepted":7,"rejected":1,"duplicates":0,"rejections":[{"index":7,"field":"occurred_at","rule":"required","value":null}],"request_id":"req_89abcdef0123456789abcdef"}`)}
	oneDuplicate = Stored{Status: 202, ContentType: "application/json",
		Body: []byte(`{"accepted":49,"rejected":1,"duplicates":1,"rejections":[{"index":12,"field":"event_id","rule":"duplicate_event_id","value":"order-1"}],"request_id":"req_4e96cdcc6c8cd28aa7c62e80"}`)}
	imported = Stored{Status: 200, ContentType: "application/json",
		Body: []byte(`{"rows":500,"upserted":500,"request_id":"req_fedcba9876543210fedcba98"}`)}
)

// Packing is exact whatever the answer holds, and the common answers fit a table field
// with the record's 9 bytes of kind and fingerprint.
func TestPackIsExactAndSmall(t *testing.T) {
	answers := []Stored{clean202, oneRejection, twoRejections, imported, clean202d, oneRejectionD, oneDuplicate,
		{Status: 422, ContentType: "application/problem+json", Body: []byte(`{"type":"https://docs.example/problems/invalid_request","code":"invalid_request","request_id":"req_0123456789abcdef01234567"}`)},
		{Status: 200, ContentType: "", Body: nil},
		{Status: 599, ContentType: "text/plain; charset=utf-8", Body: []byte("ABCDEF0123 abcdef012 \x00\xff\x80 é\n" + strings.Repeat("x", 300) + strings.Repeat("0a", 200))},
	}
	rng := rand.New(rand.NewSource(1))
	for i := 0; i < 2000; i++ {
		b := make([]byte, rng.Intn(200))
		for j := range b {
			b[j] = "0123456789abcdefABx{}\",:[]"[rng.Intn(26)]
			if rng.Intn(8) == 0 {
				b[j] = byte(rng.Intn(256))
			}
		}
		answers = append(answers, Stored{Status: 100 + rng.Intn(500), ContentType: "application/json", Body: b})
	}
	for _, st := range answers {
		got, err := Unpack(Pack(st))
		if err != nil || got.Status != st.Status || got.ContentType != st.ContentType || !bytes.Equal(got.Body, st.Body) {
			t.Fatalf("round trip of %d %q %q: got %d %q %q, %v", st.Status, st.ContentType, st.Body, got.Status, got.ContentType, got.Body, err)
		}
	}
	for _, st := range []Stored{clean202, oneRejection, twoRejections, imported, clean202d, oneRejectionD, oneDuplicate} {
		if n := len(doneRecord(Fingerprint("POST", "/events", nil), st)); n > MaxValue {
			t.Errorf("the record of %s takes %d bytes, more than a field's %d", st.Body, n, MaxValue)
		}
	}
	for _, st := range []Stored{clean202, clean202d} {
		if n := len(Pack(st)); n > 20 {
			t.Errorf("a clean 202 (%s) packs into %d bytes, want at most 20", st.Body, n)
		}
	}
}

// Bytes that Pack did not write are refused, not misread; a record of another kind or
// too short is not a done record.
func TestUnpackRefusesGarbage(t *testing.T) {
	for _, p := range [][]byte{nil, {0}, {0, 0, 202, 5, 'a'}, {byte(len(heads))}, {1, 0x05, 'a'}, {1, 0x41, 1}, {1, 0xff}} {
		if st, err := Unpack(p); err == nil {
			t.Errorf("Unpack(%v) = %+v, want an error", p, st)
		}
	}
	fp := Fingerprint("POST", "/events", nil)
	for _, rec := range []string{"", "D", "D" + fp, "P" + fp + "12345678" + "1 0", "X" + fp + "\x01"} {
		if _, err := parseDone(rec); err == nil {
			t.Errorf("parseDone(%q) accepted a record that is not a done record", rec)
		}
	}
	if o, st := outcomeOf([]any{int64(Replay), "garbage"}); o != InUse || st != nil {
		t.Errorf("an unreadable record gave %v, %v; want InUse (retry later)", o, st)
	}
}

// longestWord, indexed by first byte, picks what a scan of every word picks (the
// longest, the first among equally long ones) at every position of the answers, so
// packed answers keep their bytes.
func TestLongestWordMatchesAScan(t *testing.T) {
	scan := func(b []byte) int {
		best := -1
		for w, s := range words {
			if len(s) > 1 && bytes.HasPrefix(b, []byte(s)) && (best < 0 || len(s) > len(words[best])) {
				best = w
			}
		}
		return best
	}
	bodies := [][]byte{clean202.Body, oneRejection.Body, imported.Body, []byte(strings.Join(words, "") + "consent.measurement,consentx")}
	found := 0
	for _, b := range bodies {
		for i := range b {
			got, want := longestWord(b[i:]), scan(b[i:])
			if got != want {
				t.Fatalf("at %q: word %d, a scan finds %d", b[i:], got, want)
			}
			if got >= 0 {
				found++
			}
		}
	}
	if found < len(words) {
		t.Fatalf("only %d words found in bodies that hold every word", found)
	}
}

func BenchmarkPackClean202(b *testing.B) {
	b.ReportAllocs()
	for range b.N {
		Pack(clean202)
	}
}
