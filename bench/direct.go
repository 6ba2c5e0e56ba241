package bench

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/valyala/fasthttp"

	"svc/schema/migrations"
)

// directMain is `svc bench direct`: the batches ingest would send, inserted straight
// into ClickHouse over its HTTP interface (INSERT … FORMAT JSONEachRow, one INSERT per
// batch) at the same arrival rate, into the events table (and its rollup view) of a
// scratch database created for the run and dropped after it. It shows what the
// pipeline (edge → Kafka → batched consumer) buys over writing each batch directly.
func directMain(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("bench direct", flag.ContinueOnError)
	var c common
	c.register(fs, 4000, 30*time.Second)
	ch := fs.String("clickhouse-http", envOr("BENCH_CLICKHOUSE_HTTP", "http://127.0.0.1:8123"), "ClickHouse HTTP interface")
	batch := fs.Int("batch", 50, "events per INSERT (as per request in ingest)")
	pixels := fs.Int("pixels", 16, "pixels the batches spread over")
	bodies := fs.Int("bodies", 512, "distinct batches generated up front")
	seed := fs.Uint64("seed", 1, "generator seed")
	keep := fs.Bool("keep", false, "keep the scratch database (default: drop it)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	c.metrics = "" // no service involved
	c.target = *ch
	if err := c.validate(); err != nil {
		return err
	}
	if *batch < 1 || *batch > 50 {
		return errors.New("-batch must be 1..50")
	}
	hc, err := hostClient(*ch, c.workers, c.timeout)
	if err != nil {
		return err
	}
	db := "bench_direct_" + runID()
	if err := directSetup(hc, *ch, db, c.timeout); err != nil {
		return err
	}
	if !*keep {
		defer dropScratch(*ch, db)
	}
	title := fmt.Sprintf("direct: INSERT … FORMAT JSONEachRow into ClickHouse, %d events per INSERT, %.0f inserts/s (%.0f events/s) for %s",
		*batch, c.rate, c.rate*float64(*batch), c.duration)
	rep := newReport("direct", title, &c, args)
	rep.Params["batch"], rep.Params["pixels"], rep.Params["bodies"], rep.Params["database"] = *batch, *pixels, *bodies, db
	rep.Notes = append(rep.Notes, "one HTTP INSERT per batch into a scratch database (events table with the same schema and rollup materialized view as the service); "+
		"'accepted' events are rows ClickHouse acknowledged")
	ws, key := uuid.New().String(), uuid.New().String()
	pix := make([]string, *pixels)
	for i := range pix {
		pix[i] = uuid.New().String()
	}
	gen := Generate(GenConfig{BatchSize: *batch, Pixels: *pixels, Bodies: *bodies, Seed: *seed, Now: time.Now()})
	now := time.Now()
	rows := make([][]byte, len(gen))
	for i := range gen {
		rows[i] = AppendDirectRows(nil, &gen[i], ws, pix[gen[i].Pixel], key, "bench-direct", int64(i), now)
	}
	insertURL := *ch + "/?query=" + url.QueryEscape("INSERT INTO "+db+".events ("+DirectColumns+") FORMAT JSONEachRow")
	type wstate struct {
		req  *fasthttp.Request
		resp *fasthttp.Response
	}
	states := make([]wstate, c.workers)
	for i := range states {
		states[i] = wstate{fasthttp.AcquireRequest(), fasthttp.AcquireResponse()}
		states[i].req.SetRequestURI(insertURL)
		states[i].req.Header.SetMethod("POST")
	}
	do := func(w int, i int64) Outcome {
		st := &states[w]
		b := int(i % int64(len(rows)))
		st.req.SetBodyRaw(rows[b])
		out := doHTTP(hc, st.req, st.resp, c.timeout)
		out.Sent = len(gen[b].Events)
		if out.OK {
			out.Events = out.Sent
		} else if out.Status != 0 {
			out.Code = chErrorCode(st.resp.Body())
		}
		return out
	}
	runLoad(ctx, &c, rep, do, nil)
	if n, err := chQuery(hc, *ch, "SELECT count() FROM "+db+".events", c.timeout); err == nil {
		rep.Notes = append(rep.Notes, "rows in the scratch events table after the run: "+strings.TrimSpace(n))
	}
	if n, err := chQuery(hc, *ch, "SELECT count() FROM system.parts WHERE database = '"+db+"' AND active", c.timeout); err == nil {
		rep.Notes = append(rep.Notes, "active parts in the scratch database after the run: "+strings.TrimSpace(n))
	}
	return finish(&c, rep)
}

// directSetup creates db with the service's events table and rollup view (migrations
// 0001 and 0002, rendered for db).
func directSetup(hc *fasthttp.HostClient, base, db string, timeout time.Duration) error {
	ms, err := migrations.Migrations()
	if err != nil {
		return err
	}
	var pick []migrations.Migration
	for _, m := range ms {
		if m.Version <= 2 {
			pick = append(pick, m)
		}
	}
	_, steps, err := migrations.Plan(pick, db, "")
	if err != nil {
		return err
	}
	if err := chExec(hc, base, "CREATE DATABASE IF NOT EXISTS "+db, timeout); err != nil {
		return err
	}
	for _, st := range steps {
		for _, s := range st.Statements {
			if err := chExec(hc, base, s, timeout); err != nil {
				return fmt.Errorf("%s: %w", st.Name, err)
			}
		}
	}
	return nil
}

// chExec runs one statement over ClickHouse's HTTP interface.
func chExec(hc *fasthttp.HostClient, base, stmt string, timeout time.Duration) error {
	_, err := chQuery(hc, base, stmt, timeout)
	return err
}

func chQuery(hc *fasthttp.HostClient, base, stmt string, timeout time.Duration) (string, error) {
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.SetRequestURI(base + "/")
	req.Header.SetMethod("POST")
	req.SetBodyString(stmt)
	if err := hc.DoTimeout(req, resp, timeout); err != nil {
		return "", err
	}
	if resp.StatusCode() != 200 {
		return "", fmt.Errorf("ClickHouse %d: %s", resp.StatusCode(), firstLine(resp.Body()))
	}
	return string(resp.Body()), nil
}

func firstLine(b []byte) string {
	s := strings.TrimSpace(string(b))
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 300 {
		s = s[:300]
	}
	return s
}

// chErrorCode names a ClickHouse error answer by its exception name (TOO_MANY_PARTS)
// or code ("Code: 252").
func chErrorCode(b []byte) string {
	s := string(b)
	if i := strings.Index(s, "Code: "); i >= 0 {
		rest := s[i+6:]
		j := strings.IndexAny(rest, ",. ")
		if j < 0 {
			j = len(rest)
		}
		code := "ch_" + rest[:j]
		switch rest[:j] {
		case "252":
			return code + "_too_many_parts"
		case "202":
			return code + "_too_many_simultaneous_queries"
		}
		return code
	}
	return "ch_error"
}

// dropScratch drops the scratch database, on a fresh connection and with retries: an
// overloaded ClickHouse (too many parts, merges behind) can take a while to answer.
func dropScratch(base, db string) {
	hc, err := hostClient(base, 1, 2*time.Minute)
	if err != nil {
		return
	}
	for attempt := 1; ; attempt++ {
		err := chExec(hc, base, "DROP DATABASE IF EXISTS "+db, 2*time.Minute)
		if err == nil {
			return
		}
		if attempt == 3 {
			fmt.Printf("cleanup: DROP DATABASE %s: %v (drop it by hand)\n", db, err)
			return
		}
		time.Sleep(5 * time.Second)
	}
}
