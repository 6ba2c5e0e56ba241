package api

import (
	"github.com/google/uuid"

	"svc/lib/apikey"
	"svc/lib/httpserver"
	"svc/lib/ids"
	"svc/lib/paging"
	"svc/lib/problem"
	"svc/schema"
	"svc/schema/rollups"
	"svc/schema/workspace"
)

// PixelRollup is one record of GET /pixel-rollups: one day of one event name and
// currency of a pixel.
type PixelRollup struct {
	PixelID         string `json:"pixel_id"`
	PixelIDUUID     string `json:"pixel_id_uuid"`
	Date            string `json:"date"`      // YYYY-MM-DD, a calendar day of TimeZone
	TimeZone        string `json:"time_zone"` // the IANA zone whose day Date is
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
// workspace, else 404), from, to, event_name, time_zone; cursor paging (stable while
// events arrive: rows are ordered by date, event name, currency, and a new event never
// moves a row) or deprecated offset paging with its headers. Rows of the key's
// environment only (a sandbox key reads sandbox events).
//
// Days are calendar days of one IANA zone: the time_zone parameter, else the pixel's
// zone, else its workspace's, else UTC. A cursor carries the zone of its listing, so
// the pages of one listing stay in one zone even if the configuration changes.
func (a *API) pixelRollups(r *httpserver.Request) error {
	var errs []problem.FieldError
	raw := r.Query("pixel_id")
	if raw == "" {
		errs = append(errs, queryError("pixel_id", "required", nil))
	}
	q := rollups.DailyQuery{Workspace: schema.UUID(r.Key.WorkspaceID), Sandbox: r.Key.Env == apikey.Sandbox, Now: a.now()}
	q.From, q.To = dateRange(r, &errs)
	if q.EventName = r.Query("event_name"); len(q.EventName) > maxEventName {
		errs = append(errs, queryError("event_name", "max_length_200", q.EventName[:maxEventName]))
	}
	zone := zoneParam(r, &errs)
	p := parsePage(r, "pixel_rollups", &errs)
	if p.After != nil {
		zone = cursorZone(p.After, zone, &errs)
	}
	if err := invalidQuery(errs); err != nil {
		return err
	}
	pixel, err := a.pixel(r, raw)
	if err != nil {
		return err
	}
	if zone == "" {
		z, err := a.Keys.TimeZone(r.Context(), workspace.Pixel{ID: pixel, WorkspaceID: r.Key.WorkspaceID})
		if err != nil {
			return problem.Unavailable("the key store", 1)
		}
		zone = z.Name
	}
	q.Pixel, q.Offset, q.TimeZone = schema.UUID(pixel), p.Offset, zone
	if p.After != nil {
		q.After = &rollups.DailyCursor{Date: parseCursorDay(p.After.Date), EventName: p.After.Name, Currency: p.After.Cur}
	}
	// One row past the page tells whether another page exists.
	q.Limit = p.Limit + 1
	wm := a.watermark(r, pixel) // read before the rollups: see watermark.go
	ctx, cancel := a.ctx(r)
	defer cancel()
	rows, err := rollups.QueryDaily(ctx, a.Conn, q)
	if schema.ZoneUnknownToServer(err) {
		return problem.Invalid("ClickHouse has no zone file for this time zone; choose another zone.",
			queryError("time_zone", "iana_time_zone", zone))
	}
	if err != nil {
		return a.storeErr(r, err)
	}
	pid, puuid := ids.Format(ids.Pixel, pixel), pixel.String()
	out := make([]PixelRollup, len(rows))
	for i, w := range rows {
		out[i] = PixelRollup{PixelID: pid, PixelIDUUID: puuid, Date: day(w.Date), TimeZone: w.TimeZone, EventName: w.EventName,
			Currency: w.Currency, Events: w.Events, ConsentedEvents: w.ConsentedEvents, Value: w.Value,
			UniquePeople: w.UniquePeople, Status: w.Status}
	}
	return httpserver.WriteListMeta(r, p, out, func(i int) paging.Cursor {
		return paging.Cursor{List: "pixel_rollups", Date: day(rows[i].Date), Name: rows[i].EventName, Cur: rows[i].Currency, Zone: zone}
	}, map[string]any{"ingested_through": wm.through(r)})
}

// zoneParam reads the optional time_zone parameter: an IANA name ("" when absent).
func zoneParam(r *httpserver.Request, errs *[]problem.FieldError) string {
	v := r.Query("time_zone")
	if v == "" {
		return ""
	}
	if _, err := schema.LoadZone(v); err != nil {
		if len(v) > 64 {
			v = v[:64]
		}
		*errs = append(*errs, queryError("time_zone", "iana_time_zone", v))
		return ""
	}
	return v
}

// cursorZone is the zone of the listing a cursor continues: the cursor's (UTC for
// cursors issued before zones existed). A time_zone parameter must name the same zone.
func cursorZone(c *paging.Cursor, param string, errs *[]problem.FieldError) string {
	z := c.Zone
	if z == "" {
		z = schema.UTC
	}
	if _, err := schema.LoadZone(z); err != nil {
		*errs = append(*errs, queryError("cursor", "cursor", nil))
		return ""
	}
	if param != "" && param != z {
		*errs = append(*errs, queryError("time_zone", "cursor_time_zone", param))
	}
	return z
}

// pixel resolves the pixel_id parameter to a pixel of the key's workspace
// (workspace.PixelOfKey): an id that is not a pixel id (malformed, or of another kind) is 422
// with rule id, as every id parameter.
func (a *API) pixel(r *httpserver.Request, raw string) (uuid.UUID, error) {
	px, err := workspace.PixelOfKey(r.Context(), a.Keys, r.Key, raw, queryError("pixel_id", "id", nil))
	return px.ID, err
}
