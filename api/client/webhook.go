package client

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"time"
)

// WebhookTolerance is how far a webhook's signed timestamp may be from the receiver's
// clock, in either direction.
const WebhookTolerance = 300 * time.Second

// Errors of VerifyWebhook.
var (
	ErrSignatureMissing   = errors.New("svc: the SVC-Signature header is missing")
	ErrSignatureMalformed = errors.New("svc: the SVC-Signature header is not t=<unix>,v1=<hex>")
	ErrSignatureTimestamp = errors.New("svc: the signature timestamp is outside the tolerance")
	ErrSignatureMismatch  = errors.New("svc: no v1 signature matches the secret")
)

// VerifyWebhook checks an SVC-Signature header (t=<unix>,v1=<hex>[,v1=…]) against the
// raw body as received and the endpoint's signing secrets (several while one rotates):
// some v1 must equal hex(HMAC-SHA256(secret, "<t>.<body>")) and t must be within
// WebhookTolerance of now. Comparisons are constant-time; unknown schemes are ignored.
func VerifyWebhook(header string, body []byte, now time.Time, secrets ...[]byte) error {
	header = strings.TrimSpace(header)
	if header == "" {
		return ErrSignatureMissing
	}
	var t int64
	var sigs [][]byte
	for _, part := range strings.Split(header, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return ErrSignatureMalformed
		}
		switch k {
		case "t":
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n <= 0 || t != 0 {
				return ErrSignatureMalformed
			}
			t = n
		case "v1":
			d, err := hex.DecodeString(v)
			if err != nil || len(d) != sha256.Size {
				return ErrSignatureMalformed
			}
			sigs = append(sigs, d)
		}
	}
	if t == 0 || len(sigs) == 0 {
		return ErrSignatureMalformed
	}
	skew := now.Unix() - t
	if skew < 0 {
		skew = -skew
	}
	if skew > int64(WebhookTolerance/time.Second) {
		return ErrSignatureTimestamp
	}
	ok := false
	for _, s := range secrets {
		m := hmac.New(sha256.New, s)
		m.Write([]byte(strconv.FormatInt(t, 10)))
		m.Write([]byte{'.'})
		m.Write(body)
		want := m.Sum(nil)
		for _, got := range sigs {
			if hmac.Equal(want, got) {
				ok = true
			}
		}
	}
	if !ok {
		return ErrSignatureMismatch
	}
	return nil
}

// SignWebhook returns the SVC-Signature value for body at t with secret (for tests of
// a receiver, and for partners sending inbound messages).
func SignWebhook(secret []byte, t time.Time, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(ts + "."))
	m.Write(body)
	return "t=" + ts + ",v1=" + hex.EncodeToString(m.Sum(nil))
}
