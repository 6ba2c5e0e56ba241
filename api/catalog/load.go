package catalog

import (
	"context"
	"fmt"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/google/uuid"

	"svc/api/problem"
)

// Summary counts what an import wrote.
type Summary struct {
	Account         int `json:"account"`
	Plans           int `json:"plans"`
	Lines           int `json:"lines"`
	Campaigns       int `json:"campaigns"`
	Studies         int `json:"studies"`
	Findings        int `json:"findings"`
	PlanActuals     int `json:"plan_actuals"`
	CampaignActuals int `json:"campaign_actuals"`
}

// Import validates d for workspace ws, checks that the plans and campaigns it refers to
// without defining exist in ws, and writes it. Validation problems come back as field
// errors with nothing written. Writing goes table by table (one INSERT each); if one
// fails, the earlier tables keep their rows, and running the same import again
// completes it (every write is an upsert of the same ids).
func Import(ctx context.Context, conn driver.Conn, ws uuid.UUID, d Document) (Summary, []problem.FieldError, error) {
	b, errs := d.Resolve(ws)
	if len(errs) > 0 {
		return Summary{}, errs, nil
	}
	for id, field := range b.PlanRefs {
		if _, err := GetPlan(ctx, conn, ws, id); err == ErrNotFound {
			errs = append(errs, problem.FieldError{Field: field, Rule: "exists", Value: id.String(), Pointer: Pointer(field)})
		} else if err != nil {
			return Summary{}, nil, err
		}
	}
	for id, field := range b.CampaignRefs {
		if _, err := GetCampaign(ctx, conn, ws, id); err == ErrNotFound {
			errs = append(errs, problem.FieldError{Field: field, Rule: "exists", Value: id.String(), Pointer: Pointer(field)})
		} else if err != nil {
			return Summary{}, nil, err
		}
	}
	if len(errs) > 0 {
		return Summary{}, errs, nil
	}
	return Write(ctx, conn, ws, b)
}

// Write writes a resolved batch (see Import for the failure contract).
func Write(ctx context.Context, conn driver.Conn, ws uuid.UUID, b Batch) (Summary, []problem.FieldError, error) {
	var s Summary
	if b.Account != nil {
		if err := PutAccount(ctx, conn, ws, *b.Account); err != nil {
			return s, nil, err
		}
		s.Account = 1
	}
	steps := []struct {
		n   *int
		len int
		put func() error
	}{
		{&s.Plans, len(b.Plans), func() error { return PutPlans(ctx, conn, ws, b.Plans) }},
		{&s.Lines, len(b.Lines), func() error { return PutLines(ctx, conn, ws, b.Lines) }},
		{&s.Campaigns, len(b.Campaigns), func() error { return PutCampaigns(ctx, conn, ws, b.Campaigns) }},
		{&s.Studies, len(b.Studies), func() error { return PutStudies(ctx, conn, ws, b.Studies) }},
		{&s.Findings, len(b.Findings), func() error { return PutFindings(ctx, conn, ws, b.Findings) }},
		{&s.PlanActuals, len(b.PlanActuals), func() error { return UpsertPlanActuals(ctx, conn, ws, b.PlanActuals) }},
		{&s.CampaignActuals, len(b.CampaignActuals), func() error { return UpsertCampaignActuals(ctx, conn, ws, b.CampaignActuals) }},
	}
	for _, st := range steps {
		if err := st.put(); err != nil {
			return s, nil, fmt.Errorf("after writing %+v: %w", s, err)
		}
		*st.n = st.len
	}
	return s, nil, nil
}
