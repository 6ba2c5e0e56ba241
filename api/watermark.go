package api

import (
	"time"

	"github.com/google/uuid"

	"svc/lib/httpserver"
	"svc/schema/erasure"
	"svc/schema/rollups"
)

// meta.ingested_through of GET /pixel-rollups: an instant such that every event a 202
// accepted before it is in the numbers of the answer (DESIGN.md, "The completeness
// watermark"). The consumer publishes it (schema/rollups.IngestedThrough); the handler
// reads it before it queries the rollups, so the query sees everything it covers.
//
// Rows leave the rollups only in an erasure's rebuild of a pixel's days (deleted, then
// inserted again, under a hold of the pixel: schema/erasure). So the pixel's hold state
// is read before the watermark and again after the query: held either time, or any
// hold taken in between (the holds' generation moved), and no instant is claimed (null).
// A rebuild's hold is taken before it deletes anything and raises the generation after
// taking it, so a query that sees neither read rollups whole.

// watermarkRead is what the handler read before its query.
type watermarkRead struct {
	a     *API
	pixel uuid.UUID
	at    time.Time
	ok    bool
	gen   int64
}

// watermark reads the pixel's hold state, then the watermark. Any failure claims nothing.
func (a *API) watermark(r *httpserver.Request, pixel uuid.UUID) *watermarkRead {
	w := &watermarkRead{a: a, pixel: pixel}
	if a.Database == "" || a.Keys == nil {
		return w
	}
	rdb := a.Keys.Redis()
	held, gen, err := erasure.NewFence(rdb, a.Database).HoldState(r.Context(), pixel)
	if err != nil || held {
		return w
	}
	at, ok, err := rollups.IngestedThrough(r.Context(), rdb, a.Database)
	w.at, w.ok, w.gen = at, ok && err == nil, gen
	return w
}

// through is the instant to claim after the query (RFC 3339, milliseconds), or nil.
func (w *watermarkRead) through(r *httpserver.Request) any {
	if !w.ok {
		return nil
	}
	held, gen, err := erasure.NewFence(w.a.Keys.Redis(), w.a.Database).HoldState(r.Context(), w.pixel)
	if err != nil || held || gen != w.gen {
		return nil
	}
	return w.at.UTC().Format("2006-01-02T15:04:05.000Z")
}
