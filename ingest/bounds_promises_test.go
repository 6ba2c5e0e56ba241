package ingest

import (
	"strings"
	"testing"
)

// emailOfLen is a normalised address of exactly n bytes (n ≥ 20): a 64-byte local part,
// then a domain padded to length.
func emailOfLen(n int) string {
	local := strings.Repeat("l", 64)
	return local + "@" + strings.Repeat("d", n-len(local)-len("@")-len(".com")) + ".com"
}

// TestEmailAtMost254Bytes: "`identity.email` … trimmed and lower-cased, at most 254
// bytes" (events.md, the event's table; decisions.md, "Field bounds"). An address of
// 254 bytes is accepted and hashed; one of 255 is rejected alone, field
// `identity.email`, rule `email` (the rule of an address that is not one; events.md
// names no rule of its own for the length), its value withheld.
func TestEmailAtMost254Bytes(t *testing.T) {
	ev := func(email string) string {
		return `{"event_name":"purchase","occurred_at":"2026-11-24T11:59:00Z","consent":{"measurement":true},"identity":{"email":"` + email + `"}}`
	}
	at, over := emailOfLen(254), emailOfLen(255)
	if len(at) != 254 || len(over) != 255 {
		t.Fatalf("test addresses of %d and %d bytes", len(at), len(over))
	}
	b, ok := parse(t, `{"pixel_id":"x","events":[`+ev(at)+`]}`)
	if !ok || len(b.Events) != 1 || len(b.Rejections) != 0 || !b.Events[0].HasEmail {
		t.Fatalf("a 254-byte address: ok=%v events=%d rejections=%+v envelope=%v", ok, len(b.Events), b.Rejections, b.Envelope)
	}
	b, ok = parse(t, `{"pixel_id":"x","events":[`+goodEvent+`,`+ev(over)+`]}`)
	if !ok || len(b.Events) != 1 || len(b.Rejections) != 1 {
		t.Fatalf("a 255-byte address: ok=%v events=%d rejections=%+v envelope=%v", ok, len(b.Events), b.Rejections, b.Envelope)
	}
	if r := b.Rejections[0]; r.Index != 1 || r.Field != "identity.email" || r.Rule != "email" || r.Value != withheldValue {
		t.Fatalf("a 255-byte address: rejection %+v, want index 1 identity.email/email, value withheld", r)
	}
}

// TestOccurredAtWindowBounds: "`occurred_at` … at most 7 days old and 5 minutes ahead"
// (events.md, the event's table; decisions.md, "Field bounds"), against the parser's
// clock (fixedNow, 2026-11-24T12:00:00Z). Exactly 7 days old and exactly 5 minutes ahead
// are accepted; one second (or one millisecond) beyond either is rejected alone, field
// `occurred_at`, rule `too_old` or `in_future`.
func TestOccurredAtWindowBounds(t *testing.T) {
	cases := []struct {
		at, rule string // rule "" for accepted
	}{
		{"2026-11-17T12:00:00Z", ""},            // exactly 7 days old
		{"2026-11-17T11:59:59Z", "too_old"},     // 7 days and 1 s
		{"2026-11-17T11:59:59.999Z", "too_old"}, // 7 days and 1 ms
		{"2026-11-24T12:05:00Z", ""},            // exactly 5 minutes ahead
		{"2026-11-24T12:05:01Z", "in_future"},   // 5 minutes and 1 s
		{"2026-11-24T12:05:00.001Z", "in_future"},
	}
	for _, c := range cases {
		t.Run(c.at, func(t *testing.T) {
			b, ok := parse(t, `{"pixel_id":"x","events":[`+goodEvent+`,{"event_name":"purchase","occurred_at":"`+c.at+`","consent":{"measurement":true}}]}`)
			if !ok {
				t.Fatalf("envelope failed: %v", b.Envelope)
			}
			if c.rule == "" {
				if len(b.Events) != 2 || len(b.Rejections) != 0 {
					t.Fatalf("occurred_at %s (now %s): rejections %+v, want it accepted", c.at, fixedNow.Format("2006-01-02T15:04:05Z"), b.Rejections)
				}
				return
			}
			if len(b.Events) != 1 || len(b.Rejections) != 1 {
				t.Fatalf("occurred_at %s: events=%d rejections=%+v, want it rejected %s", c.at, len(b.Events), b.Rejections, c.rule)
			}
			if r := b.Rejections[0]; r.Index != 1 || r.Field != "occurred_at" || r.Rule != c.rule {
				t.Fatalf("occurred_at %s: rejection %+v, want index 1 occurred_at/%s", c.at, r, c.rule)
			}
		})
	}
}
