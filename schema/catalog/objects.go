package catalog

import (
	"time"

	"github.com/google/uuid"
	"github.com/shopspring/decimal"
)

// Account is the organisation behind a workspace; its public id is org_<workspace id>.
type Account struct {
	WorkspaceID uuid.UUID
	Name        string // trading name
	LegalName   string
	Country     string // ISO 3166-1 alpha-2, e.g. "DE"
	Currency    string // reporting currency, ISO 4217
	Timezone    string // IANA zone, e.g. "Europe/Berlin"
	Industry    string
	CreatedAt   time.Time
	UpdatedAt   time.Time
}

// Plan is a media plan: a budget over a flight (start to end day) across channels.
type Plan struct {
	ID         uuid.UUID
	Name       string
	Advertiser string // the brand the plan is for
	Objective  string // one of Objectives
	Status     string // one of PlanStatuses
	StartDate  time.Time
	EndDate    time.Time // inclusive
	Budget     decimal.Decimal
	Currency   string
	Channels   []string // each one of Channels
	Owner      string   // the planner responsible
	CreatedAt  time.Time
	UpdatedAt  time.Time
}

// Line is a line item of a plan: one channel, one publisher, one way of buying.
type Line struct {
	ID                 uuid.UUID
	PlanID             uuid.UUID
	Name               string
	Channel            string // one of Channels
	Publisher          string // e.g. "Google Ads", "Meta", "Spotify"
	BuyType            string // one of BuyTypes
	UnitCost           decimal.Decimal
	StartDate          time.Time
	EndDate            time.Time
	Budget             decimal.Decimal
	Currency           string
	PlannedImpressions uint64
	Status             string // one of LineStatuses
	CreatedAt          time.Time
	UpdatedAt          time.Time
}

// Campaign is what runs in market, optionally executing a plan (PlanID, or uuid.Nil).
type Campaign struct {
	ID        uuid.UUID
	PlanID    uuid.UUID
	Name      string
	Objective string
	Status    string // one of CampaignStatuses
	Channels  []string
	StartDate time.Time
	EndDate   time.Time
	Budget    decimal.Decimal
	Currency  string
	CreatedAt time.Time
	UpdatedAt time.Time
}

// Study is a measurement study of a period, optionally about one campaign.
type Study struct {
	ID          uuid.UUID
	CampaignID  uuid.UUID // uuid.Nil when the study is not about one campaign
	Name        string
	Kind        string // one of StudyKinds
	Status      string // one of StudyStatuses
	PeriodStart time.Time
	PeriodEnd   time.Time
	Methodology string
	CreatedAt   time.Time
	UpdatedAt   time.Time
}

// Finding is one result of a study: a metric's value with its confidence.
type Finding struct {
	ID         uuid.UUID
	StudyID    uuid.UUID
	Metric     string  // e.g. "ad_recall_lift", "incremental_conversions", "roas"
	Value      float64 // in Unit
	Unit       string  // one of Units
	Confidence float64 // 0..1, e.g. 0.95
	CILower    float64 // confidence interval, in Unit
	CIUpper    float64
	Summary    string
	CreatedAt  time.Time
	UpdatedAt  time.Time
}

// Allowed values of the enumerated fields.
var (
	Objectives       = []string{"awareness", "consideration", "conversion", "retention"}
	PlanStatuses     = []string{"draft", "approved", "live", "completed", "cancelled"}
	LineStatuses     = []string{"planned", "booked", "live", "completed", "cancelled"}
	CampaignStatuses = []string{"draft", "scheduled", "active", "paused", "completed"}
	StudyStatuses    = []string{"planned", "running", "completed"}
	StudyKinds       = []string{"brand_lift", "conversion_lift", "geo_experiment", "mmm", "attribution", "survey"}
	Channels         = []string{"search", "social", "display", "video", "ctv", "audio", "ooh", "print", "email", "affiliate", "retail_media"}
	BuyTypes         = []string{"cpm", "cpc", "cpa", "cpv", "flat"}
	Units            = []string{"percent", "points", "ratio", "count", "currency"}
)
