package schema

import "crypto/sha256"

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

// emailRule returns "" for a trimmed, lowercased address of plausible shape.
func emailRule(v []byte) string {
	if len(v) == 0 || len(v) > MaxEmailLen {
		return "email"
	}
	at := -1
	for i, c := range v {
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
	return ""
}
