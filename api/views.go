package api

import (
	"time"

	"github.com/google/uuid"
	"github.com/shopspring/decimal"

	"svc/lib/ids"
	"svc/schema/catalog"
)

// The JSON records of the read API. Every id is prefixed and has its raw UUID beside it
// as <field>_uuid; an optional reference that is unset is null in both. Days are
// "YYYY-MM-DD"; amounts are decimal strings with four places ("1250.5000") in the
// record's currency.

// ref is a prefixed id and its raw UUID, or two nulls for uuid.Nil.
func ref(p ids.Prefix, id uuid.UUID) (*string, *string) {
	if id == uuid.Nil {
		return nil, nil
	}
	s, u := ids.Format(p, id), id.String()
	return &s, &u
}

func day(t time.Time) string { return t.UTC().Format(time.DateOnly) }

func money(d decimal.Decimal) string { return d.StringFixed(4) }

func strs(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// Plan is a media plan record.
type Plan struct {
	ID         string    `json:"id"`
	IDUUID     string    `json:"id_uuid"`
	Name       string    `json:"name"`
	Advertiser string    `json:"advertiser"`
	Objective  string    `json:"objective"`
	Status     string    `json:"status"`
	StartDate  string    `json:"start_date"`
	EndDate    string    `json:"end_date"`
	Budget     string    `json:"budget"`
	Currency   string    `json:"currency"`
	Channels   []string  `json:"channels"`
	Owner      string    `json:"owner"`
	CreatedAt  time.Time `json:"created_at"`
	UpdatedAt  time.Time `json:"updated_at"`
}

func planView(p *catalog.Plan) Plan {
	return Plan{ID: ids.Format(ids.Plan, p.ID), IDUUID: p.ID.String(), Name: p.Name, Advertiser: p.Advertiser,
		Objective: p.Objective, Status: p.Status, StartDate: day(p.StartDate), EndDate: day(p.EndDate),
		Budget: money(p.Budget), Currency: p.Currency, Channels: strs(p.Channels), Owner: p.Owner,
		CreatedAt: p.CreatedAt, UpdatedAt: p.UpdatedAt}
}

// Line is a line item record.
type Line struct {
	ID                 string    `json:"id"`
	IDUUID             string    `json:"id_uuid"`
	PlanID             string    `json:"plan_id"`
	PlanIDUUID         string    `json:"plan_id_uuid"`
	Name               string    `json:"name"`
	Channel            string    `json:"channel"`
	Publisher          string    `json:"publisher"`
	BuyType            string    `json:"buy_type"`
	UnitCost           string    `json:"unit_cost"`
	StartDate          string    `json:"start_date"`
	EndDate            string    `json:"end_date"`
	Budget             string    `json:"budget"`
	Currency           string    `json:"currency"`
	PlannedImpressions uint64    `json:"planned_impressions"`
	Status             string    `json:"status"`
	CreatedAt          time.Time `json:"created_at"`
	UpdatedAt          time.Time `json:"updated_at"`
}

func lineView(l *catalog.Line) Line {
	return Line{ID: ids.Format(ids.Line, l.ID), IDUUID: l.ID.String(), PlanID: ids.Format(ids.Plan, l.PlanID),
		PlanIDUUID: l.PlanID.String(), Name: l.Name, Channel: l.Channel, Publisher: l.Publisher, BuyType: l.BuyType,
		UnitCost: money(l.UnitCost), StartDate: day(l.StartDate), EndDate: day(l.EndDate), Budget: money(l.Budget),
		Currency: l.Currency, PlannedImpressions: l.PlannedImpressions, Status: l.Status,
		CreatedAt: l.CreatedAt, UpdatedAt: l.UpdatedAt}
}

// Campaign is a campaign record.
type Campaign struct {
	ID         string    `json:"id"`
	IDUUID     string    `json:"id_uuid"`
	PlanID     *string   `json:"plan_id"`
	PlanIDUUID *string   `json:"plan_id_uuid"`
	Name       string    `json:"name"`
	Objective  string    `json:"objective"`
	Status     string    `json:"status"`
	Channels   []string  `json:"channels"`
	StartDate  string    `json:"start_date"`
	EndDate    string    `json:"end_date"`
	Budget     string    `json:"budget"`
	Currency   string    `json:"currency"`
	CreatedAt  time.Time `json:"created_at"`
	UpdatedAt  time.Time `json:"updated_at"`
}

func campaignView(c *catalog.Campaign) Campaign {
	v := Campaign{ID: ids.Format(ids.Campaign, c.ID), IDUUID: c.ID.String(), Name: c.Name, Objective: c.Objective,
		Status: c.Status, Channels: strs(c.Channels), StartDate: day(c.StartDate), EndDate: day(c.EndDate),
		Budget: money(c.Budget), Currency: c.Currency, CreatedAt: c.CreatedAt, UpdatedAt: c.UpdatedAt}
	v.PlanID, v.PlanIDUUID = ref(ids.Plan, c.PlanID)
	return v
}

// Study is a study record.
type Study struct {
	ID             string    `json:"id"`
	IDUUID         string    `json:"id_uuid"`
	CampaignID     *string   `json:"campaign_id"`
	CampaignIDUUID *string   `json:"campaign_id_uuid"`
	Name           string    `json:"name"`
	Kind           string    `json:"kind"`
	Status         string    `json:"status"`
	PeriodStart    string    `json:"period_start"`
	PeriodEnd      string    `json:"period_end"`
	Methodology    string    `json:"methodology"`
	CreatedAt      time.Time `json:"created_at"`
	UpdatedAt      time.Time `json:"updated_at"`
}

func studyView(s *catalog.Study) Study {
	v := Study{ID: ids.Format(ids.Study, s.ID), IDUUID: s.ID.String(), Name: s.Name, Kind: s.Kind, Status: s.Status,
		PeriodStart: day(s.PeriodStart), PeriodEnd: day(s.PeriodEnd), Methodology: s.Methodology,
		CreatedAt: s.CreatedAt, UpdatedAt: s.UpdatedAt}
	v.CampaignID, v.CampaignIDUUID = ref(ids.Campaign, s.CampaignID)
	return v
}

// Finding is a finding record.
type Finding struct {
	ID          string    `json:"id"`
	IDUUID      string    `json:"id_uuid"`
	StudyID     string    `json:"study_id"`
	StudyIDUUID string    `json:"study_id_uuid"`
	Metric      string    `json:"metric"`
	Value       float64   `json:"value"`
	Unit        string    `json:"unit"`
	Confidence  float64   `json:"confidence"`
	CILower     float64   `json:"ci_lower"`
	CIUpper     float64   `json:"ci_upper"`
	Summary     string    `json:"summary"`
	CreatedAt   time.Time `json:"created_at"`
	UpdatedAt   time.Time `json:"updated_at"`
}

func findingView(f *catalog.Finding) Finding {
	return Finding{ID: ids.Format(ids.Finding, f.ID), IDUUID: f.ID.String(), StudyID: ids.Format(ids.Study, f.StudyID),
		StudyIDUUID: f.StudyID.String(), Metric: f.Metric, Value: f.Value, Unit: f.Unit, Confidence: f.Confidence,
		CILower: f.CILower, CIUpper: f.CIUpper, Summary: f.Summary, CreatedAt: f.CreatedAt, UpdatedAt: f.UpdatedAt}
}

// PlanActual is a row of GET /plans/{id}/actuals: the field names of an import row.
type PlanActual struct {
	PlanID      string    `json:"plan_id"`
	PlanIDUUID  string    `json:"plan_id_uuid"`
	LineID      string    `json:"line_id"`
	LineIDUUID  string    `json:"line_id_uuid"`
	Date        string    `json:"date"`
	Impressions uint64    `json:"impressions"`
	Clicks      uint64    `json:"clicks"`
	Spend       string    `json:"spend"`
	Currency    string    `json:"currency"`
	Conversions uint64    `json:"conversions"`
	UpdatedAt   time.Time `json:"updated_at"`
}

func planActualView(a *catalog.PlanActual) PlanActual {
	return PlanActual{PlanID: ids.Format(ids.Plan, a.PlanID), PlanIDUUID: a.PlanID.String(),
		LineID: ids.Format(ids.Line, a.LineID), LineIDUUID: a.LineID.String(), Date: day(a.Date),
		Impressions: a.Impressions, Clicks: a.Clicks, Spend: money(a.Spend), Currency: a.Currency,
		Conversions: a.Conversions, UpdatedAt: a.UpdatedAt}
}

// CampaignActual is a row of GET /campaigns/{id}/actuals.
type CampaignActual struct {
	CampaignID     string    `json:"campaign_id"`
	CampaignIDUUID string    `json:"campaign_id_uuid"`
	Date           string    `json:"date"`
	Impressions    uint64    `json:"impressions"`
	Clicks         uint64    `json:"clicks"`
	Spend          string    `json:"spend"`
	Currency       string    `json:"currency"`
	Conversions    uint64    `json:"conversions"`
	Source         string    `json:"source"`
	UpdatedAt      time.Time `json:"updated_at"`
}

func campaignActualView(a *catalog.CampaignActual) CampaignActual {
	return CampaignActual{CampaignID: ids.Format(ids.Campaign, a.CampaignID), CampaignIDUUID: a.CampaignID.String(),
		Date: day(a.Date), Impressions: a.Impressions, Clicks: a.Clicks, Spend: money(a.Spend), Currency: a.Currency,
		Conversions: a.Conversions, Source: a.Source, UpdatedAt: a.UpdatedAt}
}
