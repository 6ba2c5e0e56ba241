// Package signature is the SVC-Signature scheme of webhooks, both directions (outbound
// deliveries signed by the webhooks role, inbound partner messages it verifies, and the
// Go client's VerifyWebhook and SignWebhook), written once. Standard library only, so
// that the client stays free of the server's dependencies.
package signature

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"time"
)

// The scheme (webhooks/README.md, "Signatures"):
//
//	SVC-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>[,v1=…]
//
// While a secret rotates, the sender puts one v1 per valid secret; a receiver accepts
// the message when any v1 matches any of its secrets and t is within Tolerance of its
// clock, in either direction. Unknown schemes (v0, v2, …) are ignored, so a receiver
// keeps working when a later scheme is added alongside v1.

// Header and MessageIDHeader are the header names of the scheme.
const (
	Header          = "SVC-Signature"
	MessageIDHeader = "SVC-Webhook-Id"
)

// Tolerance is how far the signed timestamp may be from the receiver's clock.
const Tolerance = 300 * time.Second

// Errors of Verify. None of them carries the header, the body or a secret.
var (
	ErrMissing   = errors.New("the SVC-Signature header is missing")
	ErrMalformed = errors.New("the SVC-Signature header is not t=<unix>,v1=<hex>")
	ErrMismatch  = errors.New("no v1 signature matches a valid secret")
	ErrStale     = errors.New("the signature timestamp is outside the tolerance")
	// ErrNoSecret: no secret, or only empty ones, to verify with. An empty secret would
	// accept anything signed with an empty key: a receiver whose secret setting is unset
	// must refuse every message, not take forgeries.
	ErrNoSecret = errors.New("no secret to verify with")
)

// Sign returns hex(HMAC-SHA256(secret, "<t>.<body>")).
func Sign(secret []byte, t int64, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write(strconv.AppendInt(nil, t, 10))
	m.Write([]byte{'.'})
	m.Write(body)
	return hex.EncodeToString(m.Sum(nil))
}

// Value returns the SVC-Signature header value for body at t, with one v1 per
// secret (in the order given).
func Value(t int64, body []byte, secrets ...[]byte) string {
	var b strings.Builder
	b.WriteString("t=")
	b.WriteString(strconv.FormatInt(t, 10))
	for _, s := range secrets {
		b.WriteString(",v1=")
		b.WriteString(Sign(s, t, body))
	}
	return b.String()
}

// Parsed is a parsed SVC-Signature header.
type Parsed struct {
	T  int64
	V1 [][]byte // decoded digests
}

// maxSignatures bounds the v1 entries considered (a rotation needs two or three).
const maxSignatures = 8

// Parse parses an SVC-Signature header value. It returns ErrMissing for
// an empty value and ErrMalformed for anything that lacks a t or a well-formed v1.
func Parse(h string) (Parsed, error) {
	var p Parsed
	h = strings.TrimSpace(h)
	if h == "" {
		return p, ErrMissing
	}
	haveT := false
	for _, part := range strings.Split(h, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return p, ErrMalformed
		}
		switch k {
		case "t":
			// Decimal digits as the sender wrote them into what it signed: a leading
			// zero or sign would be signed as sent but checked as the number's own digits.
			if haveT || v == "" || len(v) > 12 || v[0] < '1' || v[0] > '9' {
				return p, ErrMalformed
			}
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n <= 0 {
				return p, ErrMalformed
			}
			p.T, haveT = n, true
		case "v1":
			d, err := hex.DecodeString(v)
			if err != nil || len(d) != sha256.Size {
				return p, ErrMalformed
			}
			if len(p.V1) < maxSignatures {
				p.V1 = append(p.V1, d)
			}
		}
	}
	if !haveT || len(p.V1) == 0 {
		return p, ErrMalformed
	}
	return p, nil
}

// Verify checks header against body, the receiver's valid secrets and now. The
// timestamp is checked before the digests (a stale message is reported as ErrStale
// whatever its signature), and every comparison is constant-time.
func Verify(header string, body []byte, secrets [][]byte, now time.Time, tolerance time.Duration) error {
	p, err := Parse(header)
	if err != nil {
		return err
	}
	return VerifyParsed(p, body, secrets, now, tolerance)
}

// VerifyParsed is Verify of a header already parsed.
func VerifyParsed(p Parsed, body []byte, secrets [][]byte, now time.Time, tolerance time.Duration) error {
	skew := now.Unix() - p.T
	if skew < 0 {
		skew = -skew
	}
	if skew > int64(tolerance/time.Second) {
		return ErrStale
	}
	ok, some := false, false
	for _, s := range secrets {
		if len(s) == 0 {
			continue
		}
		some = true
		m := hmac.New(sha256.New, s)
		m.Write(strconv.AppendInt(nil, p.T, 10))
		m.Write([]byte{'.'})
		m.Write(body)
		want := m.Sum(nil)
		for _, got := range p.V1 {
			// No early exit: every pair is compared, so timing does not say which
			// secret or which entry matched.
			if hmac.Equal(want, got) {
				ok = true
			}
		}
	}
	switch {
	case !some:
		return ErrNoSecret
	case !ok:
		return ErrMismatch
	}
	return nil
}

// Digest returns SHA-256("<t>.<body>"): the exact bytes a signature covers, without
// any secret. Two messages with the same digest are the same signed content, whatever
// their SVC-Webhook-Id (which is not signed); a receiver's replay guard keys on it.
func Digest(t int64, body []byte) [sha256.Size]byte {
	h := sha256.New()
	h.Write(strconv.AppendInt(nil, t, 10))
	h.Write([]byte{'.'})
	h.Write(body)
	var d [sha256.Size]byte
	h.Sum(d[:0])
	return d
}
