package catalog

import (
	"context"
	"fmt"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/google/uuid"

	"svc/lib/problem"
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

// Write writes a resolved batch (see Import for the failure contract). An object that
// exists already keeps its created_at; objects given a CreatedAt keep theirs.
func Write(ctx context.Context, conn driver.Conn, ws uuid.UUID, b Batch) (Summary, []problem.FieldError, error) {
	var s Summary
	if err := keepCreated(ctx, conn, ws, &b); err != nil {
		return s, nil, err
	}
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

// keepCreated sets CreatedAt of every object of b that is already stored (and has no
// CreatedAt of its own) to the stored one.
func keepCreated(ctx context.Context, conn driver.Conn, ws uuid.UUID, b *Batch) error {
	type target struct {
		table, id string
		n         int
		at        func(i int) (uuid.UUID, *time.Time)
	}
	ts := []target{
		{"plans", "plan_id", len(b.Plans), func(i int) (uuid.UUID, *time.Time) { return b.Plans[i].ID, &b.Plans[i].CreatedAt }},
		{"line_items", "line_id", len(b.Lines), func(i int) (uuid.UUID, *time.Time) { return b.Lines[i].ID, &b.Lines[i].CreatedAt }},
		{"campaigns", "campaign_id", len(b.Campaigns), func(i int) (uuid.UUID, *time.Time) { return b.Campaigns[i].ID, &b.Campaigns[i].CreatedAt }},
		{"studies", "study_id", len(b.Studies), func(i int) (uuid.UUID, *time.Time) { return b.Studies[i].ID, &b.Studies[i].CreatedAt }},
		{"findings", "finding_id", len(b.Findings), func(i int) (uuid.UUID, *time.Time) { return b.Findings[i].ID, &b.Findings[i].CreatedAt }},
	}
	if b.Account != nil {
		ts = append(ts, target{"accounts", "workspace_id", 1, func(int) (uuid.UUID, *time.Time) { return ws, &b.Account.CreatedAt }})
	}
	for _, t := range ts {
		if t.n == 0 {
			continue
		}
		idStrs := make([]string, t.n)
		for i := range t.n {
			id, _ := t.at(i)
			idStrs[i] = id.String()
		}
		stored, err := createdTimes(ctx, conn, t.table, t.id, ws, idStrs)
		if err != nil {
			return err
		}
		for i := range t.n {
			id, at := t.at(i)
			if c, ok := stored[id]; ok && at.IsZero() {
				*at = c
			}
		}
	}
	return nil
}

// createdTimes returns the earliest created_at of each of ids stored in table for ws.
func createdTimes(ctx context.Context, conn driver.Conn, table, idCol string, ws uuid.UUID, ids []string) (map[uuid.UUID]time.Time, error) {
	rows, err := conn.Query(ctx, "SELECT "+idCol+", min(created_at) FROM "+table+
		" WHERE workspace_id = toUUID(?) AND has(arrayMap(x -> toUUID(x), ?), "+idCol+") GROUP BY "+idCol, ws.String(), ids)
	if err != nil {
		return nil, fmt.Errorf("catalog: %s: %w", table, err)
	}
	defer rows.Close()
	out := map[uuid.UUID]time.Time{}
	for rows.Next() {
		var id uuid.UUID
		var at time.Time
		if err := rows.Scan(&id, &at); err != nil {
			return nil, fmt.Errorf("catalog: %s: %w", table, err)
		}
		out[id] = at
	}
	return out, rows.Err()
}
