package workspace

import (
	"context"
	"errors"
	"fmt"

	"svc/lib/apikey"
	"svc/lib/ids"
	"svc/lib/problem"
)

// PixelOfKey resolves raw (a pixel id, prefixed or not) to a pixel of key k's workspace,
// the one check every operation on a pixel makes (POST /events, GET /pixel-rollups). An
// id Parse refuses, malformed or of another kind, is 422 invalid_request with the one
// errors[] entry bad (the caller's field, rule and pointer; its Value is set to raw). An
// unknown pixel, or one of another workspace (a sandbox key reaching past the showroom
// included), is 404 not_found; a failing store is 503.
func PixelOfKey(ctx context.Context, ks *Store, k *apikey.Key, raw string, bad problem.FieldError) (Pixel, error) {
	id, err := ids.Parse(ids.Pixel, raw)
	if err != nil {
		return Pixel{}, InvalidID(ids.Pixel, raw, err, bad)
	}
	px, err := ks.Pixel(ctx, id)
	if errors.Is(err, ErrNotFound) || err == nil && px.WorkspaceID != k.WorkspaceID {
		return Pixel{}, problem.New(problem.NotFound, "No pixel %s in this key's workspace.", ids.Format(ids.Pixel, id))
	}
	if err != nil {
		return Pixel{}, problem.Unavailable("the pixel store", 1)
	}
	return px, nil
}

// InvalidID is the 422 invalid_request of an id that ids.Parse refused with err, for the
// field bad describes (its Value is raw as an answer echoes it, problem.Echo: withheld
// when it holds an '@', cut to problem.EchoLen bytes): one answer for a malformed id
// and an id of another kind, whose detail says which.
func InvalidID(p ids.Prefix, raw string, err error, bad problem.FieldError) *problem.Problem {
	bad.Value = problem.Echo(raw, problem.EchoLen, "…")
	why := "is not"
	if errors.Is(err, ids.ErrWrongKind) {
		why = "is an id of another kind, not"
	}
	return problem.Invalid(fmt.Sprintf("%s %s a %s<uuid> id (a raw UUID is accepted too); see errors[].", bad.Field, why, p), bad)
}
