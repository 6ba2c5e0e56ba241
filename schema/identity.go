package schema

import (
	"crypto/sha256"
	"unicode"
	"unicode/utf8"
)

// EmailDigest checks an address the way POST /events does (trimmed, lower-cased, of
// plausible shape: see emailRule) and returns its SHA-256, the only form in which the
// service keeps it. rule is "" when the address is acceptable, else the rule it breaks
// ("email" or "normalised"); the address itself must never be echoed. Every place that
// takes an email (POST /events, POST /erasures) goes through here, so the same person
// always gets the same digest.
func EmailDigest(v []byte) (digest [32]byte, rule string) {
	if rule = emailRule(v); rule != "" {
		return digest, rule
	}
	return sha256.Sum256(v), ""
}

// emailRule returns "" for a trimmed, lowercased address of plausible shape. Lower-cased
// and trimmed as Unicode says (strings.ToLower, strings.TrimSpace): "Ädä@…" and an
// address ending in a no-break space are not normalised either (nonASCIIRule).
func emailRule(v []byte) string {
	if len(v) == 0 || len(v) > MaxEmailLen {
		return "email"
	}
	at, all := -1, byte(0)
	for i, c := range v {
		all |= c
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			if i == 0 || i == len(v)-1 {
				return "normalised"
			}
			return "email"
		case c >= 'A' && c <= 'Z':
			return "normalised"
		case c == '@':
			if at >= 0 {
				return "email"
			}
			at = i
		case c < 0x20:
			return "email"
		}
	}
	if at <= 0 || at == len(v)-1 {
		return "email"
	}
	if all >= utf8.RuneSelf { // a byte past ASCII
		return nonASCIIRule(v)
	}
	return ""
}

// nonASCIIRule judges the characters of an address that holds a byte past ASCII: not
// UTF-8, a control or a space inside it: "email"; a character strings.ToLower changes,
// or a space at either end: "normalised".
func nonASCIIRule(v []byte) string {
	if !utf8.Valid(v) {
		return "email"
	}
	for i := 0; i < len(v); {
		r, n := utf8.DecodeRune(v[i:])
		switch {
		case unicode.IsSpace(r) && (i == 0 || i+n == len(v)):
			return "normalised"
		case unicode.IsSpace(r) || unicode.IsControl(r):
			return "email"
		case unicode.ToLower(r) != r:
			return "normalised"
		}
		i += n
	}
	return ""
}
