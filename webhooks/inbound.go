package webhooks

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"time"
	"unicode"

	json "github.com/goccy/go-json"
	"github.com/google/uuid"

	"svc/lib/httpserver"
	"svc/lib/ids"
	"svc/lib/jsondoc"
	"svc/lib/problem"
	"svc/lib/signature"
	"svc/schema/catalog"
	"svc/schema/workspace"
)

// Inbound is the receiver of signed partner messages: POST /webhooks/inbound/{workspace}.
//
// In order: the client address's failure bucket (429 before anything else when it is
// empty: throttle.go), the body size (413 before anything is parsed), the workspace
// (404), the signature (401 invalid_signature or timestamp_out_of_range), the message
// id (422), the replay guard (a message whose id, or whose signed content "<t>.<body>"
// under any id, was already processed or ignored is ignored again: 200, nothing
// changes), the JSON (422), then the type: actuals.reported and campaign.actuals
// upsert campaign actuals; any other type is ignored. Every failure and every replay
// is charged to the client address's bucket. Every message of an existing workspace is
// recorded in webhook_inbound with its outcome: a processed one (or one ignored for its
// type) before the answer, a failed or replayed one through a bounded queue written
// once a second (inboundlog.go). When Redis or ClickHouse is down the answer is 503
// and nothing is marked done, so the partner's retry is processed.
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

	queue rowQueue // log rows of failed and replayed messages, until the next flush
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

// processingHold is how long a message id (or content) stays reserved while it is
// processed.
const processingHold = time.Minute

// contentMargin is added to twice the tolerance to make the content guard's window:
// content signed at t is accepted from t - tolerance to t + tolerance by each
// process's clock, so its guard must outlive the first arrival by 2 × tolerance, plus
// the clocks' disagreement.
const contentMargin = time.Minute

// call is one request to the receiver: its client's failure bucket, its log row as far
// as known (known: the workspace exists, so the message gets a row), and what of the
// replay guard it holds.
type call struct {
	in      *Inbound
	r       *httpserver.Request
	ctx     context.Context
	addr    string
	rec     InboundRow
	known   bool
	digest  [32]byte
	holdsID bool
	holdsSC bool // the signed content
}

func (in *Inbound) handle(r *httpserver.Request) error {
	c := &call{in: in, r: r, ctx: r.Context(), addr: failureAddr(r.ClientIP())}
	if th, err := in.Store.PeekFailures(c.ctx, c.addr, in.Config.InboundFailureBurst, in.failureInterval()); err != nil {
		in.Log.Warn("inbound: failure bucket unreadable; not throttling", "request_id", r.ID, "err", err.Error())
	} else if th.Limited {
		return c.throttled(th)
	}
	body := r.Body()
	c.rec = InboundRow{ReceivedAt: in.Now().UTC(), BodyBytes: len(body), RequestID: r.ID,
		MessageID: cleanID(string(r.Ctx.Request.Header.Peek(signature.MessageIDHeader)))}
	// Refused before parsing anything, the body included, as the server's MaxBody
	// refuses it (this keeps the guarantee if the route is served elsewhere): not
	// charged to the address, not kept in the inbound log, the connection closed; only
	// the metric counts it.
	if len(body) > in.Config.InboundMaxBody {
		in.count(Failed, reasonTooLarge)
		r.Ctx.SetConnectionClose()
		return problem.New(problem.PayloadTooLarge, "The body is %d bytes; the inbound limit is %d bytes.", len(body), in.Config.InboundMaxBody)
	}
	if err := c.workspace(); err != nil {
		return err
	}
	c.rec.BodySHA256 = sha256Hex(body)
	sig, err := c.verify(body)
	if err != nil {
		return err
	}
	if err := c.messageID(); err != nil {
		return err
	}
	if done, err := c.reserve(sig.T, body); done {
		return err
	}
	// From here the message id and content are reserved: every path ends or releases them.
	return c.process(body)
}

// workspace checks the path's workspace: 404 if there is none (no row: nothing to
// file it under).
func (c *call) workspace() error {
	ws, err := ids.Parse(ids.Org, c.r.Param("workspace"))
	if err != nil {
		return c.fail(reasonNoWorkspace, "", noWorkspace(problem.New(problem.NotFound, "No workspace %q: want org_<uuid> or a UUID.", c.r.Param("workspace"))))
	}
	if _, err := c.in.Keys.Workspace(c.ctx, ws); errors.Is(err, workspace.ErrNotFound) {
		return c.fail(reasonNoWorkspace, "", noWorkspace(problem.New(problem.NotFound, "No workspace %s.", ids.Format(ids.Org, ws))))
	} else if err != nil {
		return c.unavailable("workspace lookup", err, "the workspace store", 1)
	}
	c.rec.WorkspaceID, c.known = ws, true
	return nil
}

// noWorkspace is p with the receiver's advice: the route takes no key.
func noWorkspace(p *problem.Problem) *problem.Problem {
	p.SuggestedAction = "Check the workspace id in the URL: the org_… of the workspace whose administrators issued your inbound secret."
	return p
}

// verify checks the signature against the workspace's valid secrets.
func (c *call) verify(body []byte) (signature.Parsed, error) {
	in, ws := c.in, c.rec.WorkspaceID
	secrets, err := in.Store.InboundSecrets(c.ctx, ws)
	if err != nil {
		return signature.Parsed{}, c.unavailable("secret lookup", err, "the secret store", 1)
	}
	keysB := make([][]byte, len(secrets))
	for i, s := range secrets {
		keysB[i] = []byte(s.Secret)
	}
	if len(keysB) == 0 {
		// Answered as a mismatch: the caller is not authenticated, and whether a
		// workspace has a secret is its admins' to read (the inbound log says so).
		p := problem.New(problem.InvalidSignature, "%s.", capitalize(signature.ErrMismatch.Error()))
		return signature.Parsed{}, c.fail(reasonNoSecret, "no inbound secret: issue one at /app/webhooks/inbound", p)
	}
	sig, err := signature.Parse(string(c.r.Ctx.Request.Header.Peek(signature.Header)))
	if err == nil {
		err = signature.VerifyParsed(sig, body, keysB, in.Now(), in.Config.Tolerance)
	}
	switch {
	case errors.Is(err, signature.ErrStale):
		p := problem.New(problem.TimestampOutOfRange, "The signature timestamp is more than %d seconds from the server's clock (%s).",
			int(in.Config.Tolerance/time.Second), in.Now().UTC().Format(time.RFC3339))
		return sig, c.fail(reasonStale, "timestamp out of range", p)
	case err != nil:
		return sig, c.fail(reasonSignature, "invalid signature: "+err.Error(), problem.New(problem.InvalidSignature, "%s.", capitalize(err.Error())))
	}
	return sig, nil
}

// messageID checks SVC-Webhook-Id: 1..200 printable ASCII.
func (c *call) messageID() error {
	raw := string(c.r.Ctx.Request.Header.Peek(signature.MessageIDHeader))
	if raw != "" && c.rec.MessageID == raw {
		return nil
	}
	rule, detail := "required", "The SVC-Webhook-Id header is required: a unique id per message, the same on every retry."
	if raw != "" {
		rule, detail = "format", "SVC-Webhook-Id must be 1 to 200 printable ASCII characters."
	}
	p := problem.Invalid(detail, problem.FieldError{Field: signature.MessageIDHeader, Rule: rule, Value: c.rec.MessageID})
	return c.fail(reasonMessageID, "message id: "+rule, p)
}

// reserve takes the replay guard: the message id, then the signed content's digest
// (the id is not signed: a captured message resent under a new id is the same
// content). A message whose id or content was already processed or ignored is a
// replay, answered 200 ignored; one whose id or content is being processed gets 409.
// Either way nothing stays reserved (a borrowed id is not burnt) and done is true.
func (c *call) reserve(t int64, body []byte) (done bool, err error) {
	in, ws := c.in, c.rec.WorkspaceID
	state, err := in.Store.BeginMessage(c.ctx, ws, c.rec.MessageID, processingHold)
	if err != nil {
		return true, c.unavailable("replay guard", err, "the message store", 1)
	}
	if state != "" {
		return true, c.seen(state, "message id", fmt.Sprintf("Message %s", c.rec.MessageID))
	}
	c.holdsID = true
	c.digest = signature.Digest(t, body)
	state, err = in.Store.BeginContent(c.ctx, ws, c.digest, processingHold)
	if err != nil {
		c.release()
		return true, c.unavailable("replay guard", err, "the message store", 1)
	}
	if state != "" {
		c.release()
		return true, c.seen(state, "signed content", "The same signed content (under another message id)")
	}
	c.holdsSC = true
	return false, nil
}

// seen answers a message whose id or content the guard holds in state.
func (c *call) seen(state, what, subject string) error {
	if state == msgProcessing {
		p := problem.New(problem.IdempotencyKeyInUse, "%s is being processed; retry in a second.", subject)
		p.RetryAfter = 1
		return c.fail(reasonInFlight, "a message with this "+what+" is being processed", p)
	}
	return c.replay("replay: " + what + " already " + state)
}

// process parses the reserved message and applies it.
func (c *call) process(body []byte) error {
	msg, perr := ParseMessage(body)
	c.rec.Type = msg.Type
	if perr != nil {
		c.release()
		return c.fail(reasonMalformed, "malformed: "+perr.Detail, perr)
	}
	if !msg.Known() {
		return c.done(Ignored, "unknown type", 0)
	}
	if err := c.in.Actuals.UpsertActuals(c.ctx, c.rec.WorkspaceID, msg.Rows); errors.Is(err, catalog.ErrInvalid) {
		c.release()
		p := problem.Invalid("The message's data failed validation.", problem.FieldError{Field: "data", Rule: "valid", Value: truncate(err.Error())})
		return c.fail(reasonMalformed, "malformed: "+err.Error(), p)
	} else if err != nil {
		c.release()
		c.rec.Outcome, c.rec.Reason, c.rec.Status = Failed, "store unavailable", 503
		c.in.enqueue(c.rec)
		return c.unavailable("actuals upsert", err, "the actuals store", 5)
	}
	return c.done(Processed, "", len(msg.Rows))
}

// done records the message's outcome (before answering: the guard is ended only once
// its row is written), ends the guard and answers 200.
func (c *call) done(outcome, reason string, rows int) error {
	c.rec.Outcome, c.rec.Reason, c.rec.Status, c.rec.Rows = outcome, reason, 200, rows
	if err := c.in.Logs.InsertInbound(c.ctx, c.rec); err != nil {
		// The upsert is repeatable: release, answer 503, and the retry records it.
		c.release()
		return c.unavailable("log insert", err, "the message log", 5)
	}
	c.end(outcome)
	c.in.count(outcome, "")
	return c.r.JSON(200, InboundResult{Outcome: outcome, MessageID: c.rec.MessageID, Type: c.rec.Type, Rows: rows, Reason: reason})
}

func (c *call) release() {
	in, ws := c.in, c.rec.WorkspaceID
	var errs []error
	if c.holdsID {
		errs = append(errs, in.Store.ReleaseMessage(c.ctx, ws, c.rec.MessageID))
	}
	if c.holdsSC {
		errs = append(errs, in.Store.ReleaseContent(c.ctx, ws, c.digest))
	}
	c.holdsID, c.holdsSC = false, false
	if err := errors.Join(errs...); err != nil {
		in.Log.Warn("inbound: release failed; the reservation lapses by itself", "request_id", c.r.ID, "err", err.Error())
	}
}

func (c *call) end(state string) {
	in, ws := c.in, c.rec.WorkspaceID
	err := errors.Join(in.Store.EndMessage(c.ctx, ws, c.rec.MessageID, state, in.Config.ReplayWindow),
		in.Store.EndContent(c.ctx, ws, c.digest, state, 2*in.Config.Tolerance+contentMargin))
	if err != nil {
		in.Log.Warn("inbound: replay guard not recorded", "request_id", c.r.ID, "err", err.Error())
	}
}

// knownWorkspace returns the path's workspace if it exists (for the row of a message
// refused before the workspace is checked).
func (in *Inbound) knownWorkspace(r *httpserver.Request) (uuid.UUID, bool) {
	ws, err := ids.Parse(ids.Org, r.Param("workspace"))
	if err != nil {
		return uuid.Nil, false
	}
	if _, err := in.Keys.Workspace(r.Context(), ws); err != nil {
		return uuid.Nil, false
	}
	return ws, true
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
	if p := jsondoc.Check(body); p != nil {
		return Message{}, p
	}
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
