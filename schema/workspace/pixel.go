package workspace

import (
	"context"
	"errors"

	"svc/lib/apikey"
	"svc/lib/ids"
	"svc/lib/problem"
)

// PixelOfKey resolves raw (a pixel id, prefixed or not) to a pixel of key k's
// workspace, the one check every operation on a pixel makes (POST /events, GET
// /pixel-rollups). A malformed id is ids.ErrMalformed: the caller says how it answers
// (422 for a body field, 404 for an id in the query). An unknown pixel, or one of
// another workspace (a sandbox key reaching past the showroom included), is 404
// not_found; a failing store is 503.
func PixelOfKey(ctx context.Context, ks *Store, k *apikey.Key, raw string) (Pixel, error) {
	id, err := ids.Parse(ids.Pixel, raw)
	if err != nil {
		return Pixel{}, err
	}
	px, err := ks.Pixel(ctx, id)
	if errors.Is(err, ErrNotFound) || err == nil && px.WorkspaceID != k.WorkspaceID {
		return Pixel{}, problem.New(problem.NotFound, "No pixel %s in this key's ", ids.Format(ids.Pixel, id))
	}
	if err != nil {
		return Pixel{}, problem.Unavailable("the pixel store", 1)
	}
	return px, nil
}
