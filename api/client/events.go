package client

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"time"
)

// Event is one server-side event of a batch.
type Event struct {
	EventName  string
	OccurredAt time.Time
	// Value and Currency are sent when Currency is not empty.
	Value    float64
	Currency string
	Consent  Consent
	// Email is sent trimmed and lower-cased, the form the service requires; the
	// service hashes it with SHA-256 before storage. Empty: no identity.
	Email string
	// EventID optionally names the event: the same EventID always maps to the same
	// stored event.
	EventID string
}

// Consent is the consent captured for the person.
type Consent struct {
	Measurement bool `json:"measurement"`
}

// MarshalJSON writes the event as POST /events expects it (wireEvent).
func (e Event) MarshalJSON() ([]byte, error) {
	w := wireEvent{EventName: e.EventName, OccurredAt: e.OccurredAt.UTC().Format(time.RFC3339Nano), Consent: e.Consent,
		EventID: e.EventID}
	if e.Currency != "" {
		w.Value, w.Currency = &e.Value, e.Currency
	}
	if e.Email != "" {
		w.Identity = &wireIdentity{Email: NormaliseEmail(e.Email)}
	}
	return json.Marshal(w)
}

// wireEvent is an event of POST /events as sent: its json tags are the members the
// service declares (schema.EventFields; the client's tests compare them). Fields are
// in the order of their JSON names: the bytes sent stay those of a map's encoding (keys
// sorted), as earlier releases sent.
type wireEvent struct {
	Consent    Consent       `json:"consent"`
	Currency   string        `json:"currency,omitempty"`
	EventID    string        `json:"event_id,omitempty"`
	EventName  string        `json:"event_name"`
	Identity   *wireIdentity `json:"identity,omitempty"`
	OccurredAt string        `json:"occurred_at"`
	Value      *float64      `json:"value,omitempty"`
}

// wireIdentity is an event's identity object.
type wireIdentity struct {
	Email string `json:"email"`
}

// NormaliseEmail trims and lower-cases an address: the form the service hashes.
func NormaliseEmail(s string) string { return strings.ToLower(strings.TrimSpace(s)) }

// Batch is the body of POST /events: at most 50 events for one pixel.
type Batch struct {
	PixelID string  `json:"pixel_id"`
	Events  []Event `json:"events"`
	// IdempotencyKey names this logical batch; generated when empty. Reuse it only to
	// send this same batch again.
	IdempotencyKey string `json:"-"`
}

// EventsResult is the 202 answer of POST /events.
type EventsResult struct {
	Accepted   int         `json:"accepted"`
	Rejected   int         `json:"rejected"`
	Duplicates int         `json:"duplicates"` // of Rejected: later copies of an event_id earlier in the batch
	Rejections []Rejection `json:"rejections"`
	RequestID  string      `json:"request_id"`
	// IdempotencyKey is the key the batch was sent with (on every attempt).
	IdempotencyKey string `json:"-"`
	// Replayed is true when the answer is the stored answer of an earlier attempt.
	Replayed bool `json:"-"`
	// Attempts is how many HTTP requests it took.
	Attempts int `json:"-"`
}

// Rejection says why one event of an accepted batch was refused.
type Rejection struct {
	Index int    `json:"index"`
	Field string `json:"field"`
	Rule  string `json:"rule"`
	Value any    `json:"value"`
}

// MaxBatch is the most events POST /events takes at once.
const MaxBatch = 50

// SendEvents sends b with one Idempotency-Key, reused on every retry, so the batch is
// counted once however many attempts it takes.
func (c *Client) SendEvents(ctx context.Context, b Batch) (*EventsResult, error) {
	key := b.IdempotencyKey
	if key == "" {
		key = NewIdempotencyKey()
	}
	resp, err := c.Do(ctx, http.MethodPost, "/events", b, key)
	if err != nil {
		return nil, err
	}
	var r EventsResult
	if err := json.Unmarshal(resp.Body, &r); err != nil {
		return nil, err
	}
	r.IdempotencyKey, r.Replayed, r.Attempts = key, resp.Replayed, resp.Attempts
	return &r, nil
}

// ValidateEvents is a dry run of b (POST /events?validate_only=true): every check of
// SendEvents runs and the answer is what its 202 would carry, but nothing is stored or
// counted. It spends one request of the key's windows, like any request. b's
// IdempotencyKey, when set, is checked for its shape only (never reserved); none is
// generated. A dry run stores nothing, so a retry is always safe.
func (c *Client) ValidateEvents(ctx context.Context, b Batch) (*EventsResult, error) {
	resp, err := c.Do(ctx, http.MethodPost, "/events?validate_only=true", b, b.IdempotencyKey)
	if err != nil {
		return nil, err
	}
	var r EventsResult
	if err := json.Unmarshal(resp.Body, &r); err != nil {
		return nil, err
	}
	r.IdempotencyKey, r.Attempts = b.IdempotencyKey, resp.Attempts
	return &r, nil
}

// ActualsRow is one line item on one day for POST /imports/actuals.
type ActualsRow struct {
	PlanID      string `json:"plan_id"`
	LineID      string `json:"line_id"`
	Date        string `json:"date"` // YYYY-MM-DD
	Impressions uint64 `json:"impressions"`
	Clicks      uint64 `json:"clicks"`
	Spend       string `json:"spend,omitempty"` // decimal, at most four places ("": none, 0)
	Currency    string `json:"currency"`
	Conversions uint64 `json:"conversions"`
}

// ImportResult is the answer of POST /imports/actuals.
type ImportResult struct {
	Rows      int    `json:"rows"`
	Upserted  int    `json:"upserted"`
	RequestID string `json:"request_id"`
	Replayed  bool   `json:"-"`
}

// ImportActuals upserts rows (at most 500) with idempotencyKey ("" generates one),
// reused on every retry.
func (c *Client) ImportActuals(ctx context.Context, rows []ActualsRow, idempotencyKey string) (*ImportResult, error) {
	if idempotencyKey == "" {
		idempotencyKey = NewIdempotencyKey()
	}
	resp, err := c.Do(ctx, http.MethodPost, "/imports/actuals", map[string]any{"rows": rows}, idempotencyKey)
	if err != nil {
		return nil, err
	}
	var r ImportResult
	if err := json.Unmarshal(resp.Body, &r); err != nil {
		return nil, err
	}
	r.Replayed = resp.Replayed
	return &r, nil
}
