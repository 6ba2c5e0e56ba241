package api

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"time"

	"github.com/google/uuid"

	"svc/lib/apikey"
	"svc/lib/httpserver"
	"svc/lib/ids"
	"svc/lib/paging"
	"svc/lib/problem"
	"svc/schema"
	"svc/schema/trace"
	"svc/schema/workspace"
)

// PixelHealth is a record of GET /pixels and the body of GET /pixels/{id}: a pixel, its
// reporting zone, its last days and the pipeline's lag for it.
type PixelHealth struct {
	ID        string    `json:"id"`
	IDUUID    string    `json:"id_uuid"`
	Name      string    `json:"name"`
	TimeZone  string    `json:"time_zone"`
	CreatedAt time.Time `json:"created_at"`
	// LastAcceptedAt is when the edge received the latest event stored within the days
	// (RFC 3339, seconds; null: none).
	LastAcceptedAt *string `json:"last_accepted_at"`
	// KafkaPartition is the partition of events.v1 the pixel's batches go to;
	// IngestedThrough that partition's completeness watermark (every event of the pixel a
	// 202 accepted before it is stored); LagSeconds now minus it. Null until the consumer
	// published them.
	KafkaPartition  *int32     `json:"kafka_partition"`
	IngestedThrough *string    `json:"ingested_through"`
	LagSeconds      *float64   `json:"lag_seconds"`
	Days            []PixelDay `json:"days"`
}

// PixelDay is one local day of a pixel's health.
type PixelDay struct {
	Date           string            `json:"date"`
	Received       uint64            `json:"received"` // accepted + rejected + duplicates
	Accepted       uint64            `json:"accepted"`
	Rejected       uint64            `json:"rejected"`
	RejectedByRule map[string]uint64 `json:"rejected_by_rule"`
	Duplicates     uint64            `json:"duplicates"`
}

func (a *API) pixelRoutes() []httpserver.Route {
	return []httpserver.Route{
		{Method: "GET", Path: "/pixels", Scope: ScopePixels, Summary: "The workspace's pixels with their health per local day (days) and the pipeline's lag.", Handle: a.listPixels},
		{Method: "GET", Path: "/pixels/{id}", Scope: ScopePixels, Summary: "One pixel with its health per local day (days) and the pipeline's lag.", Handle: a.getPixel},
	}
}

// daysParam reads days: 1..trace.MaxDays, default trace.DefaultDays.
func daysParam(r *httpserver.Request, errs *[]problem.FieldError) int {
	v := r.Query("days")
	if v == "" {
		return trace.DefaultDays
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > trace.MaxDays {
		*errs = append(*errs, queryError("days", "range_1_31", cut(v, 16)))
		return trace.DefaultDays
	}
	return n
}

// getPixel serves GET /pixels/{id}: a pixel of the key's workspace, else 404.
func (a *API) getPixel(r *httpserver.Request) error {
	var errs []problem.FieldError
	days := daysParam(r, &errs)
	if err := invalidQuery(errs); err != nil {
		return err
	}
	raw := r.Param("id")
	id, err := ids.Parse(ids.Pixel, raw)
	if err != nil {
		return notFound("pixel", raw)
	}
	px, err := a.Keys.Pixel(r.Context(), id)
	if err != nil || px.WorkspaceID != r.Key.WorkspaceID {
		if err == nil || errors.Is(err, workspace.ErrNotFound) {
			return notFound("pixel", raw)
		}
		return problem.Unavailable("the key store", 1)
	}
	out, err := a.healths(r, []workspace.Pixel{px}, days)
	if err != nil {
		return err
	}
	return r.JSON(200, out[0])
}

// listPixels serves GET /pixels: the workspace's pixels by id, cursor paging (a pixel
// created meanwhile lands in its place by id: none is skipped or repeated).
func (a *API) listPixels(r *httpserver.Request) error {
	var errs []problem.FieldError
	days := daysParam(r, &errs)
	p := parsePage(r, "pixels", &errs)
	if err := invalidQuery(errs); err != nil {
		return err
	}
	all, err := a.Keys.Pixels(r.Context(), r.Key.WorkspaceID)
	if err != nil && !errors.Is(err, workspace.ErrNotFound) {
		return problem.Unavailable("the key store", 1)
	}
	slices.SortFunc(all, func(x, y workspace.Pixel) int { return compareUUID(x.ID, y.ID) })
	i := 0
	if p.After != nil {
		for i < len(all) && compareUUID(all[i].ID, p.After.ID) <= 0 {
			i++
		}
	} else {
		i = min(p.Offset, len(all))
	}
	page := all[i:min(i+p.Limit+1, len(all))]
	out, err := a.healths(r, page[:min(len(page), p.Limit)], days)
	if err != nil {
		return err
	}
	if len(page) > p.Limit {
		out = append(out, PixelHealth{}) // one past the page: WriteList offers the cursor
	}
	return httpserver.WriteList(r, p, out, func(i int) paging.Cursor { return paging.Cursor{List: "pixels", ID: page[i].ID} })
}

func compareUUID(x, y uuid.UUID) int {
	for i := range x {
		if x[i] != y[i] {
			return int(x[i]) - int(y[i])
		}
	}
	return 0
}

// healths reads the health of pixels (of the key's workspace) over their last days.
func (a *API) healths(r *httpserver.Request, pixels []workspace.Pixel, days int) ([]PixelHealth, error) {
	now := a.now()
	asks := make([]trace.PixelDays, len(pixels))
	out := make([]PixelHealth, len(pixels))
	for i, px := range pixels {
		z, err := a.Keys.TimeZone(r.Context(), px)
		if err != nil {
			return nil, problem.Unavailable("the key store", 1)
		}
		loc, err := schema.LoadZone(z.Name)
		if err != nil {
			loc, z.Name = time.UTC, schema.UTC
		}
		asks[i] = trace.PixelDays{ID: px.ID, Loc: loc, Days: days}
		out[i] = PixelHealth{ID: ids.Format(ids.Pixel, px.ID), IDUUID: px.ID.String(), Name: px.Name, TimeZone: z.Name,
			CreatedAt: px.CreatedAt.UTC(), Days: []PixelDay{}}
	}
	ctx, cancel := a.ctx(r)
	defer cancel()
	hs, err := trace.Healths(ctx, a.Conn, r.Key.WorkspaceID, r.Key.Env == apikey.Sandbox, asks, now)
	if err != nil {
		return nil, a.storeErr(r, err)
	}
	lags, _ := a.lags(r.Context(), pixels, now) // unknown lags stay null
	for i, px := range pixels {
		h := hs[px.ID]
		if !h.LastAccepted.IsZero() {
			s := h.LastAccepted.Format(time.RFC3339)
			out[i].LastAcceptedAt = &s
		}
		for _, d := range h.Days {
			out[i].Days = append(out[i].Days, PixelDay{Date: day(d.Date), Received: d.Received(), Accepted: d.Accepted,
				Rejected: d.RejectedTotal(), RejectedByRule: d.Rejected, Duplicates: d.Duplicates})
		}
		l, ok := lags[px.ID]
		if !ok {
			continue
		}
		out[i].KafkaPartition = &l.Partition
		if !l.Through.IsZero() {
			s := l.Through.Format("2006-01-02T15:04:05.000Z")
			out[i].IngestedThrough, out[i].LagSeconds = &s, &l.Seconds
		}
	}
	return out, nil
}

// lags reads the pipeline's lag for pixels (none without a database).
func (a *API) lags(ctx context.Context, pixels []workspace.Pixel, now time.Time) (map[uuid.UUID]trace.Lag, error) {
	if a.Keys == nil {
		return nil, nil
	}
	idList := make([]uuid.UUID, len(pixels))
	for i, px := range pixels {
		idList[i] = px.ID
	}
	return trace.Lags(ctx, a.Keys.Redis(), a.Database, idList, now)
}
