package ingest

import (
	"strconv"
	"unicode/utf8"

	"svc/lib/problem"
	"svc/schema"
)

// optional reads the kind of an optional member's value: true when it is want (the
// caller reads it); false after skipping a null (as if absent) or a value of another
// kind, rejected with rule type_<want> and the raw value (or withheld when echo is false).
func (p *Parser) optional(b *Batch, st *eventState, idx int, field string, want kind, echo bool) bool {
	s := &p.sc
	from := s.i
	switch k := s.kind(); k {
	case want:
		return true
	case kNull:
		s.skip(0)
		return false
	}
	s.skip(0)
	value := withheldValue
	if echo {
		value = s.raw(from)
	}
	p.reject(b, st, idx, field, "type_"+want.String(), value)
	return false
}

// required reads the kind of a required member's value: true when it is want (the caller
// reads it); false after skipping a value of another kind (null included), rejected with
// rule type_<want> and the raw value.
func (p *Parser) required(b *Batch, st *eventState, idx int, field string, want kind) bool {
	s := &p.sc
	if s.kind() == want {
		return true
	}
	from := s.i
	s.skip(0)
	p.reject(b, st, idx, field, "type_"+want.String(), s.raw(from))
	return false
}

func (p *Parser) readValue(b *Batch, st *eventState, idx int, e *schema.Event, from int) bool {
	s := &p.sc
	if !p.optional(b, st, idx, "value", kNumber, true) {
		return false
	}
	v, rule := parseDecimal(s.number())
	if rule != "" {
		p.reject(b, st, idx, "value", rule, s.raw(from))
		return false
	}
	e.HasValue, e.Value = true, v
	return true
}

// parseDecimal turns a JSON number into an integer count of 1/10^4, exactly. It refuses
// (rule max_decimals) more than four significant decimals and (rule range) a magnitude
// Decimal(18,4) cannot hold.
func parseDecimal(t []byte) (int64, string) {
	neg := false
	if len(t) > 0 && t[0] == '-' {
		neg, t = true, t[1:]
	}
	var mant []byte
	exp := 0
	i := 0
	for i < len(t) && t[i] >= '0' && t[i] <= '9' {
		i++
	}
	intPart := t[:i]
	var frac []byte
	if i < len(t) && t[i] == '.' {
		j := i + 1
		for j < len(t) && t[j] >= '0' && t[j] <= '9' {
			j++
		}
		frac, i = t[i+1:j], j
	}
	if i < len(t) && (t[i] == 'e' || t[i] == 'E') {
		e, err := strconv.Atoi(string(t[i+1:]))
		if err != nil || e > 40 || e < -40 {
			return 0, "range"
		}
		exp = e
	}
	// value = (intPart.frac) × 10^exp; scaled = digits × 10^(exp - len(frac) + 4)
	var buf [64]byte
	mant = append(append(buf[:0], intPart...), frac...)
	shift := exp - len(frac) + 4
	for shift < 0 && len(mant) > 0 && mant[len(mant)-1] == '0' {
		mant, shift = mant[:len(mant)-1], shift+1
	}
	if shift < 0 {
		return 0, "max_decimals"
	}
	const limit = MaxValue*10000 + 9999 // Decimal(18,4)'s largest magnitude
	var n int64
	for _, c := range mant {
		d := int64(c - '0')
		if n > (limit-d)/10 {
			return 0, "range"
		}
		n = n*10 + d
	}
	for ; shift > 0; shift-- {
		if n > limit/10 {
			return 0, "range"
		}
		n *= 10
	}
	if neg {
		n = -n
	}
	return n, ""
}

func (p *Parser) readCurrency(b *Batch, st *eventState, idx int, e *schema.Event, from int) bool {
	s := &p.sc
	if !p.optional(b, st, idx, "currency", kString, true) {
		return false
	}
	v := s.str()
	if len(v) != 3 || !upper(v[0]) || !upper(v[1]) || !upper(v[2]) {
		p.reject(b, st, idx, "currency", "iso4217", echo(v))
		return false
	}
	copy(e.Currency[:], v)
	return true
}

func upper(c byte) bool { return c >= 'A' && c <= 'Z' }

func (p *Parser) readConsentMeasurement(b *Batch, st *eventState, idx int, e *schema.Event, from int) bool {
	s := &p.sc
	if s.kind() != kBool {
		s.skip(0)
		p.reject(b, st, idx, "consent.measurement", "type_boolean", s.raw(from))
		return false
	}
	e.Consent = s.boolean()
	return true
}

// readIdentityEmail validates a normalised address and keeps only its SHA-256.
// Rejections never echo the address: errors[].value says what is wrong with it instead.
func (p *Parser) readIdentityEmail(b *Batch, st *eventState, idx int, e *schema.Event, from int) bool {
	s := &p.sc
	if !p.optional(b, st, idx, "identity.email", kString, false) {
		return false
	}
	digest, rule := schema.EmailDigest(s.str())
	if rule != "" {
		p.reject(b, st, idx, "identity.email", rule, withheldValue)
		return false
	}
	e.HasEmail = true
	e.EmailSHA = digest
	return true
}

func (p *Parser) readEventID(b *Batch, st *eventState, idx int, e *schema.Event, from int) bool {
	s := &p.sc
	if s.kind() == kNull {
		s.skip(0)
		return false
	}
	if s.kind() != kString {
		s.skip(0)
		p.reject(b, st, idx, "event_id", "type_string", s.raw(from))
		return false
	}
	id := s.str()
	switch {
	case len(id) == 0:
		p.reject(b, st, idx, "event_id", "min_length", "")
		return false
	case longer(id, MaxEventIDLen):
		p.reject(b, st, idx, "event_id", "max_length", echo(id))
		return false
	case !printable(id):
		p.reject(b, st, idx, "event_id", "printable", echo(id))
		return false
	}
	if s.escaped {
		p.clientID = append(p.clientID[:0], id...)
		id = p.clientID
	}
	st.clientID = id
	return true
}

func (p *Parser) readEventName(b *Batch, st *eventState, idx int, e *schema.Event, from int) bool {
	s := &p.sc
	if !p.required(b, st, idx, "event_name", kString) {
		return false
	}
	v := s.str()
	switch {
	case len(v) == 0:
		p.reject(b, st, idx, "event_name", "required", "")
	case longer(v, schema.MaxNameLen):
		p.reject(b, st, idx, "event_name", "max_length", clip(v, 32, "…"))
	case !printable(v):
		p.reject(b, st, idx, "event_name", "printable", echo(v))
	case problem.HoldsSecret(unsafeString(v)):
		p.reject(b, st, idx, "event_name", RuleSecret, problem.WithheldSecret)
	case s.escaped:
		e.Name = string(v)
		return true
	default:
		e.Name = unsafeString(v)
		return true
	}
	return false
}

// longer reports whether the UTF-8 text b has more than n characters (the bounds of
// names and ids count characters, as JSON Schema's maxLength does; a text of at most n
// bytes is not counted).
func longer(b []byte, n int) bool {
	return len(b) > n && utf8.RuneCount(b) > n
}

// printable reports whether the UTF-8 text b holds no control character: no C0 or C1
// control, no DEL, and none of Unicode's bidirectional embeddings, overrides and isolates
// (U+202A–U+202E, U+2066–U+2069), which reorder the text shown around them.
func printable(b []byte) bool {
	var all byte
	for _, c := range b {
		if c < 0x20 || c == 0x7f {
			return false
		}
		all |= c
	}
	return all < 0x80 || printableWide(b)
}

// printableWide is printable's check of the characters beyond ASCII.
func printableWide(b []byte) bool {
	for _, r := range string(b) {
		if r >= 0x80 && r <= 0x9f || r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069 {
			return false
		}
	}
	return true
}
