package api

import (
	"context"
	"errors"
	"slices"
	"time"
	"unicode/utf8"

	json "github.com/goccy/go-json"
	"github.com/google/uuid"

	"svc/lib/apikey"
	"svc/lib/httpserver"
	"svc/lib/ids"
	"svc/lib/jsondoc"
	"svc/lib/paging"
	"svc/lib/problem"
	"svc/schema"
	"svc/schema/erasure"
)

// ScopeErase is the scope of the erasure operations (privacy/README.md).
const ScopeErase = "identities:erase"

// MaxErasureBody caps the body of POST /erasures.
const MaxErasureBody = 4096

func (a *API) erasureRoutes() []httpserver.Route {
	return []httpserver.Route{
		{Method: "POST", Path: "/erasures", Scope: ScopeErase, Idempotent: true, MaxBody: MaxErasureBody,
			Summary: "Erase a person (by email or its SHA-256) from the workspace's stored events and rollups.", Handle: a.postErasure},
		{Method: "GET", Path: "/erasures", Scope: ScopeErase, Summary: "Erasure requests of the workspace, newest first (filter: status).", Handle: a.listErasures},
		{Method: "GET", Path: "/erasures/{id}", Scope: ScopeErase, Summary: "One erasure request and what was done.", Handle: a.getErasure},
	}
}

// erasureRequest is a validated POST /erasures body.
type erasureRequest struct {
	email    [32]byte
	suppress bool
}

// postErasure records the request (pending) in ClickHouse, then registers the identity
// with the pipeline (the edge suppresses, the consumer clears in-flight events), and
// answers 202 with the record. The worker (svc webhooks) runs it.
func (a *API) postErasure(r *httpserver.Request) error {
	req, p := parseErasure(r.Body())
	if p != nil {
		return p
	}
	now := a.now().UTC().Truncate(time.Second)
	e := &erasure.Erasure{ID: erasure.NewID(r.Key.ID, r.Ctx.Request.Header.Peek("Idempotency-Key")),
		Workspace: r.Key.WorkspaceID, Sandbox: r.Key.Env == apikey.Sandbox, Email: req.email, Suppress: req.suppress,
		Stage: erasure.StagePending, RequestedAt: now, KeyID: r.Key.ID, RequestID: r.ID}
	ctx, cancel := a.ctx(r)
	defer cancel()
	if len(r.Ctx.Request.Header.Peek("Idempotency-Key")) > 0 {
		if err := a.freshErasureID(ctx, e, now); err != nil {
			return a.storeErr(r, err)
		}
	}
	if err := erasure.Submit(ctx, a.Conn, erasure.NewRegistry(a.Keys.Redis()), e, now); err != nil {
		if !errors.Is(err, erasure.ErrNotRegistered) {
			return a.storeErr(r, err)
		}
		if a.Log != nil {
			a.Log.Error("register erased identity", "request_id", r.ID, "err", err.Error())
		}
		return problem.Unavailable("the key store", 1)
	}
	return r.JSON(202, e.View())
}

// erasureRetryWindow is how long after an erasure was requested a request with its
// Idempotency-Key is a retry of it: the idempotency layer answers a repeat itself for 24
// hours, so the handler sees a repeat only after a crash before the answer was stored (a
// takeover, within a minute), or once the key's record expired.
const erasureRetryWindow = 24 * time.Hour

// freshErasureID keeps e's id, derived from the Idempotency-Key, for a retry of the
// request that made it (the same identity and suppress within erasureRetryWindow: the
// record is written again, which the table collapses, with the first request's time, so
// a retry never widens what the first request erases in flight); a key used again for
// another request after its record expired gets a random id instead. Under the derived
// id, that request's pending record would rank below the earlier request's completed one
// and never run.
func (a *API) freshErasureID(ctx context.Context, e *erasure.Erasure, now time.Time) error {
	old, err := erasure.Get(ctx, a.Conn, e.Workspace, e.ID)
	switch {
	case errors.Is(err, erasure.ErrNotFound):
		return nil
	case err != nil:
		return err
	case old.Email == e.Email && old.Suppress == e.Suppress && now.Sub(old.RequestedAt) < erasureRetryWindow:
		e.RequestedAt = old.RequestedAt
		return nil
	}
	e.ID = uuid.New()
	return nil
}

// parseErasure validates the body: {"identity": {"email": "…"} | {"email_sha256": "…"},
// "suppress": bool?}. Identity values are never echoed in errors.
func parseErasure(body []byte) (erasureRequest, *problem.Problem) {
	var out erasureRequest
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(body, &doc); err != nil || doc == nil {
		return out, problem.Invalid(`The body must be a JSON object {"identity": {"email": "…"}}.`,
			problem.FieldError{Field: "body", Rule: "json_object", Value: nil, Pointer: ""})
	}
	if p := jsondoc.Check(body); p != nil {
		return out, p
	}
	var errs []problem.FieldError
	for k := range doc {
		if k != "identity" && k != "suppress" {
			errs = append(errs, problem.FieldError{Field: k, Rule: "unknown_field", Value: k, Pointer: "/" + k})
		}
	}
	if raw, ok := doc["suppress"]; ok && (string(raw) == "null" || json.Unmarshal(raw, &out.suppress) != nil) {
		errs = append(errs, problem.FieldError{Field: "suppress", Rule: "type_boolean", Value: string(raw), Pointer: "/suppress"})
	}
	email, ferrs := parseIdentity(doc["identity"])
	out.email = email
	errs = append(errs, ferrs...)
	if len(errs) > 0 {
		slices.SortFunc(errs, func(x, y problem.FieldError) int { return compareStrings(x.Field, y.Field) })
		return out, problem.Invalid("The erasure request is not valid; see errors[].", errs...)
	}
	return out, nil
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

const withheld = "(withheld: identity values are never echoed)"

// parseIdentity reads the identity object: exactly one of email (normalised as POST
// /events requires, hashed here) and email_sha256 (64 hex digits).
func parseIdentity(raw json.RawMessage) ([32]byte, []problem.FieldError) {
	var none [32]byte
	fe := func(field, rule string, value any) []problem.FieldError {
		return []problem.FieldError{{Field: field, Rule: rule, Value: value, Pointer: "/" + problem.Pointer(field)}}
	}
	if raw == nil || string(raw) == "null" {
		return none, fe("identity", "required", nil)
	}
	var id map[string]json.RawMessage
	if json.Unmarshal(raw, &id) != nil || id == nil {
		return none, fe("identity", "type_object", nil)
	}
	var errs []problem.FieldError
	for k := range id {
		if k != "email" && k != "email_sha256" {
			errs = append(errs, fe("identity."+k, "unknown_field", k)...)
		}
	}
	rawEmail, hasEmail := id["email"]
	rawHash, hasHash := id["email_sha256"]
	switch {
	case hasEmail == hasHash:
		return none, append(errs, fe("identity", "exactly_one_of_email_email_sha256", nil)...)
	case hasEmail:
		var s string
		if json.Unmarshal(rawEmail, &s) != nil {
			return none, append(errs, fe("identity.email", "type_string", withheld)...)
		}
		if !utf8.Valid(rawEmail) { // the decoder replaced the bytes; no event carries them
			return none, append(errs, fe("identity.email", "email", withheld)...)
		}
		digest, rule := schema.EmailDigest([]byte(s))
		if rule != "" {
			return none, append(errs, fe("identity.email", rule, withheld)...)
		}
		return digest, errs
	default:
		var s string
		if json.Unmarshal(rawHash, &s) != nil {
			return none, append(errs, fe("identity.email_sha256", "type_string", withheld)...)
		}
		digest, ok := erasure.ParseEmailSHA256(s)
		if !ok {
			return none, append(errs, fe("identity.email_sha256", "sha256_hex", withheld)...)
		}
		return digest, errs
	}
}

func (a *API) getErasure(r *httpserver.Request) error {
	raw := r.Param("id")
	id, err := ids.Parse(ids.Erasure, raw)
	if err != nil {
		return notFound("erasure", raw)
	}
	ctx, cancel := a.ctx(r)
	defer cancel()
	e, err := erasure.Get(ctx, a.Conn, r.Key.WorkspaceID, id)
	if errors.Is(err, erasure.ErrNotFound) {
		return notFound("erasure", raw)
	}
	if err != nil {
		return a.storeErr(r, err)
	}
	return r.JSON(200, e.View())
}

// erasureStatuses are the values of the status filter.
var erasureStatuses = []string{erasure.StatusPending, erasure.StatusRunning, erasure.StatusCompleted}

func (a *API) listErasures(r *httpserver.Request) error {
	var errs []problem.FieldError
	q := erasure.ListQuery{Workspace: r.Key.WorkspaceID}
	if v := r.Query("status"); v != "" {
		if !slices.Contains(erasureStatuses, v) {
			errs = append(errs, queryError("status", "one_of", v))
		}
		q.Status = v
	}
	p := parsePage(r, "erasures", &errs)
	if err := invalidQuery(errs); err != nil {
		return err
	}
	q.Limit, q.Offset = p.Limit+1, p.Offset
	if p.After != nil {
		q.AfterTime, q.AfterID = time.Unix(p.After.T, 0).UTC(), p.After.ID
	}
	ctx, cancel := a.ctx(r)
	defer cancel()
	es, err := erasure.List(ctx, a.Conn, q)
	if err != nil {
		return a.storeErr(r, err)
	}
	views := make([]erasure.View, len(es))
	for i, e := range es {
		views[i] = e.View()
	}
	return httpserver.WriteList(r, p, views, func(i int) paging.Cursor {
		return paging.Cursor{List: "erasures", ID: uuid.UUID(es[i].ID), T: es[i].RequestedAt.Unix()}
	})
}
