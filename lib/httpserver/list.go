package httpserver

import (
	"svc/lib/paging"
	"svc/lib/problem"
)

// ParsePage reads the paging parameters of a request for list (lib/paging), adding an
// errors[] entry for each invalid one; valid, when set, vets a decoded cursor.
func ParsePage(r *Request, list string, valid func(paging.Cursor) bool, errs *[]problem.FieldError) paging.Page {
	return paging.Parse(r.Query, list, valid, errs)
}

// WriteList writes a page of items. rows holds up to Limit+1 items (one past the page
// tells that another page exists); next returns the cursor of the item at index i, the
// last one of the page. Offset-paged answers carry the deprecation headers.
func WriteList[T any](r *Request, p paging.Page, rows []T, next func(i int) paging.Cursor) error {
	return WriteListMeta(r, p, rows, next, nil)
}

// WriteListMeta is WriteList with a list's own members of meta (ListMeta.Extra).
func WriteListMeta[T any](r *Request, p paging.Page, rows []T, next func(i int) paging.Cursor, extra map[string]any) error {
	out := List[T]{Data: rows, Meta: ListMeta{Extra: extra}}
	if len(rows) > p.Limit {
		out.Data = rows[:p.Limit]
		out.Meta.NextCursor = next(p.Limit - 1).Encode()
		if p.OffsetParam {
			n := p.Offset + p.Limit
			out.Meta.NextOffset = &n
		}
	}
	if out.Data == nil {
		out.Data = []T{}
	}
	if p.OffsetParam {
		deprecatedOffset(r)
	}
	return r.JSON(200, out)
}

// deprecatedOffset sets the deprecation headers of an offset-paged response.
func deprecatedOffset(r *Request) {
	h := &r.Ctx.Response.Header
	h.Set("Deprecation", paging.OffsetDeprecation)
	h.Set("Sunset", paging.OffsetSunset)
	h.Set("Link", "<"+r.Server().Config.DocsURL()+paging.OffsetDocsAnchor+`>; rel="deprecation"`)
}
