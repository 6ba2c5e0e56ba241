package catalog

import (
	"context"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/google/uuid"
)

// The Put functions write objects of workspace ws in one INSERT per call, replacing any
// earlier version of the same ids (the import and the showroom seed use them). They
// expect objects validated by the import (ValidateDocument); a nil workspace is refused.

// PutAccount writes ws's account record.
func PutAccount(ctx context.Context, conn driver.Conn, ws uuid.UUID, a Account) error {
	if err := nonNil(ws, "workspace"); err != nil {
		return err
	}
	c, u := stamp(a.CreatedAt)
	return insert(ctx, conn, "accounts", []string{"workspace_id", "name", "legal_name", "country", "currency",
		"timezone", "industry", "created_at", "updated_at", "version"}, 1, func(int) []any {
		return []any{ws, a.Name, a.LegalName, a.Country, a.Currency, a.Timezone, a.Industry, c, u, nextVersion()}
	})
}

// PutPlans writes plans of ws.
func PutPlans(ctx context.Context, conn driver.Conn, ws uuid.UUID, ps []Plan) error {
	if err := nonNil(ws, "workspace"); err != nil {
		return err
	}
	return insert(ctx, conn, "plans", []string{"workspace_id", "plan_id", "name", "advertiser", "objective", "status",
		"start_date", "end_date", "budget", "currency", "channels", "owner", "created_at", "updated_at", "version"}, len(ps),
		func(i int) []any {
			p := ps[i]
			c, u := stamp(p.CreatedAt)
			return []any{ws, p.ID, p.Name, p.Advertiser, p.Objective, p.Status, day0(p.StartDate), day0(p.EndDate),
				p.Budget, p.Currency, orEmpty(p.Channels), p.Owner, c, u, nextVersion()}
		})
}

// PutLines writes line items of ws (each carries its PlanID).
func PutLines(ctx context.Context, conn driver.Conn, ws uuid.UUID, ls []Line) error {
	if err := nonNil(ws, "workspace"); err != nil {
		return err
	}
	return insert(ctx, conn, "line_items", []string{"workspace_id", "plan_id", "line_id", "name", "channel", "publisher",
		"buy_type", "unit_cost", "start_date", "end_date", "budget", "currency", "planned_impressions", "status",
		"created_at", "updated_at", "version"}, len(ls),
		func(i int) []any {
			l := ls[i]
			c, u := stamp(l.CreatedAt)
			return []any{ws, l.PlanID, l.ID, l.Name, l.Channel, l.Publisher, l.BuyType, l.UnitCost, day0(l.StartDate),
				day0(l.EndDate), l.Budget, l.Currency, l.PlannedImpressions, l.Status, c, u, nextVersion()}
		})
}

// PutCampaigns writes campaigns of ws.
func PutCampaigns(ctx context.Context, conn driver.Conn, ws uuid.UUID, cs []Campaign) error {
	if err := nonNil(ws, "workspace"); err != nil {
		return err
	}
	return insert(ctx, conn, "campaigns", []string{"workspace_id", "campaign_id", "plan_id", "name", "objective", "status",
		"channels", "start_date", "end_date", "budget", "currency", "created_at", "updated_at", "version"}, len(cs),
		func(i int) []any {
			m := cs[i]
			c, u := stamp(m.CreatedAt)
			return []any{ws, m.ID, m.PlanID, m.Name, m.Objective, m.Status, orEmpty(m.Channels), day0(m.StartDate),
				day0(m.EndDate), m.Budget, m.Currency, c, u, nextVersion()}
		})
}

// PutStudies writes studies of ws.
func PutStudies(ctx context.Context, conn driver.Conn, ws uuid.UUID, ss []Study) error {
	if err := nonNil(ws, "workspace"); err != nil {
		return err
	}
	return insert(ctx, conn, "studies", []string{"workspace_id", "study_id", "campaign_id", "name", "kind", "status",
		"period_start", "period_end", "methodology", "created_at", "updated_at", "version"}, len(ss),
		func(i int) []any {
			s := ss[i]
			c, u := stamp(s.CreatedAt)
			return []any{ws, s.ID, s.CampaignID, s.Name, s.Kind, s.Status, day0(s.PeriodStart), day0(s.PeriodEnd),
				s.Methodology, c, u, nextVersion()}
		})
}

// PutFindings writes findings of ws (each carries its StudyID).
func PutFindings(ctx context.Context, conn driver.Conn, ws uuid.UUID, fs []Finding) error {
	if err := nonNil(ws, "workspace"); err != nil {
		return err
	}
	return insert(ctx, conn, "findings", []string{"workspace_id", "finding_id", "study_id", "metric", "value", "unit",
		"confidence", "ci_lower", "ci_upper", "summary", "created_at", "updated_at", "version"}, len(fs),
		func(i int) []any {
			f := fs[i]
			c, u := stamp(f.CreatedAt)
			return []any{ws, f.ID, f.StudyID, f.Metric, f.Value, f.Unit, f.Confidence, f.CILower, f.CIUpper, f.Summary,
				c, u, nextVersion()}
		})
}

func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
