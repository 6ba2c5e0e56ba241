package api

import (
	"errors"

	"svc/lib/ids"
	"svc/lib/problem"
	"svc/schema/workspace"
)

// PixelOfKey resolves raw (a pixel id, prefixed or not) to a pixel of the calling key's
// workspace, the one check every operation on a pixel makes (POST /events, GET
// /pixel-rollups). A malformed id is ids.ErrMalformed: the caller says how it answers
// (422 for a body field, 404 for an id in the query). An unknown pixel, or one of
// another workspace (a sandbox key reaching past the showroom included), is 404
// not_found; a failing store is 503.
func PixelOfKey(r *Request, ks *workspace.Store, raw string) (workspace.Pixel, error) {
	id, err := ids.Parse(ids.Pixel, raw)
	if err != nil {
		return workspace.Pixel{}, err
	}
	px, err := ks.Pixel(r.Context(), id)
	if errors.Is(err, workspace.ErrNotFound) || err == nil && px.WorkspaceID != r.Key.WorkspaceID {
		return workspace.Pixel{}, problem.New(problem.NotFound, "No pixel %s in this key's workspace.", ids.Format(ids.Pixel, id))
	}
	if err != nil {
		return workspace.Pixel{}, Unavailable("the pixel store", 1)
	}
	return px, nil
}
