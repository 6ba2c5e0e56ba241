package app

import (
	"context"
	"fmt"
	"strconv"
	"time"

	json "github.com/goccy/go-json"
	"github.com/google/uuid"

	"svc/lib/ids"
	"svc/lib/problem"
	"svc/schema/rejection"
	"svc/schema/trace"
	"svc/schema/workspace"
)

// The live view of a pixel reads what the consumers already store (trace.Live: the
// events and rejections tables past a cursor); the ingest path does nothing for it.
const (
	// livePoll is how often live.js asks for what arrived.
	livePoll = 2 * time.Second
	// liveLimit bounds the rows of each table one read lists: up to it per livePoll the
	// view is exhaustive (liveLimit/livePoll accepted events and as many rejections a
	// second); past it the read lists the newest and counts the others.
	liveLimit = 100
	// liveRows bounds the rows a page keeps (live.js drops the oldest past it).
	liveRows = 500
)

// liveRow is one row of the live table, as the page and its feed show it: the same
// cells for both, so live.js only copies text.
type liveRow struct {
	Outcome string   `json:"outcome"` // accepted, rejected
	Cells   []string `json:"cells"`
}

// liveColumns are the live table's headings, in the order of liveRow.Cells.
var liveColumns = []string{"Received (UTC)", "Stored after its 202", "Outcome", "Event", "Details", "Identity", "Request"}

func liveRowOf(x trace.LiveRow) liveRow {
	after := strconv.Itoa(max(0, int(x.StoredAt.Sub(x.ReceivedAt).Seconds()))) + " s"
	received := x.ReceivedAt.Format("15:04:05")
	if x.Accepted {
		details := "no value"
		if x.Value != "" {
			details = "value " + x.Value + " " + x.Currency
		}
		if x.Consent {
			details += ", measurement consent"
		} else {
			details += ", no measurement consent"
		}
		identity := "no email digest"
		if x.EmailDigest {
			identity = "email digest present"
		}
		return liveRow{Outcome: "accepted", Cells: []string{received, after, "accepted", x.EventName + " (#" + strconv.Itoa(x.Index) + ")",
			details, identity, x.RequestID}}
	}
	event := "the batch"
	if x.Index != rejection.Batch {
		event = "event #" + strconv.Itoa(x.Index)
	}
	details := "rule " + x.Rule
	if x.Field != "" {
		details += " on " + x.Field
	}
	if x.Input != "" {
		details += " (received " + x.Input + ")"
	}
	return liveRow{Outcome: "rejected", Cells: []string{received, after, "rejected (" + strconv.Itoa(int(x.Status)) + ")", event,
		details, "—", x.RequestID}}
}

// liveFeed is what the page starts from and what each read of the feed answers.
type liveFeed struct {
	Cursor          string    `json:"cursor"`
	Rows            []liveRow `json:"rows"` // newest first
	Accepted        uint64    `json:"accepted"`
	Rejected        uint64    `json:"rejected"`
	SkippedAccepted uint64    `json:"skipped_accepted"`
	SkippedRejected uint64    `json:"skipped_rejected"`
	NotStored       uint64    `json:"not_stored"`
	Lag             string    `json:"lag"` // the pipeline's lag for the pixel, in words
	At              string    `json:"at"`  // when this read ran (UTC)
}

// liveData is the live page's.
type liveData struct {
	Pixel   pixelView
	Feed    liveFeed
	FeedURL string
	Columns []string
	Window  int // minutes a first read goes back
	Poll    int // seconds between reads
	Limit   int // rows of each table per read
	PerSec  int // Limit / Poll
	Rows    int // rows the page keeps
	Error   string
}

// livePage shows what arrived for the pixel in the last trace.LiveWindow, and loads
// live.js, which asks the feed for what arrives after.
func (a *App) livePage(c *call) error {
	p, err := a.pixelOf(c)
	if p == nil {
		return err
	}
	zone, err := a.Keys.TimeZone(c.Context(), *p)
	if err != nil {
		return err
	}
	id := ids.Format(ids.Pixel, p.ID)
	d := liveData{Pixel: pixelView{Pixel: *p, ID: id, Zone: zone}, FeedURL: "/app/pixels/" + id + "/live/feed", Columns: liveColumns,
		Window: int(trace.LiveWindow / time.Minute), Poll: int(livePoll / time.Second), Limit: liveLimit,
		PerSec: liveLimit / int(livePoll/time.Second), Rows: liveRows}
	status := 200
	d.Feed, err = a.readLive(c.Context(), c.ws, p.ID, trace.LiveCursor{})
	if err != nil {
		a.Log.Warn("live view: events unavailable", "request_id", c.ID, "err", err.Error())
		d.Error, status = "The stored events cannot be read right now; the view starts when ClickHouse answers again.", 503
	}
	return c.render(status, "live", "Live events: "+p.Name, "pixels", d)
}

// liveFeed answers what arrived after the query's cursor (JSON, for live.js).
func (a *App) liveFeed(c *call) error {
	p, err := a.pixelOf(c)
	if p == nil {
		return err
	}
	cur, err := trace.ParseLiveCursor(c.Query("cursor"))
	if err != nil {
		return c.problem(problem.Invalid("The cursor is not one this feed gave.", problem.QueryParam("cursor", "live_cursor", nil)))
	}
	feed, err := a.readLive(c.Context(), c.ws, p.ID, cur)
	if err != nil {
		a.Log.Warn("live feed: events unavailable", "request_id", c.ID, "err", err.Error())
		return c.problem(problem.Unavailable("the analytics store", int(livePoll/time.Second)))
	}
	return c.JSON(200, feed)
}

// readLive reads the feed of pixel after cur, and the pipeline's lag for it.
func (a *App) readLive(ctx context.Context, ws workspace.Workspace, pixel uuid.UUID, cur trace.LiveCursor) (liveFeed, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := a.rollups(ctx)
	if err != nil {
		return liveFeed{}, err
	}
	now := a.Now()
	pg, err := trace.Live(ctx, conn, trace.LiveQuery{Workspace: ws.ID, Sandbox: ws.Showroom, Pixel: pixel, Limit: liveLimit}, cur, now)
	if err != nil {
		return liveFeed{}, err
	}
	f := liveFeed{Cursor: pg.Cursor.String(), Rows: make([]liveRow, 0, len(pg.Rows)), Accepted: pg.Accepted, Rejected: pg.Rejected,
		SkippedAccepted: pg.SkippedAccepted, SkippedRejected: pg.SkippedRejected, NotStored: pg.NotStored,
		Lag: a.lagText(ctx, pixel, now), At: now.UTC().Format("15:04:05")}
	for _, x := range pg.Rows {
		f.Rows = append(f.Rows, liveRowOf(x))
	}
	return f, nil
}

// lagText says how far behind the pipeline is for pixel (trace.Lags, as GET /pixels/{id}).
func (a *App) lagText(ctx context.Context, pixel uuid.UUID, now time.Time) string {
	lags, err := trace.Lags(ctx, a.Keys.Redis(), a.Config.ClickHouse.Database, []uuid.UUID{pixel}, now)
	l, ok := lags[pixel]
	switch {
	case err != nil:
		return "unknown (the watermark cannot be read)"
	case !ok || l.Through.IsZero():
		return "unknown (the consumer has not published its watermark yet)"
	}
	return fmt.Sprintf("%.1f s (every event a 202 accepted before %s UTC is stored)", l.Seconds, l.Through.UTC().Format("15:04:05.000"))
}

// problem answers a feed's failure as an RFC 9457 problem document.
func (c *call) problem(p *problem.Problem) error {
	p.Finish(c.app.Config.PublicURL+"/developers", c.ID)
	b, err := json.Marshal(p)
	if err != nil {
		return err
	}
	if p.RetryAfter > 0 {
		c.Ctx.Response.Header.Set("Retry-After", strconv.Itoa(p.RetryAfter))
	}
	c.Raw(p.Status, "application/problem+json", b)
	return nil
}
