package webhooks

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	json "github.com/goccy/go-json"
	"github.com/google/uuid"
	"github.com/shopspring/decimal"

	"svc/lib/ids"
	"svc/lib/problem"
	"svc/schema/catalog"
)

// ActualsRow is one campaign's delivered performance on one day, as an inbound message
// states it. Upsert key: workspace, campaign, date; restating a day overwrites it.
type ActualsRow struct {
	CampaignID  uuid.UUID
	Date        time.Time // 00:00 UTC
	Currency    string    // ISO 4217, upper case (required: spend is in it)
	Impressions uint64
	Clicks      uint64
	Conversions uint64
	Spend       decimal.Decimal // ≥ 0, at most 4 decimal places
}

// ActualsStore writes campaign actuals through the read API's catalog package (one
// table, one upsert: catalog.UpsertCampaignActuals).
type ActualsStore struct{ conn driver.Conn }

// NewActualsStore returns an ActualsStore over conn.
func NewActualsStore(conn driver.Conn) *ActualsStore { return &ActualsStore{conn: conn} }

// UpsertActuals implements ActualsWriter. Every campaign of rows must be one of ws's
// (catalog.CampaignsExisting), as POST /imports/actuals requires its lines to be: rows
// of an unknown campaign, or another workspace's, are refused (ErrInvalid), not stored
// where nothing reads them.
func (a *ActualsStore) UpsertActuals(ctx context.Context, ws uuid.UUID, rows []ActualsRow) error {
	var campaigns []uuid.UUID
	for _, r := range rows {
		if !slices.Contains(campaigns, r.CampaignID) {
			campaigns = append(campaigns, r.CampaignID)
		}
	}
	existing, err := catalog.CampaignsExisting(ctx, a.conn, ws, campaigns)
	if err != nil {
		return err
	}
	for _, c := range campaigns {
		if !existing[c] {
			return fmt.Errorf("%w: %s is not a campaign of the workspace", catalog.ErrInvalid, ids.Format(ids.Campaign, c))
		}
	}
	out := make([]catalog.CampaignActual, len(rows))
	for i, r := range rows {
		out[i] = catalog.CampaignActual{CampaignID: r.CampaignID, Date: r.Date, Source: "webhook",
			Metrics: catalog.Metrics{Impressions: r.Impressions, Clicks: r.Clicks, Spend: r.Spend,
				Currency: r.Currency, Conversions: r.Conversions}}
	}
	return catalog.UpsertCampaignActuals(ctx, a.conn, ws, out)
}

// ActualsWriter upserts campaign actuals (the read API's campaign_actuals table). An
// error wrapping catalog.ErrInvalid means the rows were refused (nothing written);
// any other error means the store failed and the message can be retried.
type ActualsWriter interface {
	UpsertActuals(ctx context.Context, workspace uuid.UUID, rows []ActualsRow) error
}

// MaxActualsRows bounds the rows of one inbound message (as POST /imports/actuals).
const MaxActualsRows = 500

// The JSON shapes (README.md documents them).
type (
	metricsJSON struct {
		Impressions *number `json:"impressions"`
		Clicks      *number `json:"clicks"`
		Conversions *number `json:"conversions"`
		Spend       *number `json:"spend"`
	}
	dayJSON struct {
		Date *string `json:"date"`
		metricsJSON
	}
	reportedJSON struct {
		CampaignID *string   `json:"campaign_id"`
		Currency   *string   `json:"currency"`
		Days       []dayJSON `json:"days"`
	}
	rowJSON struct {
		CampaignID *string `json:"campaign_id"`
		Date       *string `json:"date"`
		Currency   *string `json:"currency"`
		metricsJSON
	}
	campaignActualsJSON struct {
		Rows []rowJSON `json:"rows"`
	}
)

// number is a JSON number, or a string holding one (money is often sent as "12.50").
type number string

func (n *number) UnmarshalJSON(b []byte) error {
	if len(b) >= 2 && b[0] == '"' && b[len(b)-1] == '"' {
		b = b[1 : len(b)-1]
	}
	*n = number(b)
	return nil
}

func (n *number) String() string { return string(*n) }

var currencyRE = regexp.MustCompile(`^[A-Z]{3}$`)

// fieldErrs collects errors[] entries.
type fieldErrs []problem.FieldError

func (e *fieldErrs) add(ptr, rule string, v any) {
	if len(*e) < 50 {
		*e = append(*e, problem.FieldError{Field: ptrField(ptr), Rule: rule, Value: v, Pointer: ptr})
	}
}

// ptrField turns "/data/days/0/date" into "data.days[0].date".
func ptrField(ptr string) string {
	out := make([]byte, 0, len(ptr))
	seg := ""
	flush := func() {
		if seg == "" {
			return
		}
		if seg[0] >= '0' && seg[0] <= '9' {
			out = append(out, '[')
			out = append(out, seg...)
			out = append(out, ']')
		} else {
			if len(out) > 0 {
				out = append(out, '.')
			}
			out = append(out, seg...)
		}
		seg = ""
	}
	for i := 0; i < len(ptr); i++ {
		if ptr[i] == '/' {
			flush()
			continue
		}
		seg += string(ptr[i])
	}
	flush()
	return string(out)
}

func parseActuals(typ string, data json.RawMessage) ([]ActualsRow, []problem.FieldError) {
	var errs fieldErrs
	if len(data) == 0 || string(data) == "null" {
		errs.add("/data", "required", nil)
		return nil, errs
	}
	var rows []ActualsRow
	switch typ {
	case TypeActualsReported:
		var d reportedJSON
		if err := json.Unmarshal(data, &d); err != nil {
			errs.add("/data", "type", "want an object {campaign_id, currency, days: [...]}")
			return nil, errs
		}
		cmp, ok := parseCampaign(d.CampaignID, "/data/campaign_id", &errs)
		cur := parseCurrency(d.Currency, "/data/currency", &errs)
		if len(d.Days) == 0 {
			errs.add("/data/days", "required", nil)
		}
		if len(d.Days) > MaxActualsRows {
			errs.add("/data/days", "max_items", len(d.Days))
			return nil, errs
		}
		for i, day := range d.Days {
			p := fmt.Sprintf("/data/days/%d", i)
			r := ActualsRow{CampaignID: cmp, Currency: cur}
			r.Date = parseDate(day.Date, p+"/date", &errs)
			parseMetrics(&r, day.metricsJSON, p, &errs)
			if ok {
				rows = append(rows, r)
			}
		}
	case TypeCampaignActuals:
		var d campaignActualsJSON
		if err := json.Unmarshal(data, &d); err != nil {
			errs.add("/data", "type", "want an object {rows: [...]}")
			return nil, errs
		}
		if len(d.Rows) == 0 {
			errs.add("/data/rows", "required", nil)
		}
		if len(d.Rows) > MaxActualsRows {
			errs.add("/data/rows", "max_items", len(d.Rows))
			return nil, errs
		}
		for i, row := range d.Rows {
			p := fmt.Sprintf("/data/rows/%d", i)
			cmp, _ := parseCampaign(row.CampaignID, p+"/campaign_id", &errs)
			r := ActualsRow{CampaignID: cmp, Currency: parseCurrency(row.Currency, p+"/currency", &errs)}
			r.Date = parseDate(row.Date, p+"/date", &errs)
			parseMetrics(&r, row.metricsJSON, p, &errs)
			rows = append(rows, r)
		}
	}
	seen := map[string]int{}
	for i, r := range rows {
		k := r.CampaignID.String() + r.Date.Format("2006-01-02")
		if j, dup := seen[k]; dup && !r.Date.IsZero() {
			ptr := fmt.Sprintf("/data/days/%d/date", i)
			if typ == TypeCampaignActuals {
				ptr = fmt.Sprintf("/data/rows/%d/date", i)
			}
			errs.add(ptr, "unique", fmt.Sprintf("same campaign and date as entry %d", j))
		}
		seen[k] = i
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return rows, nil
}

func parseCampaign(s *string, ptr string, errs *fieldErrs) (uuid.UUID, bool) {
	if s == nil || *s == "" {
		errs.add(ptr, "required", nil)
		return uuid.Nil, false
	}
	id, err := ids.Parse(ids.Campaign, *s)
	if err != nil {
		errs.add(ptr, "format", truncate(*s))
		return uuid.Nil, false
	}
	return id, true
}

func parseCurrency(s *string, ptr string, errs *fieldErrs) string {
	if s == nil || *s == "" {
		errs.add(ptr, "required", nil)
		return ""
	}
	if !currencyRE.MatchString(*s) {
		errs.add(ptr, "iso4217", truncate(*s))
		return ""
	}
	return *s
}

// earliestDate bounds the dates accepted; the latest is tomorrow (UTC) for partners
// ahead of UTC.
var earliestDate = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

func parseDate(s *string, ptr string, errs *fieldErrs) time.Time {
	if s == nil || *s == "" {
		errs.add(ptr, "required", nil)
		return time.Time{}
	}
	d, err := time.Parse("2006-01-02", *s)
	if err != nil {
		errs.add(ptr, "date", truncate(*s))
		return time.Time{}
	}
	if tomorrow := time.Now().UTC().Truncate(24*time.Hour).AddDate(0, 0, 1); d.Before(earliestDate) || d.After(tomorrow) {
		errs.add(ptr, "range", *s)
		return time.Time{}
	}
	return d
}

var maxCount = decimal.NewFromInt(1 << 53)
var maxMoney = decimal.RequireFromString("100000000000000") // below Decimal(18,4)'s 10^14

// plainNumber matches what the decimal parser is given: no exponent (1e999999999
// would make it build a huge integer), at most 32 characters.
var plainNumber = regexp.MustCompile(`^-?[0-9]{1,20}(\.[0-9]{1,10})?$`)

func parseDecimal(s string) (decimal.Decimal, error) {
	if !plainNumber.MatchString(s) {
		return decimal.Zero, fmt.Errorf("not a plain decimal")
	}
	return decimal.NewFromString(s)
}

func parseMetrics(r *ActualsRow, m metricsJSON, p string, errs *fieldErrs) {
	count := func(n *number, name string) uint64 {
		if n == nil {
			return 0
		}
		d, err := parseDecimal(n.String())
		if err != nil || !d.IsInteger() || d.IsNegative() || d.GreaterThan(maxCount) {
			errs.add(p+"/"+name, "non_negative_integer", truncate(n.String()))
			return 0
		}
		return uint64(d.IntPart())
	}
	money := func(n *number, name string) decimal.Decimal {
		if n == nil {
			return decimal.Zero
		}
		d, err := parseDecimal(n.String())
		if err != nil || d.IsNegative() || d.GreaterThanOrEqual(maxMoney) || !d.Equal(d.Round(4)) {
			errs.add(p+"/"+name, "non_negative_decimal_4dp", truncate(n.String()))
			return decimal.Zero
		}
		return d
	}
	r.Impressions = count(m.Impressions, "impressions")
	r.Clicks = count(m.Clicks, "clicks")
	r.Conversions = count(m.Conversions, "conversions")
	r.Spend = money(m.Spend, "spend")
}

func truncate(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}
