package rejection

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestRecordRoundTrip(t *testing.T) {
	r := Record{Sandbox: true, ReceivedAt: 1_790_000_000_123, RequestID: "req_0123456789abcdef01234567", Status: 202, Events: 50,
		Entries: []Entry{{Index: 3, Field: "currency", Rule: "iso4217", Value: `"EURO"`}, {Index: Batch, Field: "", Rule: "rate_limited", Value: "null"}}}
	r.Workspace[0], r.Pixel[1], r.Key[2] = 1, 2, 3
	b := Append(nil, &r)
	var d Record
	if err := Decode(b, &d); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(r, d) {
		t.Fatalf("decoded %+v, want %+v", d, r)
	}
	for _, bad := range [][]byte{nil, b[:len(b)-1], append(append([]byte{}, b...), 0), append([]byte{'S', 'E'}, b[2:]...)} {
		if err := Decode(bad, &d); !errors.Is(err, ErrMalformed) {
			t.Fatalf("Decode(%x): %v, want ErrMalformed", bad, err)
		}
	}
}

// Identity fields, and any value with an '@', are withheld; other values are kept as
// the JSON the answer shows, cut when long.
func TestRedact(t *testing.T) {
	for _, c := range []struct {
		field string
		value any
		want  string
	}{
		{"identity.email", "(withheld: contact details are never echoed)", Withheld},
		{"identity", `"x"`, Withheld},
		{"currency", "ada@example.com", Withheld},
		{"event_name", `{"a":"b@c"}`, Withheld},
		{"consent", `"jane\u0040example.com"`, Withheld}, // a value echoed as raw JSON text, its '@' escaped
		{"event_name", `{"to":"a\u0040b.example"}`, Withheld},
		{"currency", "svc_live_0a1b2c", Withheld}, // an API key pasted into the wrong field
		{"event_id", "see whsec_abc", Withheld},
		{"event_name", "(withheld: secrets are never echoed)", Withheld},
		{"currency", "EURO", `"EURO"`},
		{"occurred_at", nil, "null"},
		{"events", 51, "51"},
	} {
		if got := Redact(c.field, c.value); got != c.want {
			t.Errorf("Redact(%q, %v) = %s, want %s", c.field, c.value, got, c.want)
		}
	}
	if got := Redact("event_name", strings.Repeat("x", 1000)); len(got) > maxValue || !strings.HasSuffix(got, `…"`) {
		t.Errorf("a long value: %d bytes %q", len(got), got[len(got)-8:])
	}
}
