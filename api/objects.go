package api

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/google/uuid"

	"svc/lib/apikey"
	"svc/lib/httpserver"
	"svc/lib/ids"
	"svc/lib/paging"
	"svc/lib/problem"
	"svc/schema/catalog"
	"svc/schema/workspace"
)

func (a *API) catalogRoutes() []httpserver.Route {
	return []httpserver.Route{
		{Method: "GET", Path: "/plans", Scope: ScopePlans, Summary: "Media plans (filters: status, channel).", Handle: a.listPlans},
		{Method: "GET", Path: "/plans/{id}", Scope: ScopePlans, Summary: "One media plan.",
			Handle: getOne(a, ids.Plan, "plan", catalog.GetPlan, planView)},
		{Method: "GET", Path: "/plans/{id}/lines", Scope: ScopePlans, Summary: "A plan's line items (filters: status, channel).", Handle: a.listLines},
		{Method: "GET", Path: "/plans/{id}/actuals", Scope: ScopePlans, Summary: "A plan's delivered days per line item (filters: line_id, from, to).", Handle: a.cached(a.listPlanActuals)},
		{Method: "GET", Path: "/campaigns", Scope: ScopeCampaigns, Summary: "Campaigns (filters: status, plan_id, channel).", Handle: a.listCampaigns},
		{Method: "GET", Path: "/campaigns/{id}", Scope: ScopeCampaigns, Summary: "One campaign.",
			Handle: getOne(a, ids.Campaign, "campaign", catalog.GetCampaign, campaignView)},
		{Method: "GET", Path: "/campaigns/{id}/actuals", Scope: ScopeCampaigns, Summary: "A campaign's delivered days (filters: from, to).", Handle: a.cached(a.listCampaignActuals)},
		{Method: "GET", Path: "/studies", Scope: ScopeStudies, Summary: "Studies (filters: kind, status, campaign_id).", Handle: a.listStudies},
		{Method: "GET", Path: "/studies/{id}", Scope: ScopeStudies, Summary: "One study.",
			Handle: getOne(a, ids.Study, "study", catalog.GetStudy, studyView)},
		{Method: "GET", Path: "/findings", Scope: ScopeStudies, Summary: "Findings (filters: study_id, metric).", Handle: a.listFindings},
		{Method: "GET", Path: "/findings/{id}", Scope: ScopeStudies, Summary: "One finding.",
			Handle: getOne(a, ids.Finding, "finding", catalog.GetFinding, findingView)},
	}
}

type getter[T any] func(ctx context.Context, conn driver.Conn, ws, id uuid.UUID) (T, error)

// getOne serves GET /<kind>/{id}: the object of the key's workspace, else 404.
func getOne[T, V any](a *API, p ids.Prefix, kind string, get getter[T], view func(*T) V) httpserver.Handler {
	return func(r *httpserver.Request) error {
		v, err := object(a, r, p, kind, get)
		if err != nil {
			return err
		}
		return r.JSON(200, view(&v))
	}
}

// object reads the path's {id} as an object of kind in the key's workspace.
func object[T any](a *API, r *httpserver.Request, p ids.Prefix, kind string, get getter[T]) (T, error) {
	var zero T
	raw := r.Param("id")
	id, err := ids.Parse(p, raw)
	if err != nil {
		return zero, notFound(kind, raw)
	}
	ctx, cancel := a.ctx(r)
	defer cancel()
	v, err := get(ctx, a.Conn, r.Key.WorkspaceID, id)
	if errors.Is(err, catalog.ErrNotFound) {
		return zero, notFound(kind, raw)
	}
	if err != nil {
		return zero, a.storeErr(r, err)
	}
	return v, nil
}

// listOf serves one page of a catalog list: the paging parameters are read and checked
// together with the filters' errors; fetch gets the page plus one row.
func listOf[T, V any](a *API, r *httpserver.Request, tag string, errs []problem.FieldError, conds []catalog.Cond,
	fetch func(ctx context.Context, q catalog.ListQuery) ([]T, error), view func(*T) V, idOf func(*T) uuid.UUID) error {
	p := parsePage(r, tag, &errs)
	if err := invalidQuery(errs); err != nil {
		return err
	}
	q := catalog.ListQuery{Where: conds, Offset: p.Offset, Limit: p.Limit + 1}
	if p.After != nil {
		q.After = p.After.ID
	}
	ctx, cancel := a.ctx(r)
	defer cancel()
	rows, err := fetch(ctx, q)
	if err != nil {
		return a.storeErr(r, err)
	}
	out := make([]V, len(rows))
	for i := range rows {
		out[i] = view(&rows[i])
	}
	return httpserver.WriteList(r, p, out, func(i int) paging.Cursor { return paging.Cursor{List: tag, ID: idOf(&rows[i])} })
}

// enumFilter adds "col = ?" for query parameter name when given; a value outside
// allowed is an error.
func enumFilter(r *httpserver.Request, name, col string, allowed []string, conds *[]catalog.Cond, errs *[]problem.FieldError) {
	v := r.Query(name)
	if v == "" {
		return
	}
	if !slices.Contains(allowed, v) {
		*errs = append(*errs, queryError(name, "one_of", v))
		return
	}
	*conds = append(*conds, catalog.Cond{SQL: col + " = ?", Arg: v})
}

// channelFilter adds "has(channels, ?)" for the channel parameter.
func channelFilter(r *httpserver.Request, conds *[]catalog.Cond, errs *[]problem.FieldError) {
	v := r.Query("channel")
	if v == "" {
		return
	}
	if !slices.Contains(catalog.Channels, v) {
		*errs = append(*errs, queryError("channel", "one_of", v))
		return
	}
	*conds = append(*conds, catalog.Cond{SQL: "has(channels, ?)", Arg: v})
}

// idFilter adds "col = toUUID(?)" for an id parameter of kind p; a malformed id is an
// error (an id of another workspace simply matches nothing).
func idFilter(r *httpserver.Request, name, col string, p ids.Prefix, conds *[]catalog.Cond, errs *[]problem.FieldError) uuid.UUID {
	v := r.Query(name)
	if v == "" {
		return uuid.Nil
	}
	id, err := ids.Parse(p, v)
	if err != nil {
		*errs = append(*errs, queryError(name, "id", v))
		return uuid.Nil
	}
	*conds = append(*conds, catalog.Cond{SQL: col + " = toUUID(?)", Arg: id.String()})
	return id
}

// textFilter adds "col = ?" for a free-text parameter (at most 200 characters).
func textFilter(r *httpserver.Request, name, col string, conds *[]catalog.Cond, errs *[]problem.FieldError) {
	v := r.Query(name)
	if v == "" {
		return
	}
	if len(v) > 200 {
		*errs = append(*errs, queryError(name, "max_length_200", v[:200]))
		return
	}
	*conds = append(*conds, catalog.Cond{SQL: col + " = ?", Arg: v})
}

func (a *API) listPlans(r *httpserver.Request) error {
	var conds []catalog.Cond
	var errs []problem.FieldError
	enumFilter(r, "status", "status", catalog.PlanStatuses, &conds, &errs)
	channelFilter(r, &conds, &errs)
	ws := r.Key.WorkspaceID
	return listOf(a, r, "plans", errs, conds, func(ctx context.Context, q catalog.ListQuery) ([]catalog.Plan, error) {
		return catalog.ListPlans(ctx, a.Conn, ws, q)
	}, planView, func(p *catalog.Plan) uuid.UUID { return p.ID })
}

func (a *API) listLines(r *httpserver.Request) error {
	plan, err := object(a, r, ids.Plan, "plan", catalog.GetPlan)
	if err != nil {
		return err
	}
	var conds []catalog.Cond
	var errs []problem.FieldError
	enumFilter(r, "status", "status", catalog.LineStatuses, &conds, &errs)
	enumFilter(r, "channel", "channel", catalog.Channels, &conds, &errs)
	ws := r.Key.WorkspaceID
	return listOf(a, r, "lines", errs, conds, func(ctx context.Context, q catalog.ListQuery) ([]catalog.Line, error) {
		return catalog.ListLines(ctx, a.Conn, ws, plan.ID, q)
	}, lineView, func(l *catalog.Line) uuid.UUID { return l.ID })
}

func (a *API) listCampaigns(r *httpserver.Request) error {
	var conds []catalog.Cond
	var errs []problem.FieldError
	enumFilter(r, "status", "status", catalog.CampaignStatuses, &conds, &errs)
	idFilter(r, "plan_id", "plan_id", ids.Plan, &conds, &errs)
	channelFilter(r, &conds, &errs)
	ws := r.Key.WorkspaceID
	return listOf(a, r, "campaigns", errs, conds, func(ctx context.Context, q catalog.ListQuery) ([]catalog.Campaign, error) {
		return catalog.ListCampaigns(ctx, a.Conn, ws, q)
	}, campaignView, func(c *catalog.Campaign) uuid.UUID { return c.ID })
}

func (a *API) listStudies(r *httpserver.Request) error {
	var conds []catalog.Cond
	var errs []problem.FieldError
	enumFilter(r, "kind", "kind", catalog.StudyKinds, &conds, &errs)
	enumFilter(r, "status", "status", catalog.StudyStatuses, &conds, &errs)
	idFilter(r, "campaign_id", "campaign_id", ids.Campaign, &conds, &errs)
	ws := r.Key.WorkspaceID
	return listOf(a, r, "studies", errs, conds, func(ctx context.Context, q catalog.ListQuery) ([]catalog.Study, error) {
		return catalog.ListStudies(ctx, a.Conn, ws, q)
	}, studyView, func(s *catalog.Study) uuid.UUID { return s.ID })
}

func (a *API) listFindings(r *httpserver.Request) error {
	var conds []catalog.Cond
	var errs []problem.FieldError
	idFilter(r, "study_id", "study_id", ids.Study, &conds, &errs)
	textFilter(r, "metric", "metric", &conds, &errs)
	ws := r.Key.WorkspaceID
	return listOf(a, r, "findings", errs, conds, func(ctx context.Context, q catalog.ListQuery) ([]catalog.Finding, error) {
		return catalog.ListFindings(ctx, a.Conn, ws, q)
	}, findingView, func(f *catalog.Finding) uuid.UUID { return f.ID })
}

// Account is the body of GET /account: the organisation behind the key's workspace.
type Account struct {
	ID          string    `json:"id"`
	IDUUID      string    `json:"id_uuid"`
	Name        string    `json:"name"`
	LegalName   string    `json:"legal_name"`
	Country     string    `json:"country"`
	Currency    string    `json:"currency"`
	Timezone    string    `json:"timezone"`
	Industry    string    `json:"industry"`
	Environment string    `json:"environment"` // "live", or "sandbox" for a showroom
	Showroom    bool      `json:"showroom"`
	CreatedAt   time.Time `json:"created_at"`
	// RawEventRetentionDays is how long raw events are kept (null: unlimited); rollups
	// keep every day (privacy/README.md).
	RawEventRetentionDays *int `json:"raw_event_retention_days"`
}

func (a *API) account(r *httpserver.Request) error {
	ws := r.Key.WorkspaceID
	w, err := a.Keys.Workspace(r.Context(), ws)
	if errors.Is(err, workspace.ErrNotFound) {
		return notFound("account", ids.Format(ids.Org, ws))
	}
	if err != nil {
		return problem.Unavailable("the key store", 1)
	}
	ctx, cancel := a.ctx(r)
	defer cancel()
	acc, err := catalog.GetAccount(ctx, a.Conn, ws)
	if err != nil && !errors.Is(err, catalog.ErrNotFound) {
		return a.storeErr(r, err)
	}
	out := Account{ID: ids.Format(ids.Org, ws), IDUUID: ws.String(), Name: w.Name, LegalName: acc.LegalName,
		Country: acc.Country, Currency: acc.Currency, Timezone: acc.Timezone, Industry: acc.Industry,
		Environment: apikey.Live, Showroom: w.Showroom, CreatedAt: w.CreatedAt}
	if acc.Name != "" {
		out.Name = acc.Name
	}
	if w.Showroom {
		out.Environment = apikey.Sandbox
	}
	days, err := workspace.NewRetention(a.Keys.Redis()).Get(r.Context(), ws)
	if err != nil {
		return problem.Unavailable("the key store", 1)
	}
	if days > 0 {
		out.RawEventRetentionDays = &days
	}
	return r.JSON(200, out)
}
