package read

import (
	"encoding/base64"
	"strconv"
	"time"

	json "github.com/goccy/go-json"
	"github.com/google/uuid"

	"svc/api"
	"svc/api/catalog"
	"svc/api/problem"
)

// Paging defaults: limit 1..1000, default 100.
const (
	DefaultLimit = 100
	MaxLimit     = catalog.MaxLimit
)

// Offset paging is deprecated (CHANGELOG.md): deprecated on 2026-09-01, sunset on
// 2027-09-01. Offset responses carry these headers.
const (
	offsetDeprecation = "@1788220800"                   // 2026-09-01T00:00:00Z
	offsetSunset      = "Wed, 01 Sep 2027 00:00:00 GMT" // not earlier than Deprecation
	offsetDocsAnchor  = "/versioning#offset-pagination"
)

// cursor is the decoded form of an opaque cursor: the list it belongs to and the key of
// the last row returned. Only positions are carried; every query stays scoped to the
// caller's workspace, so a cursor reveals nothing and grants nothing.
type cursor struct {
	List string    `json:"l"`
	ID   uuid.UUID `json:"i,omitempty"`
	Date string    `json:"d,omitempty"`
	Name string    `json:"n,omitempty"`
	Cur  string    `json:"c,omitempty"`
	Zone string    `json:"z,omitempty"` // the time zone of a pixel_rollups listing
	T    int64     `json:"t,omitempty"` // a time key (unix seconds): erasures
}

// encode returns the opaque (base64url JSON) form of c.
func (c cursor) encode() *string {
	b, _ := json.Marshal(c)
	s := base64.RawURLEncoding.EncodeToString(b)
	return &s
}

// page is the paging part of a list request, validated.
type page struct {
	Limit  int
	Offset int     // > 0 only for (deprecated) offset paging
	After  *cursor // nil on the first page
	offset bool    // the offset parameter was given
}

// parsePage reads limit, cursor and offset for list (the cursor's list tag), adding an
// entry to errs for each invalid parameter (the handler answers 422 invalid_request).
func parsePage(r *api.Request, list string, errs *[]problem.FieldError) page {
	p := page{Limit: DefaultLimit}
	if v := r.Query("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxLimit {
			*errs = append(*errs, queryError("limit", "range_1_1000", v))
		} else {
			p.Limit = n
		}
	}
	if v := r.Query("cursor"); v != "" {
		c, ok := decodeCursor(v, list)
		if !ok {
			*errs = append(*errs, queryError("cursor", "cursor", v))
		}
		p.After = c
	}
	if v := r.Query("offset"); v != "" {
		n, err := strconv.Atoi(v)
		switch {
		case err != nil || n < 0 || n > catalog.MaxOffset:
			*errs = append(*errs, queryError("offset", "range_0_1000000", v))
		case p.After != nil:
			*errs = append(*errs, queryError("offset", "not_with_cursor", v))
		default:
			p.Offset, p.offset = n, true
		}
	}
	return p
}

// invalidQuery is the 422 answer for errs, or nil when there are none.
func invalidQuery(errs []problem.FieldError) error {
	if len(errs) == 0 {
		return nil
	}
	return problem.Invalid("Some query parameters are not valid; see errors[].", errs...)
}

func decodeCursor(s, list string) (*cursor, bool) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) > 1024 {
		return nil, false
	}
	var c cursor
	if err := json.Unmarshal(b, &c); err != nil || c.List != list {
		return nil, false
	}
	if datedLists[list] {
		if _, err := catalog.ParseDay(c.Date); err != nil {
			return nil, false
		}
	}
	return &c, true
}

// datedLists are the lists whose cursor carries a day.
var datedLists = map[string]bool{"plan_actuals": true, "campaign_actuals": true, "pixel_rollups": true}

// queryError is an errors[] entry for query parameter name.
func queryError(name, rule string, value any) problem.FieldError {
	return problem.FieldError{Field: name, Rule: rule, Value: value, Detail: "query parameter " + name}
}

// writeList writes a page of items. rows holds up to Limit+1 items (one past the page
// tells that another page exists); next returns the cursor of the item at index i, the
// last one of the page.
func writeList[T any](r *api.Request, p page, rows []T, next func(i int) cursor) error {
	out := api.List[T]{Data: rows}
	if len(rows) > p.Limit {
		out.Data = rows[:p.Limit]
		out.Meta.NextCursor = next(p.Limit - 1).encode()
		if p.offset {
			n := p.Offset + p.Limit
			out.Meta.NextOffset = &n
		}
	}
	if out.Data == nil {
		out.Data = []T{}
	}
	if p.offset {
		deprecatedOffset(r)
	}
	return r.JSON(200, out)
}

// deprecatedOffset sets the deprecation headers of an offset-paged response.
func deprecatedOffset(r *api.Request) {
	h := &r.Ctx.Response.Header
	h.Set("Deprecation", offsetDeprecation)
	h.Set("Sunset", offsetSunset)
	h.Set("Link", "<"+r.Server().Config.DocsURL()+offsetDocsAnchor+`>; rel="deprecation"`)
}

// parseDay reads an optional YYYY-MM-DD query parameter.
func parseDay(r *api.Request, name string, errs *[]problem.FieldError) time.Time {
	v := r.Query(name)
	if v == "" {
		return time.Time{}
	}
	t, err := catalog.ParseDay(v)
	if err != nil {
		*errs = append(*errs, queryError(name, "date", v))
	}
	return t
}

// dateRange reads from and to (inclusive days; to not before from).
func dateRange(r *api.Request, errs *[]problem.FieldError) (time.Time, time.Time) {
	from, to := parseDay(r, "from", errs), parseDay(r, "to", errs)
	if !from.IsZero() && !to.IsZero() && to.Before(from) {
		*errs = append(*errs, queryError("to", "not_before_from", r.Query("to")))
	}
	return from, to
}
