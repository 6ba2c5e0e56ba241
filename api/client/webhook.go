package client

import (
	"errors"
	"time"

	"svc/lib/signature"
)

// WebhookTolerance is how far a webhook's signed timestamp may be from the receiver's
// clock, in either direction.
const WebhookTolerance = signature.Tolerance

// Errors of VerifyWebhook.
var (
	ErrSignatureMissing   = errors.New("svc: the SVC-Signature header is missing")
	ErrSignatureMalformed = errors.New("svc: the SVC-Signature header is not t=<unix>,v1=<hex>")
	ErrSignatureTimestamp = errors.New("svc: the signature timestamp is outside the tolerance")
	ErrSignatureMismatch  = errors.New("svc: no v1 signature matches the secret")
	ErrSignatureNoSecret  = errors.New("svc: no secret to verify with (an empty secret verifies nothing)")
)

// clientErrors names the scheme's errors as this package's.
var clientErrors = map[error]error{
	signature.ErrMissing: ErrSignatureMissing, signature.ErrMalformed: ErrSignatureMalformed,
	signature.ErrStale: ErrSignatureTimestamp, signature.ErrMismatch: ErrSignatureMismatch,
	signature.ErrNoSecret: ErrSignatureNoSecret,
}

// VerifyWebhook checks an SVC-Signature header (t=<unix>,v1=<hex>[,v1=…]) against the
// raw body as received and the endpoint's signing secrets (several while one rotates):
// some v1 must equal hex(HMAC-SHA256(secret, "<t>.<body>")) and t must be within
// WebhookTolerance of now. Comparisons are constant-time; unknown schemes are ignored.
// It is the service's own check (svc/lib/signature).
func VerifyWebhook(header string, body []byte, now time.Time, secrets ...[]byte) error {
	err := signature.Verify(header, body, secrets, now, WebhookTolerance)
	if mine, ok := clientErrors[err]; ok {
		return mine
	}
	return err
}

// SignWebhook returns the SVC-Signature value for body at t with secret (for tests of
// a receiver, and for partners sending inbound messages).
func SignWebhook(secret []byte, t time.Time, body []byte) string {
	return signature.Value(t.Unix(), body, secret)
}
