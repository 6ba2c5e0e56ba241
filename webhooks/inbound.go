package webhooks

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"log/slog"
	"time"
	"unicode"

	json "github.com/goccy/go-json"
	"github.com/google/uuid"

	"svc/lib/httpserver"
	"svc/lib/ids"
	"svc/lib/problem"
	"svc/lib/signature"
	"svc/schema/catalog"
	"svc/schema/workspace"
)

// Inbound is the receiver of signed partner messages: POST /webhooks/inbound/{workspace}.
//
// In order: the body size (413 before anything is parsed), the workspace (404), the
// signature (401 invalid_signature or timestamp_out_of_range), the message id (422),
// the replay guard (a message id already processed or ignored is ignored again: 200,
// nothing changes), the JSON (422), then the type: actuals.reported and
// campaign.actuals upsert campaign actuals; any other type is ignored. Every message
// is recorded in webhook_inbound with its outcome. When Redis or ClickHouse is down the
// answer is 503 and nothing is marked done, so the partner's retry is processed.
type Inbound struct {
	Config  Config
	Store   *Store
	Logs    *Logs
	Keys    *workspace.Store
	Actuals ActualsWriter
	Metrics *Metrics
	Log     *slog.Logger
	// Now is the clock for the signature tolerance (tests replace it).
	Now func() time.Time
}

// Route returns the receiver's route. It is Public: the signature authenticates it.
func (in *Inbound) Route() httpserver.Route {
	return httpserver.Route{Method: "POST", Path: "/webhooks/inbound/{workspace}", Public: true,
		MaxBody: in.Config.InboundMaxBody,
		Summary: "Receive a signed partner message (actuals.reported, campaign.actuals).", Handle: in.handle}
}

// InboundResult is the body of a 200 answer.
type InboundResult struct {
	Outcome   string `json:"outcome"`
	MessageID string `json:"message_id"`
	Type      string `json:"type,omitempty"`
	Rows      int    `json:"rows_written"`
	Reason    string `json:"reason,omitempty"`
}

// maxMessageID bounds SVC-Webhook-Id.
const maxMessageID = 200

// processingHold is how long a message id stays reserved while it is processed.
const processingHold = time.Minute

func (in *Inbound) handle(r *httpserver.Request) error {
	body := r.Body()
	// Refused before parsing anything, the body included. (The server applies MaxBody
	// too; this keeps the guarantee if the route is served elsewhere.)
	if len(body) > in.Config.InboundMaxBody {
		p := problem.New(problem.PayloadTooLarge, "The body is %d bytes; the inbound limit is %d bytes.", len(body), in.Config.InboundMaxBody)
		in.recordEarly(r, Failed, "payload too large", p.Status)
		return p
	}
	ctx := r.Context()
	ws, err := ids.Parse(ids.Org, r.Param("workspace"))
	if err != nil {
		return problem.New(problem.NotFound, "No workspace %q: want org_<uuid> or a UUID.", r.Param("workspace"))
	}
	if _, err := in.Keys.Workspace(ctx, ws); errors.Is(err, workspace.ErrNotFound) {
		return problem.New(problem.NotFound, "No workspace %s.", ids.Format(ids.Org, ws))
	} else if err != nil {
		in.Log.Error("inbound: workspace lookup failed", "request_id", r.ID, "err", err.Error())
		return problem.Unavailable("the workspace store", 1)
	}
	rec := InboundRow{WorkspaceID: ws, ReceivedAt: in.Now().UTC(), BodyBytes: len(body),
		BodySHA256: sha256Hex(body), RequestID: r.ID, MessageID: cleanID(string(r.Ctx.Request.Header.Peek(signature.MessageIDHeader)))}

	secrets, err := in.Store.InboundSecrets(ctx, ws)
	if err != nil {
		in.Log.Error("inbound: secret lookup failed", "request_id", r.ID, "err", err.Error())
		return problem.Unavailable("the secret store", 1)
	}
	keysB := make([][]byte, len(secrets))
	for i, s := range secrets {
		keysB[i] = []byte(s.Secret)
	}
	if len(keysB) == 0 {
		p := problem.New(problem.InvalidSignature, "Workspace %s has no inbound signing secret; issue one with svc admin webhook inbound-secret.", ids.Format(ids.Org, ws))
		return in.fail(ctx, r, rec, "no inbound secret", p)
	}
	switch err := signature.Verify(string(r.Ctx.Request.Header.Peek(signature.Header)), body, keysB, in.Now(), in.Config.Tolerance); {
	case errors.Is(err, signature.ErrStale):
		p := problem.New(problem.TimestampOutOfRange, "The signature timestamp is more than %d seconds from the server's clock (%s).",
			int(in.Config.Tolerance/time.Second), in.Now().UTC().Format(time.RFC3339))
		return in.fail(ctx, r, rec, "timestamp out of range", p)
	case err != nil:
		return in.fail(ctx, r, rec, "invalid signature: "+err.Error(), problem.New(problem.InvalidSignature, "%s.", capitalize(err.Error())))
	}

	raw := string(r.Ctx.Request.Header.Peek(signature.MessageIDHeader))
	if raw == "" || rec.MessageID != raw {
		rule, detail := "required", "The SVC-Webhook-Id header is required: a unique id per message, the same on every retry."
		if raw != "" {
			rule, detail = "format", "SVC-Webhook-Id must be 1 to 200 printable ASCII characters."
		}
		p := problem.Invalid(detail, problem.FieldError{Field: signature.MessageIDHeader, Rule: rule, Value: rec.MessageID})
		return in.fail(ctx, r, rec, "message id: "+rule, p)
	}

	state, err := in.Store.BeginMessage(ctx, ws, rec.MessageID, processingHold)
	if err != nil {
		in.Log.Error("inbound: replay guard failed", "request_id", r.ID, "err", err.Error())
		return problem.Unavailable("the message store", 1)
	}
	switch state {
	case msgProcessing:
		p := problem.New(problem.IdempotencyKeyInUse, "Message %s is being processed; retry in a second.", rec.MessageID)
		p.RetryAfter = 1
		return in.fail(ctx, r, rec, "a message with this id is being processed", p)
	case msgProcessed, msgIgnored:
		rec.Outcome, rec.Reason, rec.Status = Ignored, "replay: message id already "+state, 200
		if err := in.record(ctx, rec); err != nil {
			in.Log.Error("inbound: log insert failed", "request_id", r.ID, "err", err.Error())
			return problem.Unavailable("the message log", 5)
		}
		return r.JSON(200, InboundResult{Outcome: Ignored, MessageID: rec.MessageID, Reason: rec.Reason})
	}
	// From here the message id is reserved: every path either ends it or releases it.

	msg, perr := ParseMessage(body)
	rec.Type = msg.Type
	if perr != nil {
		in.release(r, ws, rec.MessageID)
		return in.fail(ctx, r, rec, "malformed: "+perr.Detail, perr)
	}
	if !msg.Known() {
		rec.Outcome, rec.Reason, rec.Status = Ignored, "unknown type", 200
		if err := in.record(ctx, rec); err != nil {
			in.release(r, ws, rec.MessageID)
			in.Log.Error("inbound: log insert failed", "request_id", r.ID, "err", err.Error())
			return problem.Unavailable("the message log", 5)
		}
		in.end(r, ws, rec.MessageID, msgIgnored)
		return r.JSON(200, InboundResult{Outcome: Ignored, MessageID: rec.MessageID, Type: msg.Type, Reason: rec.Reason})
	}
	if err := in.Actuals.UpsertActuals(ctx, ws, msg.Rows); errors.Is(err, catalog.ErrInvalid) {
		in.release(r, ws, rec.MessageID)
		p := problem.Invalid("The message's data failed validation.", problem.FieldError{Field: "data", Rule: "valid", Value: truncate(err.Error())})
		return in.fail(ctx, r, rec, "malformed: "+err.Error(), p)
	} else if err != nil {
		in.release(r, ws, rec.MessageID)
		in.Log.Error("inbound: actuals upsert failed", "request_id", r.ID, "err", err.Error())
		rec.Outcome, rec.Reason, rec.Status = Failed, "store unavailable", 503
		_ = in.record(ctx, rec)
		return problem.Unavailable("the actuals store", 5)
	}
	rec.Outcome, rec.Rows, rec.Status = Processed, len(msg.Rows), 200
	if err := in.record(ctx, rec); err != nil {
		// The upsert is repeatable: release, answer 503, and the retry records it.
		in.release(r, ws, rec.MessageID)
		in.Log.Error("inbound: log insert failed", "request_id", r.ID, "err", err.Error())
		return problem.Unavailable("the message log", 5)
	}
	in.end(r, ws, rec.MessageID, msgProcessed)
	return r.JSON(200, InboundResult{Outcome: Processed, MessageID: rec.MessageID, Type: msg.Type, Rows: len(msg.Rows)})
}

// fail records a failed message (best effort: the answer is the 4xx either way) and
// returns p.
func (in *Inbound) fail(ctx context.Context, r *httpserver.Request, rec InboundRow, reason string, p *problem.Problem) error {
	rec.Outcome, rec.Reason, rec.Status = Failed, reason, p.Status
	if err := in.record(ctx, rec); err != nil {
		in.Log.Warn("inbound: log insert failed", "request_id", r.ID, "err", err.Error())
	}
	return p
}

// recordEarly records a message refused before its workspace was checked, if the
// workspace exists.
func (in *Inbound) recordEarly(r *httpserver.Request, outcome, reason string, status int) {
	ws, err := ids.Parse(ids.Org, r.Param("workspace"))
	if err != nil {
		return
	}
	if _, err := in.Keys.Workspace(r.Context(), ws); err != nil {
		return
	}
	rec := InboundRow{WorkspaceID: ws, ReceivedAt: in.Now().UTC(), BodyBytes: len(r.Body()), RequestID: r.ID,
		MessageID: cleanID(string(r.Ctx.Request.Header.Peek(signature.MessageIDHeader))), Outcome: outcome,
		Reason: reason, Status: status}
	if err := in.record(r.Context(), rec); err != nil {
		in.Log.Warn("inbound: log insert failed", "request_id", r.ID, "err", err.Error())
	}
}

func (in *Inbound) record(ctx context.Context, rec InboundRow) error {
	if in.Metrics != nil {
		in.Metrics.Inbound.WithLabelValues(rec.Outcome).Inc()
	}
	return in.Logs.InsertInbound(ctx, rec)
}

func (in *Inbound) release(r *httpserver.Request, ws uuid.UUID, id string) {
	if err := in.Store.ReleaseMessage(r.Context(), ws, id); err != nil {
		in.Log.Warn("inbound: release failed; the id lapses by itself", "request_id", r.ID, "err", err.Error())
	}
}

func (in *Inbound) end(r *httpserver.Request, ws uuid.UUID, id, state string) {
	if err := in.Store.EndMessage(r.Context(), ws, id, state, in.Config.ReplayWindow); err != nil {
		in.Log.Warn("inbound: replay guard not recorded", "request_id", r.ID, "err", err.Error())
	}
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// cleanID returns s if it is a usable message id (1..200 printable ASCII), otherwise
// a truncated, printable form of it for the log.
func cleanID(s string) string {
	out := make([]rune, 0, min(len(s), maxMessageID))
	for _, c := range s {
		if len(out) == maxMessageID {
			break
		}
		if c > unicode.MaxASCII || !unicode.IsPrint(c) {
			c = '?'
		}
		out = append(out, c)
	}
	return string(out)
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return string(bytes.ToUpper([]byte(s[:1]))) + s[1:]
}

// ---- message payloads ----

// Inbound message types.
const (
	TypeActualsReported = "actuals.reported"
	TypeCampaignActuals = "campaign.actuals"
)

// Message is a parsed inbound message.
type Message struct {
	Type string
	Rows []ActualsRow
}

// Known reports whether the type has an effect.
func (m Message) Known() bool {
	return m.Type == TypeActualsReported || m.Type == TypeCampaignActuals
}

// envelope is the outer JSON of every inbound message.
type envelope struct {
	Type *string         `json:"type"`
	Data json.RawMessage `json:"data"`
}

// ParseMessage parses and validates body. An unknown type is not an error (the
// message is ignored); a known type with a bad payload is, with one errors[] entry per
// field problem.
func ParseMessage(body []byte) (Message, *problem.Problem) {
	var env envelope
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&env); err != nil {
		return Message{}, problem.Invalid("The body is not a JSON object {\"type\": …, \"data\": {…}}.",
			problem.FieldError{Field: "body", Rule: "json", Value: nil, Pointer: ""})
	}
	if dec.More() {
		return Message{}, problem.Invalid("The body holds more than one JSON value.",
			problem.FieldError{Field: "body", Rule: "json", Value: nil})
	}
	if env.Type == nil || *env.Type == "" {
		return Message{}, problem.Invalid("The message has no type.",
			problem.FieldError{Field: "type", Rule: "required", Value: nil, Pointer: "/type"})
	}
	m := Message{Type: *env.Type}
	if len(m.Type) > 100 {
		m.Type = m.Type[:100]
	}
	if !m.Known() {
		return m, nil
	}
	rows, errs := parseActuals(m.Type, env.Data)
	if len(errs) > 0 {
		return m, problem.Invalid("The message's data failed validation; see errors[].", errs...)
	}
	m.Rows = rows
	return m, nil
}
