package catalog

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"time"

	json "github.com/goccy/go-json"
	"github.com/google/uuid"
	"github.com/shopspring/decimal"

	"svc/lib/ids"
	"svc/lib/problem"
)

// Document is the JSON file `svc admin import FILE` loads into one workspace (README.md
// documents it with an example). Ids are optional: an object without one gets a
// deterministic id derived from its parent and name, so importing the same file twice
// writes the same objects again instead of copies.
type Document struct {
	Account   *AccountDoc   `json:"account,omitempty"`
	Plans     []PlanDoc     `json:"plans,omitempty"`
	Campaigns []CampaignDoc `json:"campaigns,omitempty"`
	Studies   []StudyDoc    `json:"studies,omitempty"`
}

// AccountDoc is the account of the document's workspace.
type AccountDoc struct {
	Name      string `json:"name"`
	LegalName string `json:"legal_name,omitempty"`
	Country   string `json:"country,omitempty"`
	Currency  string `json:"currency"`
	Timezone  string `json:"timezone,omitempty"`
	Industry  string `json:"industry,omitempty"`
}

// PlanDoc is a plan with its line items.
type PlanDoc struct {
	ID         string          `json:"id,omitempty"`
	Name       string          `json:"name"`
	Advertiser string          `json:"advertiser,omitempty"`
	Objective  string          `json:"objective"`
	Status     string          `json:"status"`
	StartDate  string          `json:"start_date"`
	EndDate    string          `json:"end_date"`
	Budget     decimal.Decimal `json:"budget"`
	Currency   string          `json:"currency"`
	Channels   []string        `json:"channels,omitempty"`
	Owner      string          `json:"owner,omitempty"`
	Lines      []LineDoc       `json:"lines,omitempty"`
}

// LineDoc is a line item; Currency defaults to its plan's; Actuals are delivered days.
type LineDoc struct {
	ID                 string          `json:"id,omitempty"`
	Name               string          `json:"name"`
	Channel            string          `json:"channel"`
	Publisher          string          `json:"publisher,omitempty"`
	BuyType            string          `json:"buy_type"`
	UnitCost           decimal.Decimal `json:"unit_cost"`
	StartDate          string          `json:"start_date"`
	EndDate            string          `json:"end_date"`
	Budget             decimal.Decimal `json:"budget"`
	Currency           string          `json:"currency,omitempty"`
	PlannedImpressions uint64          `json:"planned_impressions,omitempty"`
	Status             string          `json:"status"`
	Actuals            []DayDoc        `json:"actuals,omitempty"`
}

// DayDoc is one delivered day (currency: the line's or campaign's).
type DayDoc struct {
	Date        string          `json:"date"`
	Impressions uint64          `json:"impressions"`
	Clicks      uint64          `json:"clicks"`
	Spend       decimal.Decimal `json:"spend"`
	Conversions uint64          `json:"conversions"`
}

// CampaignDoc is a campaign; PlanID names a plan of the document or of the workspace.
type CampaignDoc struct {
	ID        string          `json:"id,omitempty"`
	PlanID    string          `json:"plan_id,omitempty"`
	Name      string          `json:"name"`
	Objective string          `json:"objective"`
	Status    string          `json:"status"`
	Channels  []string        `json:"channels,omitempty"`
	StartDate string          `json:"start_date"`
	EndDate   string          `json:"end_date"`
	Budget    decimal.Decimal `json:"budget"`
	Currency  string          `json:"currency"`
	Actuals   []DayDoc        `json:"actuals,omitempty"`
}

// StudyDoc is a study with its findings; CampaignID is optional.
type StudyDoc struct {
	ID          string       `json:"id,omitempty"`
	CampaignID  string       `json:"campaign_id,omitempty"`
	Name        string       `json:"name"`
	Kind        string       `json:"kind"`
	Status      string       `json:"status"`
	PeriodStart string       `json:"period_start"`
	PeriodEnd   string       `json:"period_end"`
	Methodology string       `json:"methodology,omitempty"`
	Findings    []FindingDoc `json:"findings,omitempty"`
}

// FindingDoc is one finding of a study.
type FindingDoc struct {
	ID         string  `json:"id,omitempty"`
	Metric     string  `json:"metric"`
	Value      float64 `json:"value"`
	Unit       string  `json:"unit"`
	Confidence float64 `json:"confidence"`
	CILower    float64 `json:"ci_lower"`
	CIUpper    float64 `json:"ci_upper"`
	Summary    string  `json:"summary,omitempty"`
}

// Batch is a document resolved for one workspace: every object with its id, ready for
// the Put functions. Refs lists the plan and campaign ids the document refers to
// without defining them; the importer checks they exist in the workspace.
type Batch struct {
	Account         *Account
	Plans           []Plan
	Lines           []Line
	Campaigns       []Campaign
	Studies         []Study
	Findings        []Finding
	PlanActuals     []PlanActual
	CampaignActuals []CampaignActual
	PlanRefs        map[uuid.UUID]string // id → field that names it
	CampaignRefs    map[uuid.UUID]string
}

// ParseDocument decodes a document strictly (unknown fields are errors).
func ParseDocument(b []byte) (Document, error) {
	var d Document
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&d); err != nil {
		return Document{}, fmt.Errorf("%w: the file is not a valid import document: %v", ErrInvalid, err)
	}
	return d, nil
}

// Resolve validates d for workspace ws and returns it as a Batch, or every problem
// found (field, rule, value, JSON pointer). It touches no store.
func (d Document) Resolve(ws uuid.UUID) (Batch, []problem.FieldError) {
	r := &resolver{ws: ws, seen: map[uuid.UUID]string{},
		b: Batch{PlanRefs: map[uuid.UUID]string{}, CampaignRefs: map[uuid.UUID]string{}}}
	if d.Account != nil {
		r.account(*d.Account)
	}
	for i, p := range d.Plans {
		r.plan(fmt.Sprintf("plans[%d]", i), p)
	}
	for i, c := range d.Campaigns {
		r.campaign(fmt.Sprintf("campaigns[%d]", i), c)
	}
	for i, s := range d.Studies {
		r.study(fmt.Sprintf("studies[%d]", i), s)
	}
	for _, p := range r.b.Plans {
		delete(r.b.PlanRefs, p.ID)
	}
	for _, c := range r.b.Campaigns {
		delete(r.b.CampaignRefs, c.ID)
	}
	return r.b, r.errs
}

type resolver struct {
	ws   uuid.UUID
	b    Batch
	errs []problem.FieldError
	seen map[uuid.UUID]string // ids defined so far → field
}

// fail records a broken rule of field (a dotted path such as plans[0].lines[1].budget).
func (r *resolver) fail(field, rule string, value any) {
	r.errs = append(r.errs, problem.FieldError{Field: field, Rule: rule, Value: value, Pointer: Pointer(field)})
}

// Pointer turns a dotted field path ("rows[3].date") into a JSON Pointer ("/rows/3/date").
func Pointer(field string) string {
	s := strings.NewReplacer("[", "/", "]", "", ".", "/").Replace(field)
	return "/" + s
}

func (r *resolver) required(field, v string) {
	if strings.TrimSpace(v) == "" {
		r.fail(field, "required", v)
	}
}

func (r *resolver) oneOf(field, v string, allowed []string) {
	if !slices.Contains(allowed, v) {
		r.fail(field, "one_of", v)
	}
}

func (r *resolver) currency(field, v string) {
	if !ValidCurrency(v) {
		r.fail(field, "currency", v)
	}
}

func (r *resolver) money(field string, d decimal.Decimal) {
	if !ValidMoney(d) {
		r.fail(field, "money", d.String())
	}
}

// date parses a YYYY-MM-DD day.
func (r *resolver) date(field, v string) time.Time {
	t, err := ParseDay(v)
	if err != nil {
		r.fail(field, "date", v)
	}
	return t
}

// DayRule is what a day of ParseDay must be, as errors say it.
const DayRule = "a day YYYY-MM-DD between 1970-01-02 and 2105-12-31"

// ParseDay parses a YYYY-MM-DD day within the range of a ClickHouse Date.
func ParseDay(v string) (time.Time, error) {
	t, err := time.Parse(time.DateOnly, v)
	if err != nil || !ValidDay(t) {
		return time.Time{}, fmt.Errorf("%q is not %s", v, DayRule)
	}
	return t, nil
}

func (r *resolver) period(field, startF, endF, start, end string) (time.Time, time.Time) {
	s, e := r.date(field+"."+startF, start), r.date(field+"."+endF, end)
	if !s.IsZero() && !e.IsZero() && e.Before(s) {
		r.fail(field+"."+endF, "not_before_start", end)
	}
	return s, e
}

// id parses an optional id of kind p, or derives one from parent and name.
func (r *resolver) id(field string, p ids.Prefix, raw string, parent uuid.UUID, name string) uuid.UUID {
	var id uuid.UUID
	if raw == "" {
		id = DerivedID(p, parent, name)
	} else {
		var err error
		if id, err = ids.Parse(p, raw); err != nil {
			r.fail(field, "id", raw)
			return uuid.Nil
		}
	}
	if prev, dup := r.seen[id]; dup {
		r.fail(field, "unique", fmt.Sprintf("%s (also %s)", ids.Format(p, id), prev))
	}
	r.seen[id] = field
	return id
}

// DerivedID is the id an imported object without one gets: a name-based (SHA-1) UUID of
// its kind and name under its parent (the workspace; the plan for a line; the study for
// a finding, named by its metric).
func DerivedID(p ids.Prefix, parent uuid.UUID, name string) uuid.UUID {
	return uuid.NewSHA1(parent, []byte(string(p)+name))
}

// ref parses an optional reference of kind p (uuid.Nil when empty).
func (r *resolver) ref(field string, p ids.Prefix, raw string) uuid.UUID {
	if raw == "" {
		return uuid.Nil
	}
	id, err := ids.Parse(p, raw)
	if err != nil {
		r.fail(field, "id", raw)
	}
	return id
}

func (r *resolver) channels(field string, cs []string) {
	for i, c := range cs {
		r.oneOf(fmt.Sprintf("%s[%d]", field, i), c, Channels)
	}
}

func (r *resolver) account(a AccountDoc) {
	r.required("account.name", a.Name)
	r.currency("account.currency", a.Currency)
	if a.Country != "" && (len(a.Country) != 2 || strings.ToUpper(a.Country) != a.Country) {
		r.fail("account.country", "country", a.Country)
	}
	if a.Timezone != "" {
		if _, err := time.LoadLocation(a.Timezone); err != nil {
			r.fail("account.timezone", "timezone", a.Timezone)
		}
	}
	r.b.Account = &Account{WorkspaceID: r.ws, Name: a.Name, LegalName: a.LegalName, Country: a.Country,
		Currency: a.Currency, Timezone: a.Timezone, Industry: a.Industry}
}

func (r *resolver) plan(f string, p PlanDoc) {
	id := r.id(f+".id", ids.Plan, p.ID, r.ws, p.Name)
	r.required(f+".name", p.Name)
	r.oneOf(f+".objective", p.Objective, Objectives)
	r.oneOf(f+".status", p.Status, PlanStatuses)
	s, e := r.period(f, "start_date", "end_date", p.StartDate, p.EndDate)
	r.money(f+".budget", p.Budget)
	r.currency(f+".currency", p.Currency)
	r.channels(f+".channels", p.Channels)
	r.b.Plans = append(r.b.Plans, Plan{ID: id, Name: p.Name, Advertiser: p.Advertiser, Objective: p.Objective,
		Status: p.Status, StartDate: s, EndDate: e, Budget: p.Budget, Currency: p.Currency, Channels: p.Channels, Owner: p.Owner})
	for i, l := range p.Lines {
		if l.Currency == "" {
			l.Currency = p.Currency
		}
		r.line(fmt.Sprintf("%s.lines[%d]", f, i), id, l)
	}
}

func (r *resolver) line(f string, plan uuid.UUID, l LineDoc) {
	id := r.id(f+".id", ids.Line, l.ID, plan, l.Name)
	r.required(f+".name", l.Name)
	r.oneOf(f+".channel", l.Channel, Channels)
	r.oneOf(f+".buy_type", l.BuyType, BuyTypes)
	r.oneOf(f+".status", l.Status, LineStatuses)
	r.money(f+".unit_cost", l.UnitCost)
	r.money(f+".budget", l.Budget)
	r.currency(f+".currency", l.Currency)
	s, e := r.period(f, "start_date", "end_date", l.StartDate, l.EndDate)
	r.b.Lines = append(r.b.Lines, Line{ID: id, PlanID: plan, Name: l.Name, Channel: l.Channel, Publisher: l.Publisher,
		BuyType: l.BuyType, UnitCost: l.UnitCost, StartDate: s, EndDate: e, Budget: l.Budget, Currency: l.Currency,
		PlannedImpressions: l.PlannedImpressions, Status: l.Status})
	for i, a := range l.Actuals {
		day, m := r.day(fmt.Sprintf("%s.actuals[%d]", f, i), a, l.Currency)
		r.b.PlanActuals = append(r.b.PlanActuals, PlanActual{PlanID: plan, LineID: id, Date: day, Metrics: m, Source: "import"})
	}
}

func (r *resolver) day(f string, a DayDoc, currency string) (time.Time, Metrics) {
	day := r.date(f+".date", a.Date)
	r.money(f+".spend", a.Spend)
	return day, Metrics{Impressions: a.Impressions, Clicks: a.Clicks, Spend: a.Spend, Currency: currency, Conversions: a.Conversions}
}

func (r *resolver) campaign(f string, c CampaignDoc) {
	id := r.id(f+".id", ids.Campaign, c.ID, r.ws, c.Name)
	plan := r.ref(f+".plan_id", ids.Plan, c.PlanID)
	if plan != uuid.Nil {
		r.b.PlanRefs[plan] = f + ".plan_id"
	}
	r.required(f+".name", c.Name)
	r.oneOf(f+".objective", c.Objective, Objectives)
	r.oneOf(f+".status", c.Status, CampaignStatuses)
	r.channels(f+".channels", c.Channels)
	s, e := r.period(f, "start_date", "end_date", c.StartDate, c.EndDate)
	r.money(f+".budget", c.Budget)
	r.currency(f+".currency", c.Currency)
	r.b.Campaigns = append(r.b.Campaigns, Campaign{ID: id, PlanID: plan, Name: c.Name, Objective: c.Objective,
		Status: c.Status, Channels: c.Channels, StartDate: s, EndDate: e, Budget: c.Budget, Currency: c.Currency})
	for i, a := range c.Actuals {
		day, m := r.day(fmt.Sprintf("%s.actuals[%d]", f, i), a, c.Currency)
		r.b.CampaignActuals = append(r.b.CampaignActuals, CampaignActual{CampaignID: id, Date: day, Metrics: m, Source: "import"})
	}
}

func (r *resolver) study(f string, s StudyDoc) {
	id := r.id(f+".id", ids.Study, s.ID, r.ws, s.Name)
	cmp := r.ref(f+".campaign_id", ids.Campaign, s.CampaignID)
	if cmp != uuid.Nil {
		r.b.CampaignRefs[cmp] = f + ".campaign_id"
	}
	r.required(f+".name", s.Name)
	r.oneOf(f+".kind", s.Kind, StudyKinds)
	r.oneOf(f+".status", s.Status, StudyStatuses)
	ps, pe := r.period(f, "period_start", "period_end", s.PeriodStart, s.PeriodEnd)
	r.b.Studies = append(r.b.Studies, Study{ID: id, CampaignID: cmp, Name: s.Name, Kind: s.Kind, Status: s.Status,
		PeriodStart: ps, PeriodEnd: pe, Methodology: s.Methodology})
	for i, fd := range s.Findings {
		r.finding(fmt.Sprintf("%s.findings[%d]", f, i), id, fd)
	}
}

func (r *resolver) finding(f string, study uuid.UUID, d FindingDoc) {
	id := r.id(f+".id", ids.Finding, d.ID, study, d.Metric)
	r.required(f+".metric", d.Metric)
	r.oneOf(f+".unit", d.Unit, Units)
	if d.Confidence < 0 || d.Confidence > 1 {
		r.fail(f+".confidence", "range_0_1", d.Confidence)
	}
	if d.CILower > d.CIUpper {
		r.fail(f+".ci_lower", "not_above_ci_upper", d.CILower)
	}
	r.b.Findings = append(r.b.Findings, Finding{ID: id, StudyID: study, Metric: d.Metric, Value: d.Value, Unit: d.Unit,
		Confidence: d.Confidence, CILower: d.CILower, CIUpper: d.CIUpper, Summary: d.Summary})
}
