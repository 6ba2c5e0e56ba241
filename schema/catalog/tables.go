package catalog

import (
	"context"
	"fmt"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/google/uuid"
)

var accountTable = table[Account]{
	name: "accounts", id: "workspace_id",
	cols: "workspace_id, name, legal_name, country, currency, timezone, industry, created_at, updated_at",
	scan: func(r driver.Rows) (a Account, err error) {
		err = r.Scan(&a.WorkspaceID, &a.Name, &a.LegalName, &a.Country, &a.Currency, &a.Timezone, &a.Industry, &a.CreatedAt, &a.UpdatedAt)
		return a, err
	},
}

var planTable = table[Plan]{
	name: "plans", id: "plan_id",
	cols: "plan_id, name, advertiser, objective, status, start_date, end_date, budget, currency, channels, owner, created_at, updated_at",
	scan: func(r driver.Rows) (p Plan, err error) {
		err = r.Scan(&p.ID, &p.Name, &p.Advertiser, &p.Objective, &p.Status, &p.StartDate, &p.EndDate, &p.Budget,
			&p.Currency, &p.Channels, &p.Owner, &p.CreatedAt, &p.UpdatedAt)
		p.StartDate, p.EndDate = Day(p.StartDate), Day(p.EndDate)
		return p, err
	},
}

var lineTable = table[Line]{
	name: "line_items", id: "line_id",
	cols: "line_id, plan_id, name, channel, publisher, buy_type, unit_cost, start_date, end_date, budget, currency, planned_impressions, status, created_at, updated_at",
	scan: func(r driver.Rows) (l Line, err error) {
		err = r.Scan(&l.ID, &l.PlanID, &l.Name, &l.Channel, &l.Publisher, &l.BuyType, &l.UnitCost, &l.StartDate, &l.EndDate,
			&l.Budget, &l.Currency, &l.PlannedImpressions, &l.Status, &l.CreatedAt, &l.UpdatedAt)
		l.StartDate, l.EndDate = Day(l.StartDate), Day(l.EndDate)
		return l, err
	},
}

var campaignTable = table[Campaign]{
	name: "campaigns", id: "campaign_id",
	cols: "campaign_id, plan_id, name, objective, status, channels, start_date, end_date, budget, currency, created_at, updated_at",
	scan: func(r driver.Rows) (c Campaign, err error) {
		err = r.Scan(&c.ID, &c.PlanID, &c.Name, &c.Objective, &c.Status, &c.Channels, &c.StartDate, &c.EndDate, &c.Budget,
			&c.Currency, &c.CreatedAt, &c.UpdatedAt)
		c.StartDate, c.EndDate = Day(c.StartDate), Day(c.EndDate)
		return c, err
	},
}

var studyTable = table[Study]{
	name: "studies", id: "study_id",
	cols: "study_id, campaign_id, name, kind, status, period_start, period_end, methodology, created_at, updated_at",
	scan: func(r driver.Rows) (s Study, err error) {
		err = r.Scan(&s.ID, &s.CampaignID, &s.Name, &s.Kind, &s.Status, &s.PeriodStart, &s.PeriodEnd, &s.Methodology,
			&s.CreatedAt, &s.UpdatedAt)
		s.PeriodStart, s.PeriodEnd = Day(s.PeriodStart), Day(s.PeriodEnd)
		return s, err
	},
}

var findingTable = table[Finding]{
	name: "findings", id: "finding_id",
	cols: "finding_id, study_id, metric, value, unit, confidence, ci_lower, ci_upper, summary, created_at, updated_at",
	scan: func(r driver.Rows) (f Finding, err error) {
		err = r.Scan(&f.ID, &f.StudyID, &f.Metric, &f.Value, &f.Unit, &f.Confidence, &f.CILower, &f.CIUpper, &f.Summary,
			&f.CreatedAt, &f.UpdatedAt)
		return f, err
	},
}

// GetAccount returns workspace's account record, or ErrNotFound if none was imported.
func GetAccount(ctx context.Context, conn driver.Conn, ws uuid.UUID) (Account, error) {
	return get(ctx, conn, accountTable, ws, ws)
}

// GetPlan returns plan id of workspace ws, or ErrNotFound.
func GetPlan(ctx context.Context, conn driver.Conn, ws, id uuid.UUID) (Plan, error) {
	return get(ctx, conn, planTable, ws, id)
}

// ListPlans returns a page of ws's plans in id order.
func ListPlans(ctx context.Context, conn driver.Conn, ws uuid.UUID, q ListQuery) ([]Plan, error) {
	return list(ctx, conn, planTable, ws, nil, q)
}

// ListLines returns a page of the line items of plan in ws, in id order.
func ListLines(ctx context.Context, conn driver.Conn, ws, plan uuid.UUID, q ListQuery) ([]Line, error) {
	return list(ctx, conn, lineTable, ws, []Cond{{"plan_id = toUUID(?)", plan.String()}}, q)
}

// GetCampaign returns campaign id of ws, or ErrNotFound.
func GetCampaign(ctx context.Context, conn driver.Conn, ws, id uuid.UUID) (Campaign, error) {
	return get(ctx, conn, campaignTable, ws, id)
}

// CampaignsExisting returns which of the campaigns ids exist in workspace ws, in one
// query (for writers of campaign actuals with ids from outside).
func CampaignsExisting(ctx context.Context, conn driver.Conn, ws uuid.UUID, ids []uuid.UUID) (map[uuid.UUID]bool, error) {
	out := map[uuid.UUID]bool{}
	if len(ids) == 0 {
		return out, nil
	}
	strs := make([]string, len(ids))
	for i, id := range ids {
		strs[i] = id.String()
	}
	cs, err := list(ctx, conn, campaignTable, ws, []Cond{{"has(arrayMap(x -> toUUID(x), ?), " + campaignTable.id + ")", strs}},
		ListQuery{Limit: len(ids)})
	if err != nil {
		return nil, err
	}
	for _, c := range cs {
		out[c.ID] = true
	}
	return out, nil
}

// ListCampaigns returns a page of ws's campaigns in id order.
func ListCampaigns(ctx context.Context, conn driver.Conn, ws uuid.UUID, q ListQuery) ([]Campaign, error) {
	return list(ctx, conn, campaignTable, ws, nil, q)
}

// GetStudy returns study id of ws, or ErrNotFound.
func GetStudy(ctx context.Context, conn driver.Conn, ws, id uuid.UUID) (Study, error) {
	return get(ctx, conn, studyTable, ws, id)
}

// ListStudies returns a page of ws's studies in id order.
func ListStudies(ctx context.Context, conn driver.Conn, ws uuid.UUID, q ListQuery) ([]Study, error) {
	return list(ctx, conn, studyTable, ws, nil, q)
}

// GetFinding returns finding id of ws, or ErrNotFound.
func GetFinding(ctx context.Context, conn driver.Conn, ws, id uuid.UUID) (Finding, error) {
	return get(ctx, conn, findingTable, ws, id)
}

// ListFindings returns a page of ws's findings in id order.
func ListFindings(ctx context.Context, conn driver.Conn, ws uuid.UUID, q ListQuery) ([]Finding, error) {
	return list(ctx, conn, findingTable, ws, nil, q)
}

// LinePlans returns, for the given line ids, the plan each belongs to in ws; a line
// that is not in ws is absent from the map. It serves the actuals import's check that
// every row's line belongs to its plan.
func LinePlans(ctx context.Context, conn driver.Conn, ws uuid.UUID, lines []uuid.UUID) (map[uuid.UUID]uuid.UUID, error) {
	out := map[uuid.UUID]uuid.UUID{}
	if len(lines) == 0 {
		return out, nil
	}
	strs := make([]string, len(lines))
	for i, l := range lines {
		strs[i] = l.String()
	}
	rows, err := conn.Query(ctx, `SELECT DISTINCT line_id, plan_id FROM line_items
		WHERE workspace_id = toUUID(?) AND has(arrayMap(x -> toUUID(x), ?), line_id)`, ws.String(), strs)
	if err != nil {
		return nil, fmt.Errorf("catalog: line plans: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var l, p uuid.UUID
		if err := rows.Scan(&l, &p); err != nil {
			return nil, fmt.Errorf("catalog: line plans: %w", err)
		}
		out[l] = p
	}
	return out, rows.Err()
}
