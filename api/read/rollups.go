package read

import (
	"errors"

	"github.com/google/uuid"

	"svc/api"
	"svc/api/ids"
	"svc/api/keys"
	"svc/api/problem"
	"svc/rollup"
	"svc/schema"
)

// PixelRollup is one record of GET /pixel-rollups: one day of one event name and
// currency of a pixel.
type PixelRollup struct {
	PixelID         string `json:"pixel_id"`
	PixelIDUUID     string `json:"pixel_id_uuid"`
	Date            string `json:"date"`
	EventName       string `json:"event_name"`
	Currency        string `json:"currency"` // "" when the events carried no value
	Events          uint64 `json:"events"`
	ConsentedEvents uint64 `json:"consented_events"`
	Value           string `json:"value"` // decimal string, four places
	UniquePeople    uint64 `json:"unique_people"`
	Status          string `json:"status"` // "open" while the day can change, then "final"
}

// maxEventName bounds the event_name filter.
const maxEventName = 200

// pixelRollups serves GET /pixel-rollups: pixel_id (required; a pixel of the key's
// workspace, else 404), from, to, event_name; cursor paging (stable while events
// arrive: rows are ordered by date, event name, currency, and a new event never moves
// a row) or deprecated offset paging with its headers. Rows of the key's environment
// only (a sandbox key reads sandbox events).
func (a *API) pixelRollups(r *api.Request) error {
	var errs []problem.FieldError
	raw := r.Query("pixel_id")
	if raw == "" {
		errs = append(errs, queryError("pixel_id", "required", nil))
	}
	q := rollup.DailyQuery{Workspace: schema.UUID(r.Key.WorkspaceID), Sandbox: r.Key.Env == keys.Sandbox, Now: a.now()}
	q.From, q.To = dateRange(r, &errs)
	if q.EventName = r.Query("event_name"); len(q.EventName) > maxEventName {
		errs = append(errs, queryError("event_name", "max_length_200", q.EventName[:maxEventName]))
	}
	p := parsePage(r, "pixel_rollups", &errs)
	if err := invalidQuery(errs); err != nil {
		return err
	}
	pixel, err := a.pixel(r, raw)
	if err != nil {
		return err
	}
	q.Pixel, q.Offset = schema.UUID(pixel), p.Offset
	if p.After != nil {
		q.After = &rollup.DailyCursor{Date: parseCursorDay(p.After.Date), EventName: p.After.Name, Currency: p.After.Cur}
	}
	// One row past the page tells whether another page exists; at the largest page the
	// query cannot take one more, and a full page then always offers a next cursor.
	q.Limit = min(p.Limit+1, rollup.MaxLimit)
	ctx, cancel := a.ctx(r)
	defer cancel()
	rows, err := rollup.QueryDaily(ctx, a.Conn, q)
	if err != nil {
		return a.storeErr(r, err)
	}
	pid, puuid := ids.Format(ids.Pixel, pixel), pixel.String()
	out := make([]PixelRollup, len(rows))
	for i, w := range rows {
		out[i] = PixelRollup{PixelID: pid, PixelIDUUID: puuid, Date: day(w.Date), EventName: w.EventName,
			Currency: w.Currency, Events: w.Events, ConsentedEvents: w.ConsentedEvents, Value: w.Value,
			UniquePeople: w.UniquePeople, Status: w.Status}
	}
	if p.Limit == rollup.MaxLimit && len(out) == p.Limit {
		out = append(out, PixelRollup{}) // a sentinel past the page: writeList offers the cursor
	}
	return writeList(r, p, out, func(i int) cursor {
		return cursor{List: "pixel_rollups", Date: day(rows[i].Date), Name: rows[i].EventName, Cur: rows[i].Currency}
	})
}

// pixel resolves the pixel_id parameter to a pixel of the key's workspace; a malformed
// id, an unknown pixel and another workspace's pixel are all 404 not_found.
func (a *API) pixel(r *api.Request, raw string) (uuid.UUID, error) {
	id, err := ids.Parse(ids.Pixel, raw)
	if err != nil {
		return uuid.Nil, notFound("pixel", raw)
	}
	px, err := a.Keys.Pixel(r.Context(), id)
	if errors.Is(err, keys.ErrNotFound) || err == nil && px.WorkspaceID != r.Key.WorkspaceID {
		return uuid.Nil, notFound("pixel", raw)
	}
	if err != nil {
		return uuid.Nil, api.Unavailable("the key store", 1)
	}
	return id, nil
}
