package api

import (
	"fmt"
	"math"
	"time"

	json "github.com/goccy/go-json"
	"github.com/google/uuid"

	"svc/lib/apikey"
	"svc/lib/httpserver"
	"svc/lib/ids"
	"svc/lib/paging"
	"svc/lib/problem"
	"svc/schema/rejection"
)

// Rejection is one record of GET /rejections: one event a 202 rejected (event_index
// its index) or one batch refused as a whole (event_index null).
type Rejection struct {
	RequestID   string          `json:"request_id"`
	ReceivedAt  string          `json:"received_at"` // RFC 3339, UTC, seconds
	PixelID     string          `json:"pixel_id"`
	PixelIDUUID string          `json:"pixel_id_uuid"`
	KeyID       string          `json:"key_id"`
	KeyIDUUID   string          `json:"key_id_uuid"`
	Status      int             `json:"status"`       // the answer: 202, 422, 409 or 429
	BatchEvents int             `json:"batch_events"` // events in the batch (0: not read, on a 409 or 429)
	EventIndex  *int            `json:"event_index"`
	Field       string          `json:"field"`
	Rule        string          `json:"rule"`
	Value       json.RawMessage `json:"value"` // as received (identity values "(withheld)")
}

// maxRule bounds the rule filter.
const maxRule = 64

func (a *API) rejectionRoutes() []httpserver.Route {
	return []httpserver.Route{{Method: "GET", Path: "/rejections", Scope: ScopePixels,
		Summary: "A pixel's rejected events and refused batches, newest first (filters: since, rule).", Handle: a.listRejections}}
}

// listRejections serves GET /rejections: pixel_id (required; a pixel of the key's
// workspace, else 404), since (RFC 3339; rounded down to its minute), rule; cursor
// paging, newest first. meta carries the exact counts of the filter: rejections (all of
// them) and not_stored (those counted past the per-pixel-per-minute cap of samples,
// which the list cannot show).
func (a *API) listRejections(r *httpserver.Request) error {
	var errs []problem.FieldError
	raw := r.Query("pixel_id")
	if raw == "" {
		errs = append(errs, queryError("pixel_id", "required", nil))
	}
	q := rejection.Query{Workspace: r.Key.WorkspaceID, Sandbox: r.Key.Env == apikey.Sandbox}
	if v := r.Query("since"); v != "" {
		t, err := time.Parse(time.RFC3339, v)
		switch {
		case err != nil:
			errs = append(errs, queryError("since", "iso8601", v))
		case t.Unix() < 0 || t.Unix() > maxDateTime:
			// ClickHouse's DateTime: an instant outside it would wrap to another one.
			errs = append(errs, queryError("since", "range_1970_2106", v))
		}
		q.Since = t
	}
	if v := r.Query("rule"); v != "" {
		if len(v) > maxRule || !printableASCII(v) {
			errs = append(errs, queryError("rule", "max_length_64", cut(v, maxRule)))
		}
		q.Rule = v
	}
	// A cursor's values are bound as a DateTime and an Int16: outside them they would wrap.
	p := httpserver.ParsePage(r, "rejections", func(c paging.Cursor) bool {
		return c.Pos != nil && c.T > 0 && c.T <= maxDateTime && *c.Pos >= math.MinInt16 && *c.Pos <= math.MaxInt16
	}, &errs)
	if err := invalidQuery(errs); err != nil {
		return err
	}
	pixel, err := a.pixel(r, raw)
	if err != nil {
		return err
	}
	q.Pixel = pixel
	var after *rejection.Cursor
	if p.After != nil {
		after = &rejection.Cursor{ReceivedAt: p.After.T, RequestID: p.After.Name, Index: *p.After.Pos, Field: p.After.Cur,
			Tail: cursorTail(p.After.Rec)}
	}
	ctx, cancel := a.ctx(r)
	defer cancel()
	rows, err := rejection.List(ctx, a.Conn, q, after, p.Offset, p.Limit+1)
	if err != nil {
		return a.storeErr(r, err)
	}
	counts, err := rejection.Count(ctx, a.Conn, q)
	if err != nil {
		return a.storeErr(r, err)
	}
	pid, puuid := ids.Format(ids.Pixel, pixel), pixel.String()
	out := make([]Rejection, len(rows))
	for i, s := range rows {
		out[i] = Rejection{RequestID: s.RequestID, ReceivedAt: s.ReceivedAt.Format(time.RFC3339), PixelID: pid, PixelIDUUID: puuid,
			KeyID: ids.Format(ids.Key, s.Key), KeyIDUUID: s.Key.String(), Status: int(s.Status), BatchEvents: int(s.BatchEvents),
			Field: s.Field, Rule: s.Rule, Value: json.RawMessage(orNull(s.Value))}
		if s.Index != rejection.Batch {
			n := int(s.Index)
			out[i].EventIndex = &n
		}
	}
	return httpserver.WriteListMeta(r, p, out, func(i int) paging.Cursor {
		c := rows[i].Cursor()
		return paging.Cursor{List: "rejections", ID: uuid.Nil, T: c.ReceivedAt, Name: c.RequestID, Cur: c.Field, Pos: &c.Index,
			Rec: fmt.Sprintf("%s %d %d", c.Tail.Rule, c.Tail.Partition, c.Tail.Offset)}
	}, map[string]any{"rejections": counts.Rejections, "not_stored": counts.NotStored})
}

// cursorTail reads a rejections cursor's Rec; nil when it has none (a cursor issued
// before it) or it does not read.
func cursorTail(rec string) *rejection.CursorTail {
	var t rejection.CursorTail
	if n, err := fmt.Sscanf(rec, "%s %d %d", &t.Rule, &t.Partition, &t.Offset); err != nil || n != 3 {
		return nil
	}
	return &t
}

func orNull(v string) string {
	if v == "" || !json.Valid([]byte(v)) {
		return "null"
	}
	return v
}

func cut(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

func printableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}
