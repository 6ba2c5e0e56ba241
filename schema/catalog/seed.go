package catalog

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/google/uuid"
	"github.com/shopspring/decimal"

	"svc/lib/ids"
)

// Showroom ids are fixed: the same on every run and every machine, so sandbox keys,
// docs and tests can name them.
var (
	ShowroomWorkspace = uuid.NewSHA1(uuid.NameSpaceURL, []byte("svc:showroom:workspace"))
	ShowroomPixel     = uuid.NewSHA1(ShowroomWorkspace, []byte("pixel:website"))
)

// ShowroomName is the showroom workspace's name.
const ShowroomName = "Showroom: Northwind Outdoor"

// showroomCutoff is the last day with actuals in the showroom (fixed, so the seed
// writes the same rows every run).
var showroomCutoff = time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC)

// ShowroomDocument returns the showroom's catalog: an outdoor-gear retailer with three
// plans (spring, summer, holiday), their line items and delivered days, three
// campaigns, and studies with findings. It is the same document on every call: values
// come from a fixed-seed generator, dates are fixed.
func ShowroomDocument() Document {
	rng := rand.New(rand.NewPCG(2026, 11))
	d := Document{Account: &AccountDoc{Name: "Northwind Outdoor", LegalName: "Northwind Outdoor GmbH", Country: "DE",
		Currency: "EUR", Timezone: "Europe/Berlin", Industry: "Retail: outdoor equipment"}}
	for _, p := range []struct{ name, objective, status, start, end, budget string }{
		{"Spring Launch 2026", "awareness", "completed", "2026-03-01", "2026-05-31", "180000"},
		{"Summer Sale 2026", "conversion", "completed", "2026-06-01", "2026-08-31", "240000"},
		{"Holiday Season 2026", "conversion", "live", "2026-11-01", "2026-12-31", "320000"},
	} {
		d.Plans = append(d.Plans, showroomPlan(rng, p.name, p.objective, p.status, p.start, p.end, p.budget))
	}
	for i, p := range d.Plans {
		c := CampaignDoc{PlanID: idOf(d, i), Name: p.Name + " – always on", Objective: p.Objective,
			Status: map[string]string{"completed": "completed", "live": "active"}[p.Status], Channels: p.Channels,
			StartDate: p.StartDate, EndDate: p.EndDate, Budget: p.Budget.Mul(decimal.RequireFromString("0.6")), Currency: "EUR"}
		c.Actuals = days(rng, p.StartDate, p.EndDate, 40000)
		d.Campaigns = append(d.Campaigns, c)
	}
	d.Studies = showroomStudies()
	return d
}

// idOf returns the id plan i of d gets (it has no explicit id, so a derived one).
func idOf(d Document, i int) string {
	return DerivedID(ids.Plan, ShowroomWorkspace, d.Plans[i].Name).String()
}

var showroomLines = []struct{ channel, publisher, buy, cost, share string }{
	{"search", "Google Ads", "cpc", "0.85", "0.30"},
	{"social", "Meta", "cpm", "6.40", "0.25"},
	{"video", "YouTube", "cpv", "0.04", "0.20"},
	{"display", "Google Display & Video 360", "cpm", "3.10", "0.15"},
	{"audio", "Spotify", "cpm", "12.00", "0.10"},
}

func showroomPlan(rng *rand.Rand, name, objective, status, start, end, budget string) PlanDoc {
	b := decimal.RequireFromString(budget)
	p := PlanDoc{Name: name, Advertiser: "Northwind Outdoor", Objective: objective, Status: status,
		StartDate: start, EndDate: end, Budget: b, Currency: "EUR", Owner: "Mara Jensen (media planning)"}
	lineStatus := map[string]string{"completed": "completed", "live": "live"}[status]
	for _, l := range showroomLines {
		p.Channels = append(p.Channels, l.channel)
		lb := b.Mul(decimal.RequireFromString(l.share))
		cost := decimal.RequireFromString(l.cost)
		ld := LineDoc{Name: fmt.Sprintf("%s – %s", l.publisher, l.channel), Channel: l.channel, Publisher: l.publisher,
			BuyType: l.buy, UnitCost: cost, StartDate: start, EndDate: end, Budget: lb, Status: lineStatus}
		if l.buy == "cpm" {
			ld.PlannedImpressions = uint64(lb.Div(cost).Mul(decimal.NewFromInt(1000)).IntPart())
		}
		ld.Actuals = days(rng, start, end, 8000)
		p.Lines = append(p.Lines, ld)
	}
	return p
}

// days returns delivered days from start to min(end, showroomCutoff) around base
// impressions a day.
func days(rng *rand.Rand, start, end string, base int) []DayDoc {
	s, _ := time.Parse(time.DateOnly, start)
	e, _ := time.Parse(time.DateOnly, end)
	if e.After(showroomCutoff) {
		e = showroomCutoff
	}
	var out []DayDoc
	for d := s; !d.After(e); d = d.AddDate(0, 0, 1) {
		imp := uint64(base/2 + rng.IntN(base))
		clicks := imp * uint64(5+rng.IntN(20)) / 1000
		spend := decimal.New(int64(imp)*int64(300+rng.IntN(900))/1000, -2) // cents
		out = append(out, DayDoc{Date: d.Format(time.DateOnly), Impressions: imp, Clicks: clicks, Spend: spend,
			Conversions: clicks * uint64(1+rng.IntN(6)) / 100})
	}
	return out
}

func showroomStudies() []StudyDoc {
	cmp := func(plan string) string {
		return DerivedID(ids.Campaign, ShowroomWorkspace, plan+" – always on").String()
	}
	return []StudyDoc{
		{CampaignID: cmp("Spring Launch 2026"), Name: "Spring brand lift (YouTube, Meta)", Kind: "brand_lift", Status: "completed",
			PeriodStart: "2026-03-01", PeriodEnd: "2026-04-30", Methodology: "Exposed vs. control survey, 4,200 respondents",
			Findings: []FindingDoc{
				{Metric: "ad_recall_lift", Value: 8.4, Unit: "points", Confidence: 0.95, CILower: 5.9, CIUpper: 10.9,
					Summary: "Ad recall rose 8.4 points among exposed adults 25–44."},
				{Metric: "brand_awareness_lift", Value: 3.1, Unit: "points", Confidence: 0.9, CILower: 0.8, CIUpper: 5.4,
					Summary: "Aided awareness rose 3.1 points."},
			}},
		{CampaignID: cmp("Summer Sale 2026"), Name: "Summer conversion lift", Kind: "conversion_lift", Status: "completed",
			PeriodStart: "2026-06-01", PeriodEnd: "2026-08-31", Methodology: "Randomised holdout of 10% of the audience",
			Findings: []FindingDoc{
				{Metric: "incremental_conversions", Value: 1840, Unit: "count", Confidence: 0.95, CILower: 1510, CIUpper: 2170,
					Summary: "About 1,840 purchases would not have happened without the campaign."},
				{Metric: "incremental_roas", Value: 3.2, Unit: "ratio", Confidence: 0.95, CILower: 2.6, CIUpper: 3.8,
					Summary: "Each euro returned 3.20 euros of incremental revenue."},
			}},
		{Name: "2026 marketing-mix model", Kind: "mmm", Status: "running", PeriodStart: "2026-01-01", PeriodEnd: "2026-12-31",
			Methodology: "Bayesian MMM on weekly sales, 3 years of history",
			Findings: []FindingDoc{
				{Metric: "search_contribution", Value: 21.5, Unit: "percent", Confidence: 0.8, CILower: 17.0, CIUpper: 26.0,
					Summary: "Paid search drives about a fifth of online sales (interim)."},
			}},
	}
}
