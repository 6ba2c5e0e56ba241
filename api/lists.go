package api

import (
	"time"

	"svc/lib/httpserver"
	"svc/lib/paging"
	"svc/lib/problem"
	"svc/schema/catalog"
)

// parsePage reads the paging parameters (lib/paging) for list; a cursor's time (the
// lists that carry one bind it as a DateTime) must be one a DateTime holds, and a cursor
// of a dated list must carry a day.
func parsePage(r *httpserver.Request, list string, errs *[]problem.FieldError) paging.Page {
	return httpserver.ParsePage(r, list, func(c paging.Cursor) bool {
		if c.T < 0 || c.T > maxDateTime {
			return false
		}
		if !datedLists[list] {
			return true
		}
		_, err := catalog.ParseDay(c.Date)
		return err == nil
	}, errs)
}

// maxDateTime is the last second (Unix) a ClickHouse DateTime holds: a time bound as one
// past it, or before 1970, wraps to another instant, so query values and cursors outside
// are refused.
const maxDateTime = 1<<32 - 1

// datedLists are the lists whose cursor carries a day.
var datedLists = map[string]bool{"plan_actuals": true, "campaign_actuals": true, "pixel_rollups": true}

// invalidQuery is the 422 answer for errs, or nil when there are none.
func invalidQuery(errs []problem.FieldError) error {
	if len(errs) == 0 {
		return nil
	}
	return problem.Invalid("Some query parameters are not valid; see errors[].", errs...)
}

// queryError is an errors[] entry for query parameter name.
func queryError(name, rule string, value any) problem.FieldError {
	return problem.QueryParam(name, rule, value)
}

// parseDay reads an optional YYYY-MM-DD query parameter.
func parseDay(r *httpserver.Request, name string, errs *[]problem.FieldError) time.Time {
	v := r.Query(name)
	if v == "" {
		return time.Time{}
	}
	t, err := catalog.ParseDay(v)
	if err != nil {
		e := queryError(name, "date", v)
		e.Detail += ": " + catalog.DayRule
		*errs = append(*errs, e)
	}
	return t
}

// dateRange reads from and to (inclusive days; to not before from).
func dateRange(r *httpserver.Request, errs *[]problem.FieldError) (time.Time, time.Time) {
	from, to := parseDay(r, "from", errs), parseDay(r, "to", errs)
	if !from.IsZero() && !to.IsZero() && to.Before(from) {
		*errs = append(*errs, queryError("to", "not_before_from", r.Query("to")))
	}
	return from, to
}
