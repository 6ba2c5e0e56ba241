package app

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	json "github.com/goccy/go-json"
	"github.com/google/uuid"

	"svc/lib/ids"
	"svc/schema"
	"svc/schema/rollups"
	"svc/schema/workspace"
)

// pixelView is a pixel as the screens show it.
type pixelView struct {
	workspace.Pixel
	ID   string // pxl_…
	Zone workspace.Zone
}

type pixelsData struct {
	Pixels []pixelView
	Error  string
	Name   string
	Zone   string
}

func (a *App) pixelsPage(c *call) error { return a.renderPixels(c, 200, "", "", "") }

func (a *App) renderPixels(c *call, status int, errText, name, zone string) error {
	pxs, err := a.Keys.Pixels(c.Context(), c.ws.ID)
	if err != nil {
		return err
	}
	slices.SortFunc(pxs, func(x, y workspace.Pixel) int { return y.CreatedAt.Compare(x.CreatedAt) })
	d := pixelsData{Error: errText, Name: name, Zone: zone}
	for _, p := range pxs {
		d.Pixels = append(d.Pixels, pixelView{Pixel: p, ID: ids.Format(ids.Pixel, p.ID), Zone: workspace.EffectiveZone(c.ws, p.TimeZone)})
	}
	return c.render(status, "pixels", "Pixels", "pixels", d)
}

// createPixel creates a pixel of the session's workspace through the workspace store,
// as `svc admin pixel create` does.
func (a *App) createPixel(c *call) error {
	name, zone := strings.TrimSpace(c.form.Get("name")), strings.TrimSpace(c.form.Get("time_zone"))
	if name == "" || utf8.RuneCountInString(name) > 200 || !utf8.ValidString(name) || strings.ContainsFunc(name, unicode.IsControl) {
		return a.renderPixels(c, 422, "A pixel needs a name of at most 200 characters, without control characters.", strings.ToValidUTF8(name, ""), zone)
	}
	p, err := a.Keys.PutPixel(c.Context(), workspace.Pixel{ID: uuid.New(), WorkspaceID: c.ws.ID, Name: name, TimeZone: zone})
	if err != nil {
		return a.renderPixels(c, 422, "The time zone is not an IANA zone name such as Europe/Paris ("+err.Error()+").", name, zone)
	}
	if err := c.audit("pixel create", ids.Format(ids.Pixel, p.ID), "name="+name+" time_zone="+zone); err != nil {
		return err
	}
	c.SeeOther("/app/pixels/" + ids.Format(ids.Pixel, p.ID))
	return nil
}

// pixelOf is the pixel of the path's id in the session's workspace; nil (the 404 page
// answered) otherwise, as workspace.PixelOfKey's rule.
func (a *App) pixelOf(c *call) (*workspace.Pixel, error) {
	id, err := ids.Parse(ids.Pixel, c.Param("id"))
	if err != nil {
		return nil, c.notFound("pixel")
	}
	p, err := a.Keys.Pixel(c.Context(), id)
	if errors.Is(err, workspace.ErrNotFound) || err == nil && p.WorkspaceID != c.ws.ID {
		return nil, c.notFound("pixel")
	}
	if err != nil {
		return nil, err
	}
	return &p, nil
}

// pixelData is a pixel's page's: its rollups of the last Days days in its zone, as a
// table and as the chart's series.
type pixelData struct {
	Pixel  pixelView
	Days   int
	Rows   []rollups.DailyRow
	Events []string // the event names of the period
	Event  string   // the event name charted ("" for every one)
	Chart  string   // the chart's data (JSON): {"dates":[unix s…],"events":[…],"value":[…],"people":[…]|null,"currency":"EUR"}
	Error  string
	Health healthData // its last days, lag and newest rejections (health.go)
}

// pixelPage shows a pixel: its id, zone, and its daily rollups of the last 30 days in
// its zone (schema/rollups.QueryDaily, the read API's query), as a table and a chart.
func (a *App) pixelPage(c *call) error { return a.renderPixel(c, 200, "") }

func (a *App) renderPixel(c *call, status int, errText string) error {
	p, err := a.pixelOf(c)
	if p == nil {
		return err
	}
	zone, err := a.Keys.TimeZone(c.Context(), *p)
	if err != nil {
		return err
	}
	d := pixelData{Pixel: pixelView{Pixel: *p, ID: ids.Format(ids.Pixel, p.ID), Zone: zone}, Days: 30, Event: c.Query("event"), Error: errText}
	d.Rows, err = a.daily(c.Context(), c.ws, p.ID, zone.Name, d.Days)
	if err != nil {
		d.Error, status = rollupsUnread(err, zone.Name)
		if status == 503 {
			a.Log.Warn("pixel page: rollups unavailable", "request_id", c.ID, "err", err.Error())
		}
	}
	d.Events, d.Chart = chartOf(d.Rows, d.Event, d.Days, zone.Name, a.Now())
	d.Health = a.health(c.Context(), c.ws, p.ID, zone.Name)
	return c.render(status, "pixel", p.Name, "pixels", d)
}

// rollupsUnread is what the pixel page says, and answers, when its rollups could not be
// read in zone: 422 for a zone Go knows and the database does not (no wait mends it,
// another zone does; the read API answers it 422 too), else 503 until ClickHouse answers.
func rollupsUnread(err error, zone string) (string, int) {
	if schema.ZoneUnknownToServer(err) {
		return "The database does not know the time zone " + zone + ", so the rollups cannot be read in it: " +
			"choose another zone for this pixel (or its workspace).", 422
	}
	return "The rollups cannot be read right now; the table and chart are empty until ClickHouse answers again.", 503
}

// daily reads the pixel's rollup rows of the last days days of zone.
func (a *App) daily(ctx context.Context, ws workspace.Workspace, pixel uuid.UUID, zone string, days int) ([]rollups.DailyRow, error) {
	loc, err := schema.LoadZone(zone)
	if err != nil {
		return nil, err
	}
	now := a.Now().In(loc)
	to := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC)
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := a.rollups(ctx)
	if err != nil {
		return nil, err
	}
	return rollups.QueryDaily(ctx, conn, rollups.DailyQuery{Workspace: schema.UUID(ws.ID), Sandbox: ws.Showroom,
		Pixel: schema.UUID(pixel), TimeZone: zone, From: to.AddDate(0, 0, 1-days), To: to, Limit: 1000, Now: a.Now()})
}

// chartOf returns the event names of rows and the chart's data: per day of the
// period, the events and the value (of the most frequent currency) of event (every
// event name when ""), and the unique people of event when one is chosen (unique
// people of several event names do not add up).
func chartOf(rows []rollups.DailyRow, event string, days int, zone string, now time.Time) ([]string, string) {
	loc, _ := schema.LoadZone(zone)
	n := now.In(loc)
	first := time.Date(n.Year(), n.Month(), n.Day(), 0, 0, 0, 0, time.UTC).AddDate(0, 0, 1-days)
	dates := make([]int64, days)
	evs, vals, people := make([]float64, days), make([]float64, days), make([]float64, days)
	for i := range dates {
		dates[i] = first.AddDate(0, 0, i).Unix()
	}
	names, currencies := map[string]bool{}, map[string]uint64{}
	for _, r := range rows {
		names[r.EventName] = true
		if event == "" || r.EventName == event {
			currencies[r.Currency] += r.Events
		}
	}
	currency := ""
	for cur, n := range currencies {
		if n > currencies[currency] || currency == "" && cur != "" {
			currency = cur
		}
	}
	for _, r := range rows {
		i := int(r.Date.Sub(first).Hours() / 24)
		if i < 0 || i >= days || event != "" && r.EventName != event {
			continue
		}
		evs[i] += float64(r.Events)
		if r.Currency == currency {
			v, _ := strconv.ParseFloat(r.Value, 64)
			vals[i] += v
		}
		people[i] += float64(r.UniquePeople)
	}
	chart := map[string]any{"dates": dates, "events": evs, "value": vals, "currency": currency, "people": nil}
	if event != "" {
		chart["people"] = people
	}
	b, _ := json.Marshal(chart)
	out := make([]string, 0, len(names))
	for n := range names {
		out = append(out, n)
	}
	slices.Sort(out)
	return out, string(b)
}

// pixelZone sets the pixel's time zone ("" follows the workspace's).
func (a *App) pixelZone(c *call) error {
	p, err := a.pixelOf(c)
	if p == nil {
		return err
	}
	zone := strings.TrimSpace(c.form.Get("time_zone"))
	if _, err := a.Keys.SetPixelTimeZone(c.Context(), p.ID, zone); err != nil {
		return a.renderPixel(c, 422, "The time zone is not an IANA zone name such as Europe/Paris.")
	}
	if err := c.audit("pixel set-time-zone", ids.Format(ids.Pixel, p.ID), "time_zone="+zone); err != nil {
		return err
	}
	c.SeeOther("/app/pixels/" + ids.Format(ids.Pixel, p.ID))
	return nil
}
