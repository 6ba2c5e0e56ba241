package bench

import (
	"bytes"
	"context"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/valyala/fasthttp"
)

// prober measures freshness: every probeEvery it sends one event with a unique marker
// event_name to a pixel of its own, notes when the 202 came back, and polls for the
// markers that became visible (GET /pixel-rollups, or ClickHouse's rollup table when
// the endpoint is not served). Freshness is the time from the 202 to the first poll
// that saw the marker, so it is overstated by up to one poll interval.
type prober struct {
	f       *ingestFlags
	fx      *Fixture
	runID   string
	pixel   string // pxl_…
	pixelU  string // raw UUID
	via     string
	hc      *fasthttp.HostClient
	ch      *fasthttp.HostClient
	chURL   string
	auth    string
	started time.Time

	mu     sync.Mutex
	sent   map[int]time.Time // marker number → its 202
	seen   map[int]time.Duration
	failed int
	n      int
	// pollDone is closed when the poll loop has ended (set by run before it returns).
	pollDone chan struct{}
}

func newProber(ctx context.Context, f *ingestFlags, fx *Fixture, run string) (*prober, error) {
	p := &prober{f: f, fx: fx, runID: run, pixel: fx.PixelIDs[len(fx.PixelIDs)-1],
		pixelU: fx.Pixels[len(fx.Pixels)-1].String(), auth: "Bearer " + fx.Secrets[0],
		sent: map[int]time.Time{}, seen: map[int]time.Duration{}}
	var err error
	if p.hc, err = hostClient(f.target, 8, f.timeout); err != nil {
		return nil, err
	}
	p.via = f.via
	if p.via == "auto" {
		p.via = "clickhouse"
		// Served when GET /pixel-rollups answers 200 for our pixel (a 404 problem or no
		// route means the read API is not there yet).
		if _, st, err := p.pollAPI(); err == nil && st == 200 {
			p.via = "api"
		}
	}
	switch p.via {
	case "api":
	case "clickhouse":
		if p.ch, err = hostClient(f.chHTTP, 2, f.timeout); err != nil {
			return nil, err
		}
		q := fmt.Sprintf("SELECT event_name FROM %s.pixel_rollups_daily WHERE pixel_id = '%s' AND event_name LIKE 'bp\\_%s\\_%%' GROUP BY event_name FORMAT TabSeparated",
			f.chDB, p.pixelU, run)
		p.chURL = f.chHTTP + "/?query=" + url.QueryEscape(q)
		if _, err := p.pollCH(); err != nil {
			return nil, fmt.Errorf("e2e: ClickHouse poll: %w", err)
		}
	default:
		return nil, fmt.Errorf("-via %q: want api, clickhouse or auto", f.via)
	}
	_ = ctx
	return p, nil
}

func (p *prober) note() string {
	if p.via == "api" {
		return fmt.Sprintf("freshness: a probe every %s, visibility polled every %s through GET /pixel-rollups", p.f.probeEvery, p.f.poll)
	}
	return fmt.Sprintf("freshness: a probe every %s, visibility polled every %s in ClickHouse (%s.pixel_rollups_daily), not through GET /pixel-rollups", p.f.probeEvery, p.f.poll, p.f.chDB)
}

// count is how many probes were numbered (sent or not).
func (p *prober) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.n
}

func (p *prober) marker(n int) string { return "bp_" + p.runID + "_" + strconv.Itoa(n) }

// run sends probes for d and polls until ctx ends or d passed.
func (p *prober) run(ctx context.Context, d time.Duration) {
	p.started = time.Now()
	end := p.started.Add(d)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); p.pollLoop(ctx, end.Add(p.f.probeWait)) }()
	t := time.NewTicker(p.f.probeEvery)
	defer t.Stop()
	for time.Now().Before(end) && ctx.Err() == nil {
		p.mu.Lock()
		n := p.n
		p.n++
		p.mu.Unlock()
		go p.send(n)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
	}
	p.pollDone = make(chan struct{})
	go func() { wg.Wait(); close(p.pollDone) }()
}

func (p *prober) send(n int) {
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	ev := GenEvent{Name: p.marker(n), OccurredAt: time.Now().Truncate(time.Second), Consent: true}
	body := BatchJSON(&GenBatch{Events: []GenEvent{ev}}, p.pixel)
	req.SetRequestURI(p.f.target + "/events")
	req.Header.SetMethod("POST")
	req.Header.SetContentType("application/json")
	req.Header.Set("Authorization", p.auth)
	req.Header.Set("Idempotency-Key", "bench-probe-"+p.marker(n))
	req.SetBodyRaw(body)
	out := doHTTP(p.hc, req, resp, p.f.timeout)
	at := time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	if !out.OK {
		p.failed++
		return
	}
	p.sent[n] = at
}

// wait waits up to d for the poll loop to see the last probes.
func (p *prober) wait(ctx context.Context, d time.Duration) {
	if p.pollDone == nil {
		return
	}
	deadline := time.NewTimer(d + time.Second)
	defer deadline.Stop()
	select {
	case <-p.pollDone:
	case <-ctx.Done():
	case <-deadline.C:
	}
}

// pollLoop polls until every sent probe was seen (after the probes stopped) or until.
func (p *prober) pollLoop(ctx context.Context, until time.Time) {
	t := time.NewTicker(p.f.poll)
	defer t.Stop()
	probesEnd := until.Add(-p.f.probeWait)
	for ctx.Err() == nil && time.Now().Before(until) {
		var names []string
		var err error
		if p.via == "api" {
			names, _, err = p.pollAPI()
		} else {
			names, err = p.pollCH()
		}
		now := time.Now()
		if err == nil {
			p.mu.Lock()
			for _, name := range names {
				n, ok := p.parseMarker(name)
				if !ok {
					continue
				}
				if _, done := p.seen[n]; done {
					continue
				}
				if at, ok := p.sent[n]; ok {
					p.seen[n] = now.Sub(at)
				}
			}
			all := len(p.seen) == len(p.sent)
			p.mu.Unlock()
			if all && now.After(probesEnd.Add(p.f.timeout)) {
				return
			}
		}
		select {
		case <-ctx.Done():
		case <-t.C:
		}
	}
}

func (p *prober) parseMarker(name string) (int, bool) {
	pre := "bp_" + p.runID + "_"
	if !strings.HasPrefix(name, pre) {
		return 0, false
	}
	n, err := strconv.Atoi(name[len(pre):])
	return n, err == nil
}

// pollAPI lists the probe pixel's rollups for yesterday and today and returns the
// event names in them (following next_cursor).
func (p *prober) pollAPI() ([]string, int, error) {
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	today := time.Now().UTC()
	from := today.Add(-24 * time.Hour).Format(time.DateOnly)
	base := p.f.target + "/pixel-rollups?pixel_id=" + p.pixel + "&from=" + from + "&to=" + today.Format(time.DateOnly) + "&limit=1000"
	var names []string
	cursor := ""
	for page := 0; page < 50; page++ {
		u := base
		if cursor != "" {
			u += "&cursor=" + url.QueryEscape(cursor)
		}
		req.SetRequestURI(u)
		req.Header.Set("Authorization", p.auth)
		if err := p.hc.DoTimeout(req, resp, p.f.timeout); err != nil {
			return nil, 0, err
		}
		if resp.StatusCode() != 200 {
			return nil, resp.StatusCode(), fmt.Errorf("GET /pixel-rollups: %d %s", resp.StatusCode(), problemCode(resp.Body()))
		}
		body := resp.Body()
		names = append(names, jsonStrings(body, "event_name")...)
		cursor = jsonString(body, "next_cursor")
		if cursor == "" {
			break
		}
	}
	return names, 200, nil
}

// pollCH asks ClickHouse for the run's markers in the rollup table.
func (p *prober) pollCH() ([]string, error) {
	status, body, err := p.ch.GetTimeout(nil, p.chURL, p.f.timeout)
	if err != nil {
		return nil, err
	}
	if status != 200 {
		return nil, fmt.Errorf("ClickHouse %d: %s", status, strings.TrimSpace(string(body)))
	}
	var out []string
	for _, l := range bytes.Split(body, []byte("\n")) {
		if len(l) > 0 {
			out = append(out, string(l))
		}
	}
	return out, nil
}

// jsonStrings returns every string value of member name in b (a flat scan; enough
// for the API's own output, whose strings carry no escaped quotes in these members).
func jsonStrings(b []byte, name string) []string {
	k := []byte(`"` + name + `":"`)
	var out []string
	for {
		i := bytes.Index(b, k)
		if i < 0 {
			return out
		}
		b = b[i+len(k):]
		j := bytes.IndexByte(b, '"')
		if j < 0 {
			return out
		}
		out = append(out, string(b[:j]))
		b = b[j:]
	}
}

// jsonString returns the first string value of member name ("" when absent or null).
func jsonString(b []byte, name string) string {
	if s := jsonStrings(b, name); len(s) > 0 {
		return s[0]
	}
	return ""
}

func (p *prober) progress() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var worst time.Duration
	for _, d := range p.seen {
		worst = max(worst, d)
	}
	return fmt.Sprintf("probes %d seen %d worst %s", len(p.sent), len(p.seen), worst.Round(time.Millisecond))
}

// report summarises the probes.
func (p *prober) report(start time.Time) *Freshness {
	p.mu.Lock()
	defer p.mu.Unlock()
	h := NewHistogram()
	f := &Freshness{Via: p.via, PollEvery: float64(p.f.poll) / 1e6, Probes: int64(len(p.sent))}
	for n := 0; n < p.n; n++ {
		at, ok := p.sent[n]
		if !ok {
			continue
		}
		pt := FreshPoint{T: round(at.Sub(p.started).Seconds(), 2), Ms: -1}
		if d, ok := p.seen[n]; ok {
			RecordDuration(h, d)
			pt.Ms = round(float64(d)/1e6, 1)
			f.Seen++
		} else {
			f.Missing++
		}
		f.Timeline = append(f.Timeline, pt)
	}
	f.Latency = Summarize(h)
	f.Distribution = Distribution(h)
	_ = start
	return f
}
