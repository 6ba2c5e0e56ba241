package api

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	json "github.com/goccy/go-json"
	"github.com/google/uuid"
	"github.com/shopspring/decimal"

	"svc/lib/httpserver"
	"svc/lib/ids"
	"svc/lib/jsondoc"
	"svc/lib/paging"
	"svc/lib/problem"
	"svc/schema/catalog"
)

// MaxImportRows is the ceiling of POST /imports/actuals (spec: 500 rows per import).
const MaxImportRows = 500

// listPlanActuals serves GET /plans/{id}/actuals. The plan's existence in the key's
// workspace is checked only when the page is empty: rows read are rows of that
// workspace's plan, so a non-empty page proves it (one query instead of two on the hot
// path).
func (a *API) listPlanActuals(r *httpserver.Request) error {
	raw := r.Param("id")
	planID, err := ids.Parse(ids.Plan, raw)
	if err != nil {
		return notFound("plan", raw)
	}
	var errs []problem.FieldError
	var conds []catalog.Cond
	q := catalog.ActualsQuery{Line: idFilter(r, "line_id", "line_id", ids.Line, &conds, &errs)}
	q.From, q.To = dateRange(r, &errs)
	p := parsePage(r, "plan_actuals", &errs)
	if err := invalidQuery(errs); err != nil {
		return err
	}
	q.Offset, q.Limit = p.Offset, p.Limit+1
	if p.After != nil {
		q.After = &catalog.ActualKey{Line: p.After.ID, Date: parseCursorDay(p.After.Date)}
	}
	ctx, cancel := a.ctx(r)
	defer cancel()
	rows, err := catalog.PlanActuals(ctx, a.Conn, r.Key.WorkspaceID, planID, q)
	if err != nil {
		return a.storeErr(r, err)
	}
	if len(rows) == 0 {
		if _, err := object(a, r, ids.Plan, "plan", catalog.GetPlan); err != nil {
			return err
		}
	}
	out := make([]PlanActual, len(rows))
	for i := range rows {
		out[i] = planActualView(&rows[i])
	}
	return httpserver.WriteList(r, p, out, func(i int) paging.Cursor {
		return paging.Cursor{List: "plan_actuals", ID: rows[i].LineID, Date: day(rows[i].Date)}
	})
}

// listCampaignActuals serves GET /campaigns/{id}/actuals, checking the campaign only
// for an empty page (as listPlanActuals).
func (a *API) listCampaignActuals(r *httpserver.Request) error {
	raw := r.Param("id")
	cmpID, err := ids.Parse(ids.Campaign, raw)
	if err != nil {
		return notFound("campaign", raw)
	}
	var errs []problem.FieldError
	var q catalog.ActualsQuery
	q.From, q.To = dateRange(r, &errs)
	p := parsePage(r, "campaign_actuals", &errs)
	if err := invalidQuery(errs); err != nil {
		return err
	}
	q.Offset, q.Limit = p.Offset, p.Limit+1
	if p.After != nil {
		q.After = &catalog.ActualKey{Date: parseCursorDay(p.After.Date)}
	}
	ctx, cancel := a.ctx(r)
	defer cancel()
	rows, err := catalog.CampaignActuals(ctx, a.Conn, r.Key.WorkspaceID, cmpID, q)
	if err != nil {
		return a.storeErr(r, err)
	}
	if len(rows) == 0 {
		if _, err := object(a, r, ids.Campaign, "campaign", catalog.GetCampaign); err != nil {
			return err
		}
	}
	out := make([]CampaignActual, len(rows))
	for i := range rows {
		out[i] = campaignActualView(&rows[i])
	}
	return httpserver.WriteList(r, p, out, func(i int) paging.Cursor { return paging.Cursor{List: "campaign_actuals", Date: day(rows[i].Date)} })
}

// parseCursorDay reads a cursor's day (decodeCursor has checked it).
func parseCursorDay(s string) time.Time {
	t, _ := time.Parse(time.DateOnly, s)
	return t
}

// ImportResult is the 200 body of POST /imports/actuals.
type ImportResult struct {
	Rows      int    `json:"rows"`     // rows received
	Upserted  int    `json:"upserted"` // rows written (each replaces its plan, line and day)
	RequestID string `json:"request_id"`
}

// importRowFields are the members of one import row.
var importRowFields = []string{"plan_id", "line_id", "date", "impressions", "clicks", "spend", "currency", "conversions"}

// importActuals serves POST /imports/actuals: body {"rows": [...]}, at most 500 rows,
// every row validated (errors[] names rows[i].field); each row's line must belong to
// its plan in the key's workspace; then one upsert on (plan, line, date). Nothing is
// written unless every row is valid.
func (a *API) importActuals(r *httpserver.Request) error {
	rows, p := parseImport(r.Body())
	if p != nil {
		return p
	}
	ctx, cancel := a.ctx(r)
	defer cancel()
	if err := a.checkLines(ctx, r, rows); err != nil {
		return err
	}
	out := make([]catalog.PlanActual, len(rows))
	for i, row := range rows {
		out[i] = row.PlanActual
		out[i].Source = "import"
	}
	err := catalog.UpsertPlanActuals(ctx, a.Conn, r.Key.WorkspaceID, out)
	a.Cache.Forget(r.Key.WorkspaceID.String()) // even on failure: the write may have landed
	if err != nil {
		return a.storeErr(r, err)
	}
	return r.JSON(200, ImportResult{Rows: len(rows), Upserted: len(rows), RequestID: r.ID})
}

type importRow struct {
	catalog.PlanActual
	rawLine string
}

// parseImport decodes and validates the body. It returns every row, or a 422 problem
// listing every broken rule.
func parseImport(body []byte) ([]importRow, *problem.Problem) {
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(body, &doc); err != nil || doc == nil {
		return nil, problem.Invalid("The body must be a JSON object {\"rows\": [...]}.",
			problem.FieldError{Field: "body", Rule: "json_object", Value: nil, Pointer: ""})
	}
	if p := jsondoc.Check(body); p != nil {
		return nil, p
	}
	var raws []json.RawMessage
	if err := json.Unmarshal(doc["rows"], &raws); err != nil || doc["rows"] == nil {
		return nil, problem.Invalid("rows must be an array of import rows.",
			problem.FieldError{Field: "rows", Rule: "array", Value: nil, Pointer: "/rows"})
	}
	var errs []problem.FieldError
	for k := range doc {
		if k != "rows" {
			errs = append(errs, problem.FieldError{Field: k, Rule: "unknown_field", Value: k, Pointer: "/" + k})
		}
	}
	switch {
	case len(raws) == 0:
		errs = append(errs, problem.FieldError{Field: "rows", Rule: "min_items", Value: 0, Pointer: "/rows"})
	case len(raws) > MaxImportRows:
		return nil, problem.Invalid(fmt.Sprintf("An import holds at most %d rows; this one has %d.", MaxImportRows, len(raws)),
			problem.FieldError{Field: "rows", Rule: "max_items", Value: len(raws), Pointer: "/rows"})
	}
	rows := make([]importRow, len(raws))
	seen := map[[2]uuid.UUID]map[time.Time]int{}
	for i, raw := range raws {
		v := &rowValidator{field: "rows[" + strconv.Itoa(i) + "]"}
		rows[i] = v.row(raw)
		errs = append(errs, v.errs...)
		if len(v.errs) == 0 {
			k := [2]uuid.UUID{rows[i].PlanID, rows[i].LineID}
			if seen[k] == nil {
				seen[k] = map[time.Time]int{}
			}
			if j, dup := seen[k][rows[i].Date]; dup {
				errs = append(errs, fieldErr(v.field+".date", "unique_per_line_and_day", fmt.Sprintf("%s (also rows[%d])", day(rows[i].Date), j)))
			}
			seen[k][rows[i].Date] = i
		}
	}
	if len(errs) > 0 {
		return nil, problem.Invalid("Some rows are not valid; nothing was written. See errors[].", errs...)
	}
	return rows, nil
}

func fieldErr(field, rule string, value any) problem.FieldError {
	return problem.FieldError{Field: field, Rule: rule, Value: value, Pointer: catalog.Pointer(field)}
}

// rowValidator checks one import row, collecting its errors.
type rowValidator struct {
	field string
	errs  []problem.FieldError
}

func (v *rowValidator) fail(name, rule string, value any) {
	v.errs = append(v.errs, fieldErr(v.field+"."+name, rule, value))
}

func (v *rowValidator) row(raw json.RawMessage) importRow {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		v.errs = append(v.errs, fieldErr(v.field, "json_object", string(raw)))
		return importRow{}
	}
	for k := range m {
		if !slices.Contains(importRowFields, k) {
			v.fail(k, "unknown_field", k)
		}
	}
	var out importRow
	out.PlanID = v.id(m, "plan_id", ids.Plan)
	out.rawLine = v.str(m, "line_id", true)
	out.LineID = v.id(m, "line_id", ids.Line)
	if s := v.str(m, "date", true); s != "" {
		d, err := catalog.ParseDay(s)
		if err != nil {
			v.fail("date", "date", s)
		}
		out.Date = d
	}
	out.Impressions = v.count(m, "impressions")
	out.Clicks = v.count(m, "clicks")
	out.Conversions = v.count(m, "conversions")
	out.Spend = v.money(m, "spend")
	out.Currency = v.str(m, "currency", true)
	if out.Currency != "" && !catalog.ValidCurrency(out.Currency) {
		v.fail("currency", "currency", out.Currency)
	}
	return out
}

// str returns the string member name ("" when absent or not a string, with an error
// when required or of another type; a required one that is "" is missing too).
func (v *rowValidator) str(m map[string]json.RawMessage, name string, report bool) string {
	raw, ok := m[name]
	if !ok || string(raw) == "null" {
		if report {
			v.fail(name, "required", nil)
		}
		return ""
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		if report {
			v.fail(name, "string", string(raw))
		}
		return ""
	}
	if s == "" && report {
		v.fail(name, "required", "")
	}
	return s
}

func (v *rowValidator) id(m map[string]json.RawMessage, name string, p ids.Prefix) uuid.UUID {
	s := v.str(m, name, name != "line_id") // line_id's presence is reported once, by the caller
	if s == "" {
		return uuid.Nil
	}
	id, err := ids.Parse(p, s)
	if err != nil {
		v.fail(name, "id", s)
	}
	return id
}

// count reads an optional non-negative integer (absent: 0).
func (v *rowValidator) count(m map[string]json.RawMessage, name string) uint64 {
	raw, ok := m[name]
	if !ok {
		return 0
	}
	n, err := strconv.ParseUint(string(bytes.TrimSpace(raw)), 10, 63)
	if err != nil {
		v.fail(name, "non_negative_integer", string(raw))
	}
	return n
}

// money reads an optional amount, as a JSON number or a decimal string (absent: 0).
func (v *rowValidator) money(m map[string]json.RawMessage, name string) decimal.Decimal {
	raw, ok := m[name]
	if !ok {
		return decimal.Zero
	}
	s := string(bytes.TrimSpace(raw))
	if len(s) >= 2 && s[0] == '"' {
		if err := json.Unmarshal(raw, &s); err != nil {
			v.fail(name, "money", string(raw))
			return decimal.Zero
		}
	}
	d, err := decimal.NewFromString(s)
	if err != nil || len(s) > 40 || !catalog.ValidMoney(d) {
		v.fail(name, "money", string(raw))
		return decimal.Zero
	}
	return d
}

// checkLines verifies that every row's line belongs to the row's plan in the key's
// workspace; a line of another plan or workspace, or no line at all, is the same error.
func (a *API) checkLines(ctx context.Context, r *httpserver.Request, rows []importRow) error {
	lines := make([]uuid.UUID, 0, len(rows))
	for _, row := range rows {
		lines = append(lines, row.LineID)
	}
	owner, err := catalog.LinePlans(ctx, a.Conn, r.Key.WorkspaceID, lines)
	if err != nil {
		return a.storeErr(r, err)
	}
	var errs []problem.FieldError
	for i, row := range rows {
		if p, ok := owner[row.LineID]; !ok || p != row.PlanID {
			errs = append(errs, fieldErr("rows["+strconv.Itoa(i)+"].line_id", "line_of_plan", row.rawLine))
		}
	}
	if len(errs) > 0 {
		return problem.Invalid("Some rows name a line item that is not a line of the row's plan in this workspace; nothing was written.", errs...)
	}
	return nil
}
