package ingest

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
