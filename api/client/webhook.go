package client

import (
	"fmt"
	"time"

	"svc/api/signature"
)

// WebhookTolerance is how far a webhook's signed timestamp may be from the receiver's
// clock, in either direction.
const WebhookTolerance = signature.Tolerance

// Errors of VerifyWebhook (match them with errors.Is).
var (
	ErrSignatureMissing   = signature.ErrMissing
	ErrSignatureMalformed = signature.ErrMalformed
	ErrSignatureTimestamp = signature.ErrStale
	ErrSignatureMismatch  = signature.ErrMismatch
)

// VerifyWebhook checks an SVC-Signature header (t=<unix>,v1=<hex>[,v1=…]) against the
// raw body as received and the endpoint's signing secrets (several while one rotates):
// some v1 must equal hex(HMAC-SHA256(secret, "<t>.<body>")) and t must be within
// WebhookTolerance of now. Comparisons are constant-time; unknown schemes are ignored.
// It is the service's own check (svc/api/signature).
func VerifyWebhook(header string, body []byte, now time.Time, secrets ...[]byte) error {
	if err := signature.Verify(header, body, secrets, now, WebhookTolerance); err != nil {
		return fmt.Errorf("svc: %w", err)
	}
	return nil
}

// SignWebhook returns the SVC-Signature value for body at t with secret (for tests of
// a receiver, and for partners sending inbound messages).
func SignWebhook(secret []byte, t time.Time, body []byte) string {
	return signature.Value(t.Unix(), body, secret)
}
