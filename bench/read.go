package bench

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/url"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/shopspring/decimal"
	"github.com/valyala/fasthttp"

	"svc/lib/chpool"
	"svc/lib/ids"
	"svc/lib/settings"
	"svc/schema/catalog"
)

// readMain is `svc bench read`: a mix of GET /pixel-rollups over 90 days and GET
// /plans/{id}/actuals over 30 days of a plan with 500 line items, at a fixed arrival
// rate. It seeds its own workspace first: 90 days of events per pixel written into the
// service's events table (the rollup view aggregates them as it does the pipeline's
// inserts; rows carry kafka_topic "bench-seed", which the consumer's offset read-back
// ignores), and one plan with its lines and 30 days of actuals through schema/catalog.
func readMain(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("bench read", flag.ContinueOnError)
	var c common
	c.register(fs, 500, 30*time.Second)
	pixels := fs.Int("pixels", 4, "pixels seeded with rollups")
	rollupDays := fs.Int("rollup-days", 90, "days each GET /pixel-rollups spans (and days seeded)")
	lines := fs.Int("lines", 500, "line items of the seeded plan")
	actualDays := fs.Int("actuals-days", 30, "days each GET /plans/{id}/actuals spans (and days seeded)")
	mix := fs.Float64("rollups-share", 0.5, "share of requests that are GET /pixel-rollups (the rest GET /plans/{id}/actuals)")
	limit := fs.Int("limit", 100, "page size asked for (the API's default is 100, its maximum 1000)")
	variants := fs.Int("variants", 1, "distinct date windows per endpoint (the window ends 0..N-1 days earlier): 1 repeats identical requests, which a response cache serves; more defeats it")
	perDay := fs.Int("events-per-day", 0, "events per pixel and day, spread evenly over the UTC day (0: the standard seed, 30 events around noon)")
	zone := fs.String("time-zone", "", "time_zone of every GET /pixel-rollups (empty: the pixel's, UTC for the bench's pixels)")
	chHTTP := fs.String("clickhouse-http", envOr("BENCH_CLICKHOUSE_HTTP", "http://127.0.0.1:8123"), "ClickHouse HTTP interface (seeding events)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := c.validate(); err != nil {
		return err
	}
	if *pixels < 1 || *lines < 1 || *rollupDays < 1 || *actualDays < 1 || *mix < 0 || *mix > 1 {
		return errors.New("-pixels, -lines, -rollup-days, -actuals-days must be at least 1 and -rollups-share in 0..1")
	}
	r := settings.New()
	chCfg := chpool.ConfigFromEnv(r)
	if err := r.Err(); err != nil {
		return err
	}
	title := fmt.Sprintf("read: GET /pixel-rollups (%d days) %.0f%% and GET /plans/{id}/actuals (%d lines, %d days) %.0f%%, limit %d, %d distinct windows, %.0f req/s for %s",
		*rollupDays, 100**mix, *lines, *actualDays, 100*(1-*mix), *limit, *variants, c.rate, c.duration)
	rep := newReport("read", title, &c, args)
	for k, v := range map[string]any{"pixels": *pixels, "rollup_days": *rollupDays, "lines": *lines,
		"actuals_days": *actualDays, "rollups_share": *mix, "limit": *limit, "database": chCfg.Database, "variants": *variants,
		"time_zone": *zone} {
		rep.Params[k] = v
	}
	run := runID()
	fx, err := Provision(ctx, c.redis(), "bench-read-"+run, *pixels, 2, []string{"pixels:read", "plans:read"})
	if err != nil {
		return err
	}
	defer func() {
		if err := fx.Close(ctx); err != nil {
			fmt.Printf("cleanup: %v\n", err)
		}
	}()
	seedStart := time.Now()
	plan, err := seedRead(ctx, fx, chCfg, *chHTTP, *pixels, *rollupDays, *perDay, *lines, *actualDays)
	if err != nil {
		return fmt.Errorf("seed: %w", err)
	}
	rep.Notes = append(rep.Notes, fmt.Sprintf("seeded %d pixels × %d days of events and 1 plan × %d lines × %d days of actuals in %s",
		*pixels, *rollupDays, *lines, *actualDays, time.Since(seedStart).Round(time.Millisecond)))
	hc, err := hostClient(c.target, c.workers, c.timeout)
	if err != nil {
		return err
	}
	today := time.Now().UTC()
	var rollupURLs, actualsURLs []string
	for v := 0; v < max(1, *variants); v++ {
		end := today.AddDate(0, 0, -v)
		for _, p := range fx.PixelIDs {
			rollupURLs = append(rollupURLs, c.target+"/pixel-rollups?pixel_id="+p+"&from="+end.AddDate(0, 0, -(*rollupDays-1)).Format(time.DateOnly)+
				"&to="+end.Format(time.DateOnly)+"&limit="+strconv.Itoa(*limit)+zoneQuery(*zone))
		}
		actualsURLs = append(actualsURLs, c.target+"/plans/"+ids.Format(ids.Plan, plan)+"/actuals?from="+
			end.AddDate(0, 0, -(*actualDays-1)).Format(time.DateOnly)+"&to="+end.Format(time.DateOnly)+"&limit="+strconv.Itoa(*limit))
	}
	actualsURL := actualsURLs[0]
	// Check both endpoints once before the run: a missing route or seed fails here.
	for _, u := range []string{rollupURLs[0], actualsURL} {
		req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
		req.SetRequestURI(u)
		req.Header.Set("Authorization", "Bearer "+fx.Secrets[0])
		o := doHTTP(hc, req, resp, c.timeout)
		rows := len(jsonStrings(resp.Body(), "date"))
		fasthttp.ReleaseRequest(req)
		fasthttp.ReleaseResponse(resp)
		if !o.OK {
			return fmt.Errorf("GET %s: %s", u, ErrorKey(o))
		}
		rep.Notes = append(rep.Notes, fmt.Sprintf("GET %s returns %d rows on its first page", trimBase(u, c.target), rows))
	}
	type wstate struct {
		req  *fasthttp.Request
		resp *fasthttp.Response
	}
	states := make([]wstate, c.workers)
	for i := range states {
		states[i] = wstate{fasthttp.AcquireRequest(), fasthttp.AcquireResponse()}
	}
	auth := make([][]byte, len(fx.Secrets))
	for i, s := range fx.Secrets {
		auth[i] = []byte("Bearer " + s)
	}
	do := func(w int, i int64) Outcome {
		st := &states[w]
		kind := "plan-actuals"
		if unitHash(uint64(i)) < *mix {
			kind = "pixel-rollups"
			st.req.SetRequestURI(rollupURLs[int(uint64(i*7919)%uint64(len(rollupURLs)))])
		} else {
			st.req.SetRequestURI(actualsURLs[int(uint64(i*104729)%uint64(len(actualsURLs)))])
		}
		st.req.Header.SetBytesV("Authorization", auth[int(i%int64(len(auth)))])
		o := doHTTP(hc, st.req, st.resp, c.timeout)
		o.Kind = kind
		return o
	}
	noteRedis := watchRedisWork(ctx, fx.Redis())
	runLoad(ctx, &c, rep, do, nil)
	noteRedis(rep, 0)
	return finish(&c, rep)
}

// seedDay is one pixel-day of seed events: perDay of them spread over the day, or with
// perDay 0 every event name in every currency (and none) around noon.
func seedDay(day time.Time, perDay, d int) GenBatch {
	if perDay > 0 {
		return spreadDay(day, perDay, d)
	}
	var b GenBatch
	for n, name := range eventNames {
		for k, cur := range []string{"", "EUR", "USD"} {
			e := GenEvent{Name: name, OccurredAt: day.Add(12*time.Hour + time.Duration(n*3+k)*time.Minute), Consent: true,
				Email: "seed" + strconv.Itoa((d*7+n*3+k)%500) + "@example.com"}
			if cur != "" {
				e.Value, e.Currency = strconv.Itoa(10+n)+".50", cur
			}
			b.Events = append(b.Events, e)
		}
	}
	return b
}

// insertRows inserts JSONEachRow rows into db's events table over ClickHouse's HTTP interface.
func insertRows(hc *fasthttp.HostClient, chHTTP, db string, rows []byte) error {
	if len(rows) == 0 {
		return nil
	}
	q := "INSERT INTO " + db + ".events (" + DirectColumns + ") FORMAT JSONEachRow"
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.SetRequestURI(chHTTP + "/?query=" + url.QueryEscape(q))
	req.Header.SetMethod("POST")
	req.SetBodyRaw(rows)
	if err := hc.DoTimeout(req, resp, time.Minute); err != nil {
		return err
	}
	if resp.StatusCode() != 200 {
		return fmt.Errorf("insert events: ClickHouse %d: %s", resp.StatusCode(), firstLine(resp.Body()))
	}
	return nil
}

// spreadDay is perDay events evenly over the UTC day from day: event names and
// currencies cycle, one of 500 people.
func spreadDay(day time.Time, perDay, d int) GenBatch {
	b := GenBatch{Events: make([]GenEvent, perDay)}
	step := 24 * time.Hour / time.Duration(perDay)
	for i := range b.Events {
		e := GenEvent{Name: eventNames[i%len(eventNames)], OccurredAt: day.Add(time.Duration(i) * step), Consent: true,
			Email: "seed" + strconv.Itoa((d*7+i)%500) + "@example.com"}
		if cur := []string{"", "EUR", "USD"}[(i/len(eventNames))%3]; cur != "" {
			e.Value, e.Currency = strconv.Itoa(10+i%90)+".50", cur
		}
		b.Events[i] = e
	}
	return b
}

// zoneQuery is the time_zone parameter for zone ("" for none).
func zoneQuery(zone string) string {
	if zone == "" {
		return ""
	}
	return "&time_zone=" + url.QueryEscape(zone)
}

func trimBase(u, base string) string {
	if len(u) > len(base) && u[:len(base)] == base {
		return u[len(base):]
	}
	return u
}

// seedRead writes the read scenario's data for fx's workspace and returns the plan id.
func seedRead(ctx context.Context, fx *Fixture, chCfg chpool.Config, chHTTP string, pixels, rollupDays, perDay, lines, actualDays int) (uuid.UUID, error) {
	// Events: every day, every event name, three currencies and none, a few events.
	hc, err := hostClient(chHTTP, 2, time.Minute)
	if err != nil {
		return uuid.Nil, err
	}
	now := time.Now().UTC()
	today := catalog.Day(now)
	var rows []byte
	seq := int64(0)
	ws, key := fx.Workspace.String(), uuid.New().String()
	for p := 0; p < pixels; p++ {
		for d := 0; d < rollupDays; d++ {
			b := seedDay(today.AddDate(0, 0, -d), perDay, d)
			rows = AppendDirectRows(rows, &b, ws, fx.Pixels[p].String(), key, "bench-seed", seq, now)
			seq++
			if len(rows) > 64<<20 { // insert in parts of about 64 MiB
				if err := insertRows(hc, chHTTP, chCfg.Database, rows); err != nil {
					return uuid.Nil, err
				}
				rows = rows[:0]
			}
		}
	}
	if err := insertRows(hc, chHTTP, chCfg.Database, rows); err != nil {
		return uuid.Nil, err
	}

	// A plan with its lines and their actuals.
	conn, err := chpool.Open(ctx, chCfg)
	if err != nil {
		return uuid.Nil, err
	}
	defer conn.Close()
	start := today.AddDate(0, 0, -(actualDays + 5))
	end := today.AddDate(0, 1, 0)
	plan := catalog.Plan{ID: uuid.New(), Name: "bench plan", Advertiser: "Bench", Objective: catalog.Objectives[2],
		Status: "live", StartDate: start, EndDate: end, Budget: decimal.NewFromInt(1_000_000), Currency: "EUR",
		Channels: []string{"search"}, Owner: "bench"}
	if len(catalog.Channels) > 0 {
		plan.Channels = []string{catalog.Channels[0]}
	}
	if err := catalog.PutPlans(ctx, conn, fx.Workspace, []catalog.Plan{plan}); err != nil {
		return uuid.Nil, err
	}
	ls := make([]catalog.Line, lines)
	for i := range ls {
		ls[i] = catalog.Line{ID: uuid.New(), PlanID: plan.ID, Name: "line " + strconv.Itoa(i), Channel: plan.Channels[0],
			Publisher: "Bench", BuyType: catalog.BuyTypes[0], UnitCost: decimal.RequireFromString("1.25"), StartDate: start,
			EndDate: end, Budget: decimal.NewFromInt(2000), Currency: "EUR", PlannedImpressions: 100000, Status: "live"}
	}
	if err := catalog.PutLines(ctx, conn, fx.Workspace, ls); err != nil {
		return uuid.Nil, err
	}
	acts := make([]catalog.PlanActual, 0, lines*actualDays)
	for i := range ls {
		for d := 0; d < actualDays; d++ {
			acts = append(acts, catalog.PlanActual{PlanID: plan.ID, LineID: ls[i].ID, Date: today.AddDate(0, 0, -d),
				Metrics: catalog.Metrics{Impressions: uint64(1000 + i + d), Clicks: uint64(10 + d), Spend: decimal.New(int64(1250+i), -2),
					Currency: "EUR", Conversions: uint64(d % 7)}, Source: "seed"})
		}
	}
	if err := catalog.UpsertPlanActuals(ctx, conn, fx.Workspace, acts); err != nil {
		return uuid.Nil, err
	}
	return plan.ID, nil
}
