package problem

import (
	"strings"
	"testing"
)

func TestHoldsSecret(t *testing.T) {
	for v, want := range map[string]bool{
		"svc_live_0a1b":            true,
		"svc_sandbox_0a1b":         true,
		"whsec_abc":                true,
		"Bearer Svc_Live_0A1B":     true, // any letter case
		"x=whsec_":                 true,
		"svc_signup":               false,
		"svc_live":                 false, // no underscore after the mark: not a secret's prefix
		"live_svc_":                false,
		"purchase_completed_order": false,
		"":                         false,
		"_":                        false,
	} {
		if got := HoldsSecret(v); got != want {
			t.Errorf("HoldsSecret(%q) = %v, want %v", v, got, want)
		}
	}
}

// TestFinishWithholdsWhatIsNeverEchoed: whoever built a problem, the document written
// carries no email and no secret, in errors[].value or in its detail, and leaves other
// text as it was.
func TestFinishWithholdsWhatIsNeverEchoed(t *testing.T) {
	p := Invalid(`No plan "ada@example.com" and no version "svc_live_0a1b" here.`,
		FieldError{Field: "a", Rule: "r", Value: "ada@example.com"},
		FieldError{Field: "b", Rule: "r", Value: "x svc_sandbox_0a1b"},
		FieldError{Field: "c", Rule: "r", Value: "plain"},
		FieldError{Field: "d", Rule: "r", Value: 7},
		FieldError{Field: "rows.2.ada@example.com", Rule: "unknown_field", Pointer: "/rows/2/ada@example.com"},
		FieldError{Field: "whsec_x.ok", Rule: "unknown_field", Pointer: "/whsec_x/ok"},
		FieldError{Field: strings.Repeat("k", 100), Rule: "unknown_field", Pointer: "/" + strings.Repeat("k", 100)},
		FieldError{Field: "from", Rule: "date", Detail: `property "ada@example.com" is not allowed; got ` + strings.Repeat("9", 300)})
	p.Finish("https://docs", "req_1")
	if d := p.Errors[7].Detail; d != "property (withheld) is not allowed; got "+strings.Repeat("9", 64)+"…" {
		t.Fatalf("errors[7].detail %q", d)
	}
	long := New(NotFound, "No plan %q.", strings.Repeat("word ", 30000))
	long.Finish("https://docs", "req_3")
	if len(long.Detail) > maxDetail+len("…") || !strings.HasPrefix(long.Detail, `No plan "word word`) || !strings.HasSuffix(long.Detail, "…") {
		t.Fatalf("a 150,000-byte detail kept %d bytes: %q…", len(long.Detail), long.Detail[:min(len(long.Detail), 40)])
	}
	for i, w := range [][2]string{{"rows.2.(withheld)", "/rows/2/(withheld)"}, {"(withheld).ok", "/(withheld)/ok"},
		{strings.Repeat("k", 64) + "…", "/" + strings.Repeat("k", 64) + "…"}} {
		if e := p.Errors[4+i]; e.Field != w[0] || e.Pointer != w[1] {
			t.Fatalf("errors[%d] field %q pointer %q, want %q %q", 4+i, e.Field, e.Pointer, w[0], w[1])
		}
	}
	if p.Detail != `No plan (withheld) and no version (withheld) here.` {
		t.Fatalf("detail %q", p.Detail)
	}
	want := []any{WithheldEcho, WithheldSecret, "plain", 7}
	for i, w := range want {
		if p.Errors[i].Value != w {
			t.Fatalf("errors[%d].value %v, want %v", i, p.Errors[i].Value, w)
		}
	}
	q := New(NotFound, "No pixel %q in this key's workspace.", "pxl_42")
	q.Finish("https://docs", "req_2")
	if !strings.Contains(q.Detail, `"pxl_42"`) || q.Type != "https://docs/errors/not_found" || q.RequestID != "req_2" {
		t.Fatalf("an ordinary problem changed: %+v", q)
	}
}

func TestEchoWithholdsBeforeCutting(t *testing.T) {
	long := strings.Repeat("a", 100)
	if got := Echo(long+"svc_live_0a", 64, "…"); got != WithheldSecret {
		t.Fatalf("a secret past the cut: %q", got)
	}
	if got := Echo(long, 64, "…"); got != long[:64]+"…" {
		t.Fatalf("cut %q", got)
	}
}
