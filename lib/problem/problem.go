// Package problem holds the one code table of the API and writes RFC 9457 problem
// documents (application/problem+json). Every failure any HTTP role returns goes through
// New and Write; status, title, retryable and suggested action come only from the table.
package problem

import (
	"fmt"
	"sort"
	"strings"
	"unicode/utf8"
)

// Code is a stable machine-readable error code.
type Code string

// The spec's fourteen codes, then the additive ones (changelog: added, unversioned).
const (
	Unauthorized        Code = "unauthorized"
	InvalidKey          Code = "invalid_key"
	KeyRevoked          Code = "key_revoked"
	KeyExpired          Code = "key_expired"
	InsufficientScope   Code = "insufficient_scope"
	IPNotAllowed        Code = "ip_not_allowed"
	NotFound            Code = "not_found"
	MethodNotAllowed    Code = "method_not_allowed"
	InvalidRequest      Code = "invalid_request"
	IdempotencyKeyReuse Code = "idempotency_key_reuse"
	RateLimited         Code = "rate_limited"
	QuotaExceeded       Code = "quota_exceeded"
	UnsupportedVersion  Code = "unsupported_version"
	InternalError       Code = "internal_error"

	PayloadTooLarge     Code = "payload_too_large"
	IdempotencyKeyInUse Code = "idempotency_key_in_use"
	ServiceUnavailable  Code = "service_unavailable"
	InvalidSignature    Code = "invalid_signature"
	TimestampOutOfRange Code = "timestamp_out_of_range"
)

// Entry is one row of the code table.
type Entry struct {
	Status          int
	Title           string
	Retryable       bool
	SuggestedAction string
	// Condition says when the code is returned (documentation and error pages).
	Condition string
	// Added is true for codes added after the spec's table (additive, unversioned).
	Added bool
}

// Table is the single source of every code's status, title, retryability and advice.
var Table = map[Code]Entry{
	Unauthorized: {401, "Unauthorized", false,
		"Send the header Authorization: Bearer <API key>.",
		"No Authorization header, or not a bearer token.", false},
	InvalidKey: {401, "Invalid API key", false,
		"Copy the whole key again from the API keys screen; check for truncation or whitespace.",
		"The key matches no key on record.", false},
	KeyRevoked: {401, "API key revoked", false,
		"Create a new key; a revoked key never works again.",
		"The key was revoked.", false},
	KeyExpired: {401, "API key expired", false,
		"Create or rotate to a key with a later expiry; expired_at says when this one ended.",
		"The key is past its expiry (or a rotated secret past its cutover); the response carries expired_at.", false},
	InsufficientScope: {403, "Insufficient scope", false,
		"Use a key that has required_scope, or add that scope to this key.",
		"The key lacks the scope the endpoint needs; the response lists required_scope and granted_scopes.", false},
	IPNotAllowed: {403, "Address not allowed", false,
		"Call from an address on the key's allow-list, or add client_ip to it.",
		"The caller's address is not on the key's allow-list; the response carries client_ip.", false},
	NotFound: {404, "Not found", false,
		"Check the id and that it belongs to this key's workspace (sandbox keys see only showroom data).",
		"The object or path does not exist, belongs to another workspace, or a sandbox key asked for a live object.", false},
	MethodNotAllowed: {405, "Method not allowed", false,
		"Use one of the methods in the Allow header.",
		"The path does not serve this HTTP method.", false},
	InvalidRequest: {422, "Invalid request", false,
		"Fix the fields listed in errors[] and send again.",
		"The payload, the query parameters or the HTTP message itself failed validation; what to fix is in errors[].", false},
	IdempotencyKeyReuse: {409, "Idempotency key reused", false,
		"Use a new Idempotency-Key for a different request; reuse a key only to retry the identical request.",
		"The Idempotency-Key was already used on this key with a different body or path.", false},
	RateLimited: {429, "Rate limited", true,
		"Send nothing until Retry-After seconds have passed, then slow down.",
		"The key's per-minute burst limit is exhausted, the caller's address already holds the most open connections the server allows, or it sent too many failed or repeated inbound webhook messages.", false},
	QuotaExceeded: {429, "Daily quota exceeded", true,
		"Wait Retry-After seconds, or ask an administrator to raise the key's daily quota.",
		"The key's daily allowance is exhausted.", false},
	UnsupportedVersion: {400, "Unsupported version", false,
		"Use a published dated version from GET /versions, or stable or next.",
		"The version parameter, the SVC-Version header or the key's pinned version names a version that is not served.", false},
	InternalError: {500, "Internal error", true,
		"Retry with backoff; quote request_id if it persists.",
		"An unhandled failure inside the API.", false},
	PayloadTooLarge: {413, "Payload too large", false,
		"Send a smaller body: split the batch (and no body at all on GET or HEAD).",
		"The body is over the operation's byte ceiling (a GET or HEAD takes no body); it was refused before parsing.", true},
	IdempotencyKeyInUse: {409, "Idempotency key in use", true,
		"Wait for the first request with this Idempotency-Key (at the inbound webhook receiver: this SVC-Webhook-Id or signed content) to finish, then retry.",
		"A request with the same Idempotency-Key is still being processed; at the inbound webhook receiver, a message with the same SVC-Webhook-Id or the same signed content.", true},
	ServiceUnavailable: {503, "Service unavailable", true,
		"Retry after Retry-After seconds with the same Idempotency-Key.",
		"A dependency (Kafka, Redis or ClickHouse) is unavailable, or the server holds its limit of request bodies in flight; nothing was accepted.", true},
	InvalidSignature: {401, "Invalid signature", false,
		"Sign <t>.<body> with HMAC-SHA256 and the workspace's inbound secret; send SVC-Signature: t=<unix>,v1=<hex>.",
		"An inbound webhook's SVC-Signature header is missing, malformed, or matches no valid secret.", true},
	TimestampOutOfRange: {401, "Timestamp out of tolerance", false,
		"Sign with the current time; check the sender's clock (tolerance is five minutes).",
		"An inbound webhook's signature timestamp is more than five minutes from the server's clock.", true},
}

// Codes returns every code, sorted.
func Codes() []Code {
	out := make([]Code, 0, len(Table))
	for c := range Table {
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// FieldError is one entry of errors[]: the field, the rule it broke, the value received,
// and an RFC 6901 JSON Pointer to it.
type FieldError struct {
	Field   string `json:"field"`
	Rule    string `json:"rule"`
	Value   any    `json:"value"`
	Pointer string `json:"pointer,omitempty"`
	Detail  string `json:"detail,omitempty"`
}

// QueryParam is the errors[] entry for query parameter name, invalid by rule; a string
// value is echoed as Echo says (withheld when it holds an '@', cut to EchoLen bytes).
func QueryParam(name, rule string, value any) FieldError {
	if v, ok := value.(string); ok {
		value = Echo(v, EchoLen, "…")
	}
	return FieldError{Field: name, Rule: rule, Value: value, Detail: "query parameter " + name}
}

// Problem is a problem document. Type, Title, Status, DocURL, Retryable and
// SuggestedAction are filled from the table when written; handlers set Code, Detail and
// the code's own extension fields.
type Problem struct {
	Type            string       `json:"type"`
	Title           string       `json:"title"`
	Status          int          `json:"status"`
	Code            Code         `json:"code"`
	Detail          string       `json:"detail"`
	RequestID       string       `json:"request_id"`
	DocURL          string       `json:"doc_url"`
	Retryable       bool         `json:"retryable"`
	SuggestedAction string       `json:"suggested_action"`
	RequiredScope   string       `json:"required_scope,omitempty"`
	GrantedScopes   []string     `json:"granted_scopes,omitempty"`
	Errors          []FieldError `json:"errors,omitempty"`
	ExpiredAt       string       `json:"expired_at,omitempty"`
	ClientIP        string       `json:"client_ip,omitempty"`
	// RetryAfter, when positive, is sent as the Retry-After header (seconds).
	RetryAfter int `json:"-"`
	// Allow lists the methods for method_not_allowed (sent as the Allow header).
	Allow []string `json:"-"`
}

// New returns a problem with code and a detail formatted like fmt.Sprintf. It panics on
// a code missing from Table: that is a programming error caught by tests.
func New(code Code, format string, args ...any) *Problem {
	e, ok := Table[code]
	if !ok {
		panic("problem: code not in table: " + string(code))
	}
	return &Problem{Code: code, Status: e.Status, Title: e.Title, Retryable: e.Retryable,
		SuggestedAction: e.SuggestedAction, Detail: fmt.Sprintf(format, args...)}
}

// Invalid returns an invalid_request problem carrying errs.
func Invalid(detail string, errs ...FieldError) *Problem {
	p := New(InvalidRequest, "%s", detail)
	p.Errors = errs
	return p
}

// Error makes *Problem an error so handlers can return it.
func (p *Problem) Error() string { return string(p.Code) + ": " + p.Detail }

// Finish fills the document's URLs and request id. docsURL is the developer pages' base
// (for example https://api.example.com/developers): type and doc_url are
// docsURL/errors/<code>.
//
// It also withholds, whoever built the document, what must never be echoed: every
// errors[].value string passes through Echo (and is cut past EchoLen bytes and a "…",
// so a value an earlier Echo cut stays as it was), and a word of the detail that holds an '@'
// or a secret (HoldsContact, HoldsSecret) is replaced by "(withheld)", so that an id,
// a version or a path received and quoted in a detail cannot carry an email or a key
// back out.
func (p *Problem) Finish(docsURL, requestID string) {
	p.Type = docsURL + "/errors/" + string(p.Code)
	p.DocURL = p.Type
	p.RequestID = requestID
	for i := range p.Errors {
		e := &p.Errors[i]
		if v, ok := e.Value.(string); ok {
			e.Value = Echo(v, EchoLen+len("…"), "…")
		}
		e.Detail = withholdWords(e.Detail)
		e.Pointer = withholdParts(e.Pointer, "/")
		switch {
		case !HoldsContact(e.Field) && !HoldsSecret(e.Field):
			e.Field = withholdParts(e.Field, ".")
		case e.Pointer != "": // a member name may hold dots: the pointer's parts are exact
			e.Field = strings.ReplaceAll(strings.TrimPrefix(e.Pointer, "/"), "/", ".")
		default:
			e.Field = "(withheld)"
		}
	}
	p.Detail = withholdWords(p.Detail)
}

// longWord is the longest word a detail keeps whole: longer ones are a value received
// (an id, a URL or a sentence of ours is shorter), cut to EchoLen bytes and "…".
// maxDetail bounds a whole detail, which may quote values received.
const (
	longWord  = 200
	maxDetail = 2048
)

// withholdWords is text with each space-separated word that holds an '@' or a secret
// replaced by "(withheld)", each longer than longWord cut, and the whole cut at
// maxDetail bytes.
func withholdWords(text string) string {
	if len(text) <= longWord && !HoldsContact(text) && !HoldsSecret(text) {
		return text
	}
	words := strings.Split(cutAt(text, maxDetail+longWord), " ") // none past the cut is kept
	out := strings.Join(withholdEach(words, longWord), " ")
	if len(out) > maxDetail {
		out = cutAt(out, maxDetail) + "…"
	}
	return out
}

// cutAt is s cut to at most n bytes, on a character boundary.
func cutAt(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// withholdParts is a field name or JSON Pointer (parts joined by sep) with each part that
// holds an '@' or a secret replaced by "(withheld)" and each longer than EchoLen cut: a
// member name the client sent is echoed there (unknown_field), and may be anything.
func withholdParts(s, sep string) string {
	if len(s) <= EchoLen && !HoldsContact(s) && !HoldsSecret(s) {
		return s
	}
	return strings.Join(withholdEach(strings.Split(s, sep), EchoLen), sep)
}

// withholdEach replaces each of parts that holds an '@' or a secret by "(withheld)", and
// cuts each longer than keep bytes to EchoLen and "…".
func withholdEach(parts []string, keep int) []string {
	for i, w := range parts {
		switch {
		case HoldsContact(w) || HoldsSecret(w):
			parts[i] = "(withheld)"
		case len(w) > keep:
			parts[i] = cutAt(w, EchoLen) + "…"
		}
	}
	return parts
}

// HoldsContact reports whether v holds an '@', written or JSON-escaped as \u0040: an
// email, or anything that could be one.
func HoldsContact(v string) bool {
	return strings.IndexByte(v, '@') >= 0 || strings.Contains(v, `\u0040`)
}

// secretMarks end the prefixes of the secrets the service issues: API keys
// ("svc_live_…", "svc_sandbox_…", lib/apikey) and webhook signing secrets ("whsec_…",
// schema/webhook), each followed by an underscore.
var secretMarks = [...]string{"svc_live", "svc_sandbox", "whsec"}

// HoldsSecret reports whether v holds, anywhere and in any letter case, the prefix of a
// secret the service issues (secretMarks and its underscore). It allocates nothing and
// looks only around underscores, so it is cheap enough for every event name.
func HoldsSecret(v string) bool {
	for i := 0; ; i++ {
		j := strings.IndexByte(v[i:], '_')
		if j < 0 {
			return false
		}
		i += j
		if i == 0 {
			continue
		}
		if c := v[i-1] | 0x20; c != 'e' && c != 'x' && c != 'c' { // no mark ends otherwise
			continue
		}
		for _, m := range secretMarks {
			if i >= len(m) && strings.EqualFold(v[i-len(m):i], m) {
				return true
			}
		}
	}
}

// Unavailable returns a 503 service_unavailable problem naming the dependency, with
// Retry-After of retryAfter seconds (at least 1).
func Unavailable(what string, retryAfter int) *Problem {
	p := New(ServiceUnavailable, "%s is unavailable; nothing was changed.", what)
	p.RetryAfter = max(1, retryAfter)
	return p
}

// Pointer is the JSON Pointer (RFC 6901) of a dotted field name, without its leading
// slash: "identity.email" is "identity/email". Field names hold no "~" or "/".
func Pointer(field string) string { return strings.ReplaceAll(field, ".", "/") }

// WithheldEcho is what an answer says in errors[].value in place of a value that may
// hold contact details.
const WithheldEcho = "(withheld: contact details are never echoed)"

// EchoLen is how much of a rejected value an answer echoes (errors[].value, rejections[]).
const EchoLen = 64

// WithheldSecret is what an answer says in place of a value that holds what looks like a
// secret the service issues (HoldsSecret).
const WithheldSecret = "(withheld: secrets are never echoed)"

// Echo is what an answer says of a value received: WithheldEcho when v holds an '@',
// written or escaped as \u0040 (the whole value is read before it is cut, so an email
// after a long prefix does not leave its local part behind), WithheldSecret when it
// holds what looks like a secret (HoldsSecret), else v cut to n bytes and marked with
// more when cut.
func Echo(v string, n int, more string) string {
	if HoldsContact(v) {
		return WithheldEcho
	}
	if HoldsSecret(v) {
		return WithheldSecret
	}
	if len(v) <= n {
		return v
	}
	return v[:n] + more
}
