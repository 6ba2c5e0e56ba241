package ingest

import (
	"crypto/sha256"
	"fmt"
	"strings"
	"svc/lib/problem"
	"syscall"
	"testing"
	"time"

	"svc/schema"
	"svc/schema/rejection"
)

var fixedNow = time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)

func parse(t testing.TB, body string) (*Batch, bool) {
	t.Helper()
	p := Parser{Now: func() time.Time { return fixedNow }}
	var b Batch
	ok := p.Parse([]byte(body), &b)
	return &b, ok
}

const goodEvent = `{"event_name":"purchase","occurred_at":"2026-11-24T11:59:00Z","value":12.5,"currency":"EUR","consent":{"measurement":true},"identity":{"email":"ada@example.com"}}`

func TestParseAcceptsAndHashes(t *testing.T) {
	b, ok := parse(t, `{"pixel_id":"pxl_0b0c3a52-8a5e-4f7e-9a71-2b1f3c4d5e6f","events":[`+goodEvent+`]}`)
	if !ok || len(b.Events) != 1 || len(b.Rejections) != 0 {
		t.Fatalf("ok=%v events=%d rejections=%v envelope=%v", ok, len(b.Events), b.Rejections, b.Envelope)
	}
	e := b.Events[0]
	if e.Name != "purchase" || e.Value != 125000 || string(e.Currency[:]) != "EUR" || !e.Consent || !e.HasEmail {
		t.Fatalf("event %+v", e)
	}
	if e.EmailSHA != sha256.Sum256([]byte("ada@example.com")) {
		t.Fatal("email hash differs from SHA-256 of the address")
	}
	if e.OccurredAt != time.Date(2026, 11, 24, 11, 59, 0, 0, time.UTC).UnixMilli() {
		t.Fatalf("occurred_at %d", e.OccurredAt)
	}
}

func TestParseConsentFalseDropsIdentity(t *testing.T) {
	b, _ := parse(t, `{"pixel_id":"x","events":[{"event_name":"lead","occurred_at":"2026-11-24T11:00:00Z","consent":{"measurement":false},"identity":{"email":"ada@example.com"}}]}`)
	if len(b.Events) != 1 || b.Events[0].HasEmail || b.Events[0].EmailSHA != [32]byte{} || b.Events[0].Consent {
		t.Fatalf("identity kept without consent: %+v", b.Events)
	}
}

func TestParseRejectsEachBadEventAlone(t *testing.T) {
	ev := func(mut string) string {
		return `{"event_name":"purchase","occurred_at":"2026-11-24T11:59:00Z","consent":{"measurement":true}` + mut + `}`
	}
	cases := []struct {
		name, event, field, rule string
	}{
		{"no name", `{"occurred_at":"2026-11-24T11:59:00Z","consent":{"measurement":true}}`, "event_name", "required"},
		{"empty name", `{"event_name":"","occurred_at":"2026-11-24T11:59:00Z","consent":{"measurement":true}}`, "event_name", "required"},
		{"name type", `{"event_name":5,"occurred_at":"2026-11-24T11:59:00Z","consent":{"measurement":true}}`, "event_name", "type_string"},
		{"long name", `{"event_name":"` + strings.Repeat("a", 129) + `","occurred_at":"2026-11-24T11:59:00Z","consent":{"measurement":true}}`, "event_name", "max_length"},
		{"no time", `{"event_name":"a","consent":{"measurement":true}}`, "occurred_at", "required"},
		{"offset time", `{"event_name":"a","occurred_at":"2026-11-24T11:59:00+01:00","consent":{"measurement":true}}`, "occurred_at", "iso8601_utc"},
		{"bad date", `{"event_name":"a","occurred_at":"2026-02-30T11:59:00Z","consent":{"measurement":true}}`, "occurred_at", "iso8601_utc"},
		{"too old", `{"event_name":"a","occurred_at":"2026-11-01T11:59:00Z","consent":{"measurement":true}}`, "occurred_at", "too_old"},
		{"future", `{"event_name":"a","occurred_at":"2026-11-24T13:00:00Z","consent":{"measurement":true}}`, "occurred_at", "in_future"},
		{"no consent", `{"event_name":"a","occurred_at":"2026-11-24T11:59:00Z"}`, "consent", "required"},
		{"consent type", `{"event_name":"a","occurred_at":"2026-11-24T11:59:00Z","consent":true}`, "consent", "type_object"},
		{"no measurement", `{"event_name":"a","occurred_at":"2026-11-24T11:59:00Z","consent":{}}`, "consent.measurement", "required"},
		{"measurement type", `{"event_name":"a","occurred_at":"2026-11-24T11:59:00Z","consent":{"measurement":"yes"}}`, "consent.measurement", "type_boolean"},
		{"value type", ev(`,"value":"12","currency":"EUR"`), "value", "type_number"},
		{"value decimals", ev(`,"value":1.23456,"currency":"EUR"`), "value", "max_decimals"},
		{"value range", ev(`,"value":1e20,"currency":"EUR"`), "value", "range"},
		{"value without currency", ev(`,"value":1`), "currency", "required_with_value"},
		{"currency lower", ev(`,"value":1,"currency":"eur"`), "currency", "iso4217"},
		{"currency long", ev(`,"value":1,"currency":"EURO"`), "currency", "iso4217"},
		{"email upper", ev(`,"identity":{"email":"Ada@example.com"}`), "identity.email", "normalised"},
		{"email spaces", ev(`,"identity":{"email":" ada@example.com"}`), "identity.email", "normalised"},
		{"email upper beyond ASCII", ev(`,"identity":{"email":"Ädä@example.com"}`), "identity.email", "normalised"},
		{"email upper escaped", ev(`,"identity":{"email":"\u00c4d\u00e4@example.com"}`), "identity.email", "normalised"},
		{"email no-break space at the end", ev(`,"identity":{"email":"ada@example.com\u00a0"}`), "identity.email", "normalised"},
		{"email no-break space inside", ev(`,"identity":{"email":"a\u00a0da@example.com"}`), "identity.email", "email"},
		{"email shape", ev(`,"identity":{"email":"ada.example.com"}`), "identity.email", "email"},
		{"email type", ev(`,"identity":{"email":7}`), "identity.email", "type_string"},
		{"identity type", ev(`,"identity":"ada"`), "identity", "type_object"},
		{"event type", `"purchase"`, "event", "type_object"},
		{"event_id long", ev(`,"event_id":"` + strings.Repeat("x", 65) + `"`), "event_id", "max_length"},
		{"event_id empty", ev(`,"event_id":""`), "event_id", "min_length"},
		{"event_id control", ev(`,"event_id":"a\u0007b"`), "event_id", "printable"},
		{"event_id C1 control", ev(`,"event_id":"a\u0085b"`), "event_id", "printable"},
		{"name bidi override", `{"event_name":"buy\u202Egpj","occurred_at":"2026-11-24T11:59:00Z","consent":{"measurement":true}}`, "event_name", "printable"},
		{"name bidi isolate", `{"event_name":"buy⁧x","occurred_at":"2026-11-24T11:59:00Z","consent":{"measurement":true}}`, "event_name", "printable"},
		{"consent twice", ev(`,"consent":{"measurement":true}`), "consent", RuleDuplicateMember},
		{"measurement twice", `{"event_name":"a","occurred_at":"2026-11-24T11:59:00Z","consent":{"measurement":false,"measurement":true}}`, "consent.measurement", RuleDuplicateMember},
		{"email twice", ev(`,"identity":{"email":"ada@example.com","email":"bob@example.com"}`), "identity.email", RuleDuplicateMember},
		{"name twice", `{"event_name":"a","event_name":"b","occurred_at":"2026-11-24T11:59:00Z","consent":{"measurement":true}}`, "event_name", RuleDuplicateMember},
		{"name a key secret", `{"event_name":"svc_live_0a1b2c","occurred_at":"2026-11-24T11:59:00Z","consent":{"measurement":true}}`, "event_name", RuleSecret},
		{"name a webhook secret inside", `{"event_name":"x WHSEC_abc","occurred_at":"2026-11-24T11:59:00Z","consent":{"measurement":true}}`, "event_name", RuleSecret},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b, ok := parse(t, `{"pixel_id":"x","events":[`+goodEvent+`,`+c.event+`]}`)
			if !ok {
				t.Fatalf("envelope failed: %v", b.Envelope)
			}
			if len(b.Events) != 1 || len(b.Rejections) != 1 {
				t.Fatalf("events=%d rejections=%+v", len(b.Events), b.Rejections)
			}
			r := b.Rejections[0]
			if r.Index != 1 || r.Field != c.field || r.Rule != c.rule {
				t.Fatalf("rejection %+v, want index 1 %s/%s", r, c.field, c.rule)
			}
			if strings.Contains(fmt.Sprint(r.Value), "@example.com") || strings.Contains(fmt.Sprint(r.Value), "ada.example") {
				t.Fatalf("a rejection echoes the email: %v", r.Value)
			}
		})
	}
}

func TestParseEnvelope(t *testing.T) {
	many := strings.TrimSuffix(strings.Repeat(goodEvent+",", 51), ",")
	cases := []struct {
		name, body, field, rule string
	}{
		{"not json", `{"pixel_id":`, "body", "json"},
		{"not object", `[1,2]`, "body", "json_object"},
		{"trailing", `{"pixel_id":"x","events":[` + goodEvent + `]} x`, "body", "json"},
		{"no pixel", `{"events":[` + goodEvent + `]}`, "pixel_id", "required"},
		{"pixel type", `{"pixel_id":7,"events":[` + goodEvent + `]}`, "pixel_id", "type_string"},
		{"no events", `{"pixel_id":"x"}`, "events", "required"},
		{"events type", `{"pixel_id":"x","events":{}}`, "events", "type_array"},
		{"empty events", `{"pixel_id":"x","events":[]}`, "events", "min_items"},
		{"pixel twice", `{"pixel_id":"x","events":[` + goodEvent + `],"pixel_id":"y"}`, "pixel_id", RuleDuplicateMember},
		{"events twice", `{"pixel_id":"x","events":[` + goodEvent + `],"events":[` + goodEvent + `]}`, "events", RuleDuplicateMember},
		{"51 events", `{"pixel_id":"x","events":[` + many + `]}`, "events", "max_items"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b, ok := parse(t, c.body)
			if ok || len(b.Envelope) == 0 {
				t.Fatalf("accepted: %+v", b)
			}
			if b.Envelope[0].Field != c.field || b.Envelope[0].Rule != c.rule {
				t.Fatalf("envelope %+v, want %s/%s", b.Envelope, c.field, c.rule)
			}
		})
	}
}

func TestParseFiftyIsTheCeiling(t *testing.T) {
	fifty := strings.TrimSuffix(strings.Repeat(goodEvent+",", 50), ",")
	b, ok := parse(t, `{"pixel_id":"x","events":[`+fifty+`]}`)
	if !ok || len(b.Events) != 50 {
		t.Fatalf("ok=%v events=%d envelope=%v", ok, len(b.Events), b.Envelope)
	}
}

func TestParseEscapesAndUnknownFields(t *testing.T) {
	b, ok := parse(t, `{"extra":{"a":[1,{"b":null}]},"pixel_id":"x","events":[{"event_name":"caf\u00e9 \"x\"","occurred_at":"2026-11-24T11:59:00.123Z","consent":{"measurement":true,"other":1},"value":-0.5e1,"currency":"USD","meta":[true,false]}]}`)
	if !ok || len(b.Events) != 1 {
		t.Fatalf("ok=%v %+v %+v", ok, b.Envelope, b.Rejections)
	}
	e := b.Events[0]
	if e.Name != `café "x"` || e.Value != -50000 || e.OccurredAt%1000 != 123 {
		t.Fatalf("event %+v", e)
	}
}

func TestParseDecimal(t *testing.T) {
	for in, want := range map[string]int64{"0": 0, "1": 10000, "12.5": 125000, "-3.25": -32500, "1.2345": 12345,
		"1e2": 1000000, "1.5E-1": 1500, "0.00010": 1, "99999999999999.9999": 999999999999999999} {
		got, rule := parseDecimal([]byte(in))
		if rule != "" || got != want {
			t.Errorf("parseDecimal(%s) = %d %q, want %d", in, got, rule, want)
		}
	}
	for in, want := range map[string]string{"0.00001": "max_decimals", "1e15": "range", "100000000000000": "range", "1e-5": "max_decimals"} {
		if _, rule := parseDecimal([]byte(in)); rule != want {
			t.Errorf("parseDecimal(%s) rule %q, want %q", in, rule, want)
		}
	}
}

func TestClientEventIDStable(t *testing.T) {
	a, _ := parse(t, `{"pixel_id":"x","events":[{"event_id":"order-1","event_name":"a","occurred_at":"2026-11-24T11:59:00Z","consent":{"measurement":true}}]}`)
	id1 := a.Events[0].ID
	b, _ := parse(t, `{"pixel_id":"x","events":[{"event_id":"order-1","event_name":"a","occurred_at":"2026-11-24T11:59:00Z","consent":{"measurement":true}}]}`)
	b.AssignIDs([16]byte{1, 2, 3})
	if id1 != b.Events[0].ID || id1 == (schema.UUID{}) {
		t.Fatal("client event_id does not map to a stable id")
	}
}

// An event_id written with a JSON escape maps to the id of its text, and two copies of
// it in one batch are one event, whatever escaped strings follow it in the event (an
// escaped id is read into the scanner's scratch space, which the next escaped string
// reuses).
func TestClientEventIDWithEscapes(t *testing.T) {
	want := schema.ClientEventID([]byte("o/1"))
	ev := func(name string) string {
		return `{"event_id":"o\/1","event_name":"` + name + `","occurred_at":"2026-11-24T11:59:00Z","consent":{"measurement":true}}`
	}
	b, _ := parse(t, `{"pixel_id":"x","events":[`+ev(`x\/a`)+`,`+ev(`x\/b`)+`]}`)
	if len(b.Events) != 1 || b.Duplicates != 1 || b.Events[0].ID != want {
		t.Fatalf("events %d, duplicates %d, id %x: want one event with the id of \"o/1\" %x", len(b.Events), b.Duplicates, b.Events[0].ID, want)
	}
	if r := b.Rejections; len(r) != 1 || r[0].Value != "o/1" {
		t.Fatalf("rejections %+v, want the copy of \"o/1\"", r)
	}
}

// batchBody returns a realistic 50-event batch.
func batchBody() []byte {
	var sb strings.Builder
	sb.WriteString(`{"pixel_id":"pxl_0b0c3a52-8a5e-4f7e-9a71-2b1f3c4d5e6f","events":[`)
	for i := 0; i < 50; i++ {
		if i > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, `{"event_name":"purchase","occurred_at":"2026-11-24T11:%02d:%02dZ","value":%d.99,"currency":"EUR","consent":{"measurement":%v},"identity":{"email":"person%d@example.com"}}`,
			i%60, (i*7)%60, 10+i, i%5 != 0, i)
	}
	sb.WriteString(`]}`)
	return []byte(sb.String())
}

// BenchmarkHotPath is the edge's per-batch CPU work: parse, validate, hash the emails
// and encode the Kafka record for one 50-event batch. Reported per event.
func BenchmarkHotPath(b *testing.B) {
	body := batchBody()
	p := Parser{Now: func() time.Time { return fixedNow }}
	var batch Batch
	var buf []byte
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	cpu0 := processCPU()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if !p.Parse(body, &batch) || len(batch.Events) != 50 {
			b.Fatal("parse failed")
		}
		batch.AssignIDs([16]byte{byte(i)})
		buf = schema.AppendBatch(buf[:0], &schema.Batch{RequestID: "req_0123456789abcdef01234567", ReceivedAt: fixedNow.UnixMilli(), Events: batch.Events})
	}
	b.StopTimer()
	perEvent := float64(b.Elapsed().Nanoseconds()) / float64(b.N) / 50
	b.ReportMetric(perEvent, "ns/event")
	// CPU time, unlike ns/event, is not inflated by other processes sharing the cores.
	b.ReportMetric(float64((processCPU()-cpu0).Nanoseconds())/float64(b.N)/50, "cpu-ns/event")
}

// processCPU is the user+system CPU time of this process so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// FuzzParseBatch: any body parses without panicking, and what it accepts re-encodes
// and decodes as a valid record.
func FuzzParseBatch(f *testing.F) {
	f.Add(batchBody())
	f.Add([]byte(`{"pixel_id":"x","events":[` + goodEvent + `]}`))
	f.Add([]byte(`{"events":[{"event_name":"\ud83d\ude00","value":1e400}]}`))
	f.Add([]byte(`[{"a":"\u12"}]`))
	p := Parser{Now: func() time.Time { return fixedNow }}
	var batch Batch
	f.Fuzz(func(t *testing.T, body []byte) {
		ok := p.Parse(body, &batch)
		if !ok && len(batch.Envelope) == 0 {
			t.Fatal("refused without a reason")
		}
		if !ok || len(batch.Events) == 0 {
			return
		}
		batch.AssignIDs([16]byte{})
		rec := schema.AppendBatch(nil, &schema.Batch{Events: batch.Events})
		var back schema.Batch
		if err := schema.DecodeBatch(rec, &back); err != nil {
			t.Fatalf("accepted events do not round-trip: %v", err)
		}
	})
}

// TestParseUTCMatchesTimeDate checks the hand-written calendar against time.Date over
// every day of years 0000–9999's edges and a sample in between, with fractions.
func TestParseUTCMatchesTimeDate(t *testing.T) {
	years := []int{0, 1, 3, 4, 99, 100, 399, 400, 401, 1600, 1900, 1969, 1970, 1971, 2000, 2024, 2026, 2100, 2400, 9999}
	for y := 1960; y < 2110; y += 7 {
		years = append(years, y)
	}
	for _, y := range years {
		for m := 1; m <= 12; m++ {
			for d := 1; d <= 31; d++ {
				for _, clock := range []string{"00:00:00", "23:59:59.999999999", "12:34:56.7"} {
					v := fmt.Sprintf("%04d-%02d-%02dT%sZ", y, m, d, clock)
					ref, err := time.Parse(time.RFC3339Nano, v)
					sec, nsec, ok := parseUTC([]byte(v))
					if (err == nil) != ok {
						t.Fatalf("%s: parseUTC ok=%v, time.Parse err=%v", v, ok, err)
					}
					if ok && (sec != ref.Unix() || nsec != ref.Nanosecond()) {
						t.Fatalf("%s: %d.%09d, want %d.%09d", v, sec, nsec, ref.Unix(), ref.Nanosecond())
					}
				}
			}
		}
	}
	for _, bad := range []string{"2026-02-29T00:00:00Z", "2100-02-29T00:00:00Z", "2026-04-31T00:00:00Z", "2026-13-01T00:00:00Z", "2026-00-01T00:00:00Z", "2026-01-00T00:00:00Z"} {
		if _, _, ok := parseUTC([]byte(bad)); ok {
			t.Errorf("%s accepted", bad)
		}
	}
}

// TestPlainRunMatchesBytewise checks the 8-bytes-at-a-time scan against the plain loop:
// every byte value at every position of a 0..24-byte run of printable ASCII.
func TestPlainRunMatchesBytewise(t *testing.T) {
	naive := func(b []byte) int {
		for i, c := range b {
			if c < 0x20 || c >= 0x80 || c == '"' || c == '\\' {
				return i
			}
		}
		return len(b)
	}
	for n := 0; n <= 24; n++ {
		for pos := 0; pos < n; pos++ {
			for v := 0; v < 256; v++ {
				b := []byte(strings.Repeat("a", n))
				b[pos] = byte(v)
				if got, want := plainRun(b), naive(b); got != want {
					t.Fatalf("plainRun(%q) = %d, want %d", b, got, want)
				}
			}
		}
	}
}

// TestRejectedValueWithheldPastTheCut: a rejected value is cut (64 bytes of raw JSON, 32
// of an event name) before it is echoed and kept; a value whose '@' lies past the cut
// must still be withheld, or the local part of an address before it is kept.
func TestRejectedValueWithheldPastTheCut(t *testing.T) {
	const local = "ada.lovelace.analytical.engine"
	pad := strings.Repeat("x", 40)
	ev := `{"event_name":"purchase","occurred_at":"2026-11-24T11:59:00Z","consent":{"measurement":true}`
	cases := []struct{ name, event, field string }{
		{"raw value", ev + `,"value":"` + pad + local + `@example.com","currency":"EUR"}`, "value"},
		{"raw value escaped", ev + `,"value":"` + pad + local + `\u0040example.com","currency":"EUR"}`, "value"},
		{"raw object", `{"event_name":"purchase","occurred_at":"2026-11-24T11:59:00Z","consent":{"measurement":{"note":"` + pad + local + `@example.com"}}}`, "consent.measurement"},
		{"event_id type", ev + `,"event_id":["` + pad + local + `@example.com"]}`, "event_id"},
		{"long name", `{"event_name":"` + local + strings.Repeat("y", 10) + `@example.com` + strings.Repeat("z", 100) +
			`","occurred_at":"2026-11-24T11:59:00Z","consent":{"measurement":true}}`, "event_name"},
		{"long name escaped", `{"event_name":"` + local + strings.Repeat("y", 10) + `\u0040example.com` + strings.Repeat("z", 100) +
			`","occurred_at":"2026-11-24T11:59:00Z","consent":{"measurement":true}}`, "event_name"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b, ok := parse(t, `{"pixel_id":"x","events":[`+c.event+`]}`)
			if !ok || len(b.Rejections) != 1 || b.Rejections[0].Field != c.field {
				t.Fatalf("ok=%v rejections=%+v envelope=%v", ok, b.Rejections, b.Envelope)
			}
			r := b.Rejections[0]
			if kept := rejection.Redact(r.Field, r.Value); kept != rejection.Withheld || strings.Contains(fmt.Sprint(r.Value), "lovelace") {
				t.Fatalf("the local part is kept: errors[].value %q, stored %s", r.Value, kept)
			}
		})
	}
	// A value without an '@' is still echoed, cut.
	b, _ := parse(t, `{"pixel_id":"x","events":[`+ev+`,"value":"`+strings.Repeat("q", 100)+`","currency":"EUR"}]}`)
	if len(b.Rejections) != 1 || b.Rejections[0].Value != `"`+strings.Repeat("q", 63) {
		t.Fatalf("rejections %+v, want the value's first 64 bytes", b.Rejections)
	}
}

// The bounds of event_name (128) and event_id (64) count characters, as the developer
// pages and the published schema's maxLength say, not bytes: a name of 128 'ü' (256
// bytes) is accepted and goes through the record, 129 are refused.
func TestNameAndIDBoundsCountCharacters(t *testing.T) {
	ev := func(name, id string) string {
		return `{"event_name":"` + name + `","event_id":"` + id + `","occurred_at":"2026-11-24T11:59:00Z","consent":{"measurement":true}}`
	}
	b, ok := parse(t, `{"pixel_id":"x","events":[`+ev(strings.Repeat("ü", 128), strings.Repeat("é", 64))+`]}`)
	if !ok || len(b.Events) != 1 {
		t.Fatalf("128 characters of name, 64 of id: %+v %+v", b.Rejections, b.Envelope)
	}
	b.AssignIDs([16]byte{1})
	var back schema.Batch
	if err := schema.DecodeBatch(schema.AppendBatch(nil, &schema.Batch{Events: b.Events}), &back); err != nil || back.Events[0].Name != strings.Repeat("ü", 128) {
		t.Fatalf("the record of a 128-character name: %v", err)
	}
	for _, c := range []struct{ name, id, field string }{
		{strings.Repeat("ü", 129), "a", "event_name"},
		{"a", strings.Repeat("é", 65), "event_id"},
	} {
		b, _ := parse(t, `{"pixel_id":"x","events":[`+ev(c.name, c.id)+`]}`)
		if len(b.Rejections) != 1 || b.Rejections[0].Field != c.field || b.Rejections[0].Rule != "max_length" {
			t.Fatalf("%s over its bound: %+v", c.field, b.Rejections)
		}
	}
}

// TestRejectionsNeverEchoAContactDetailOrSecret: every rule that echoes the value it
// rejects withholds one holding an '@' (events.md: "Rejections never echo a contact
// detail") or what looks like an API key or webhook secret (a key pasted into the wrong
// field must not come back in the 202, nor reach the rejections table), and cuts a long
// one to 64 bytes.
func TestRejectionsNeverEchoAContactDetailOrSecret(t *testing.T) {
	const mail = "ada.lovelace@example.com"
	const key = "svc_live_0123456789abcdef0123456789abcdef0123456789abcdef"
	ok := `"event_name":"purchase","occurred_at":"2026-11-24T11:59:00Z","consent":{"measurement":true}`
	cases := []struct{ name, events, field, rule, want string }{
		{"currency", `{` + ok + `,"value":1,"currency":"` + mail + `"}`, "currency", "iso4217", withheldValue},
		{"event_id too long", `{` + ok + `,"event_id":"` + strings.Repeat("i", 70) + mail + `"}`, "event_id", "max_length", withheldValue},
		{"event_id twice", `{` + ok + `,"event_id":"` + mail + `"},{` + ok + `,"event_id":"` + mail + `"}`, "event_id", "duplicate_event_id", withheldValue},
		{"event_name not printable", `{"event_name":"` + mail + `\u0007","occurred_at":"2026-11-24T11:59:00Z","consent":{"measurement":true}}`, "event_name", "printable", withheldValue},
		{"occurred_at", `{"event_name":"purchase","occurred_at":"` + mail + `","consent":{"measurement":true}}`, "occurred_at", "iso8601_utc", withheldValue},
		{"currency a key", `{` + ok + `,"value":1,"currency":"` + key + `"}`, "currency", "iso4217", problem.WithheldSecret},
		{"event_id too long a key", `{` + ok + `,"event_id":"` + strings.Repeat("i", 70) + key + `"}`, "event_id", "max_length", problem.WithheldSecret},
		{"occurred_at a webhook secret", `{"event_name":"purchase","occurred_at":"whsec_abc","consent":{"measurement":true}}`, "occurred_at", "iso8601_utc", problem.WithheldSecret},
		{"event_name a key", `{"event_name":"Bearer ` + key + `","occurred_at":"2026-11-24T11:59:00Z","consent":{"measurement":true}}`, "event_name", RuleSecret, problem.WithheldSecret},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b, _ := parse(t, `{"pixel_id":"x","events":[`+c.events+`]}`)
			if len(b.Rejections) != 1 || b.Rejections[0].Field != c.field || b.Rejections[0].Rule != c.rule {
				t.Fatalf("rejections %+v, want one of %s/%s", b.Rejections, c.field, c.rule)
			}
			if v := b.Rejections[0].Value; v != c.want {
				t.Fatalf("errors[].value %q, want %q", v, c.want)
			}
		})
	}
	long := strings.Repeat("7", 100)
	b, _ := parse(t, `{"pixel_id":"x","events":[{"event_name":"purchase","occurred_at":"`+long+`","consent":{"measurement":true}}]}`)
	if len(b.Rejections) != 1 || b.Rejections[0].Value != long[:64]+"…" {
		t.Fatalf("rejections %+v, want occurred_at cut to 64 bytes", b.Rejections)
	}
}
