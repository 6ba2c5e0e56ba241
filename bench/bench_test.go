package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"html"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"svc/lib/svctest"
)

func TestScheduleDueTimes(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s := Schedule{Start: start, Rate: 4000, Duration: 2 * time.Second}
	if got := s.Total(); got != 8000 {
		t.Fatalf("Total = %d, want 8000", got)
	}
	for _, tc := range []struct {
		i    int64
		want time.Duration
	}{{0, 0}, {1, 250 * time.Microsecond}, {4000, time.Second}, {7999, 2*time.Second - 250*time.Microsecond}} {
		if got := s.Due(tc.i).Sub(start); got != tc.want {
			t.Errorf("Due(%d) = +%v, want +%v", tc.i, got, tc.want)
		}
	}
	if (Schedule{Rate: 0, Duration: time.Second}).Total() != 0 {
		t.Error("a zero rate must schedule nothing")
	}
}

// fakeClock is a clock that only moves when someone sleeps or a request takes time.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// With one worker and a target that stalls once for 100 ms, the requests due during
// the stall are sent late and their latency counts from their due time: the stall
// shows up in the latency of every request it delayed (no coordinated omission).
func TestRunnerMeasuresFromDueTime(t *testing.T) {
	clk := &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	s := Schedule{Start: clk.Now(), Rate: 100, Duration: time.Second} // every 10 ms
	rec := NewRecorder(s.Start)
	r := &Runner{Schedule: s, Workers: 1, LateAfter: time.Millisecond, DrainAfter: time.Second, Rec: rec,
		Now: clk.Now, Sleep: clk.Advance,
		Do: func(_ int, i int64) Outcome {
			if i == 10 {
				clk.Advance(100 * time.Millisecond) // the stall
			} else {
				clk.Advance(time.Millisecond)
			}
			return Outcome{Status: 202, OK: true, Events: 50, Sent: 50}
		}}
	r.Run(context.Background())
	var rep Report
	rec.Finish(&rep, time.Second)
	if rep.Requests.OK != 100 || rep.Requests.Unsent != 0 {
		t.Fatalf("requests %+v, want 100 ok, 0 unsent", rep.Requests)
	}
	// Request 10 took 100 ms; requests 11..19 were due during it and waited, and 20
	// still queued behind them (sent 9 ms late).
	if rep.Requests.Late != 10 {
		t.Errorf("late = %d, want 10", rep.Requests.Late)
	}
	if rep.Latency.Max < 100 || rep.Latency.Max > 101 {
		t.Errorf("max latency %.1f ms, want ~100 (from due time)", rep.Latency.Max)
	}
	// Request 11 was due at 110 ms and sent at 200 ms: its latency from due is 91 ms
	// although its service time was 1 ms. Ten requests are in the tail.
	if rep.Latency.P99 < 80 {
		t.Errorf("p99 %.1f ms: the requests queued behind the stall should dominate the tail", rep.Latency.P99)
	}
	if rep.Service.P90 > 1.1 {
		t.Errorf("service p90 %.2f ms, want 1 ms (the server was fast except once)", rep.Service.P90)
	}
	if rep.Events.Accepted != 5000 {
		t.Errorf("accepted = %d, want 5000", rep.Events.Accepted)
	}
}

func TestRunnerCountsUnsentOnCancel(t *testing.T) {
	clk := &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	s := Schedule{Start: clk.Now(), Rate: 100, Duration: time.Second}
	rec := NewRecorder(s.Start)
	ctx, cancel := context.WithCancel(context.Background())
	r := &Runner{Schedule: s, Workers: 1, Rec: rec, Now: clk.Now, Sleep: clk.Advance,
		Do: func(_ int, i int64) Outcome {
			if i == 49 {
				cancel()
			}
			return Outcome{Status: 202, OK: true}
		}}
	r.Run(ctx)
	var rep Report
	rec.Finish(&rep, time.Second)
	if rep.Requests.OK != 50 || rep.Requests.Unsent != 50 || rep.Requests.Scheduled != 100 {
		t.Fatalf("requests %+v, want 50 ok and 50 unsent of 100", rep.Requests)
	}
}

func TestRunnerGivesUpAfterDrain(t *testing.T) {
	clk := &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	s := Schedule{Start: clk.Now(), Rate: 10, Duration: time.Second}
	rec := NewRecorder(s.Start)
	r := &Runner{Schedule: s, Workers: 1, DrainAfter: 500 * time.Millisecond, Rec: rec, Now: clk.Now, Sleep: clk.Advance,
		Do: func(_ int, i int64) Outcome {
			if i == 0 {
				clk.Advance(2 * time.Second) // past the schedule's end plus the drain
			}
			return Outcome{Status: 503, Code: "service_unavailable"}
		}}
	r.Run(context.Background())
	var rep Report
	rec.Finish(&rep, 2*time.Second)
	if rep.Requests.Completed != 1 || rep.Requests.Unsent != 9 {
		t.Fatalf("requests %+v, want 1 completed, 9 unsent", rep.Requests)
	}
	if rep.Errors["503 service_unavailable"] != 1 {
		t.Errorf("errors %v", rep.Errors)
	}
}

func TestSummarizeAndDistribution(t *testing.T) {
	h := NewHistogram()
	for i := 1; i <= 1000; i++ {
		RecordDuration(h, time.Duration(i)*time.Millisecond)
	}
	s := Summarize(h)
	near := func(got, want float64) bool { return math.Abs(got-want) <= want*0.002+0.001 }
	for name, c := range map[string][2]float64{"p50": {s.P50, 500}, "p90": {s.P90, 900}, "p99": {s.P99, 990},
		"p99.9": {s.P999, 999}, "max": {s.Max, 1000}, "min": {s.Min, 1}} {
		if !near(c[0], c[1]) {
			t.Errorf("%s = %v ms, want %v", name, c[0], c[1])
		}
	}
	if s.Count != 1000 {
		t.Errorf("count %d", s.Count)
	}
	d := Distribution(h)
	if d[0].Percentile != 0 || d[len(d)-1].Percentile != 100 || !near(d[len(d)-1].Ms, 1000) {
		t.Errorf("distribution ends %v … %v", d[0], d[len(d)-1])
	}
	for i := 1; i < len(d); i++ {
		if d[i].Percentile <= d[i-1].Percentile || d[i].Ms < d[i-1].Ms {
			t.Fatalf("distribution not increasing at %d: %v %v", i, d[i-1], d[i])
		}
	}
	if Summarize(NewHistogram()) != (Summary{}) || Distribution(NewHistogram()) != nil {
		t.Error("an empty histogram must summarise to zero")
	}
	// Values beyond the range are clamped, not dropped.
	RecordDuration(h, time.Hour)
	if h.TotalCount() != 1001 {
		t.Error("an out-of-range value was dropped")
	}
}

func TestRecorderTimelineAndErrors(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	rec := NewRecorder(start)
	at := func(ms int) time.Time { return start.Add(time.Duration(ms) * time.Millisecond) }
	rec.Record(at(0), at(0), at(5), false, Outcome{Status: 202, OK: true, Events: 50, Sent: 50})
	rec.Record(at(100), at(100), at(110), false, Outcome{Status: 429, Code: "rate_limited", Sent: 50})
	rec.Record(at(2000), at(2020), at(2030), true, Outcome{Code: "timeout", Sent: 50})
	rec.Tick(at(3500))
	var rep Report
	rec.Finish(&rep, 3*time.Second)
	if len(rep.Timeline) != 3 {
		t.Fatalf("timeline %+v, want 3 seconds", rep.Timeline)
	}
	if p := rep.Timeline[0]; p.OK != 1 || p.Err != 1 || p.Events != 50 || p.Max < 9.9 {
		t.Errorf("second 0: %+v", p)
	}
	if p := rep.Timeline[1]; p.OK+p.Err != 0 {
		t.Errorf("second 1 should be empty: %+v", p)
	}
	if p := rep.Timeline[2]; p.Err != 1 || p.Late != 1 {
		t.Errorf("second 2: %+v", p)
	}
	want := map[string]int64{"429 rate_limited": 1, "timeout": 1}
	if len(rep.Errors) != 2 || rep.Errors["429 rate_limited"] != 1 || rep.Errors["timeout"] != 1 {
		t.Errorf("errors %v, want %v", rep.Errors, want)
	}
	if rep.Events.Sent != 150 || rep.Events.Accepted != 50 || rep.Requests.Late != 1 {
		t.Errorf("events %+v requests %+v", rep.Events, rep.Requests)
	}
	if got := ErrorKey(Outcome{Status: 500}); got != "500" {
		t.Errorf("ErrorKey(500) = %q", got)
	}
}

func TestCompareRatios(t *testing.T) {
	a := &Report{Title: "a", AchievedRate: 1000, Events: EventCounts{PerSecond: 50000}, Latency: Summary{P99: 10}}
	b := &Report{Title: "b", AchievedRate: 2000, Events: EventCounts{PerSecond: 50000}, Latency: Summary{P99: 5}}
	got := map[string]float64{}
	for _, m := range CompareMetrics(a, b) {
		got[m.Name] = m.Ratio()
	}
	if got["achieved rate (req/s)"] != 2 || got["latency p99 (ms)"] != 0.5 || got["events accepted/s"] != 1 || got["errors"] != 1 {
		t.Errorf("ratios %v", got)
	}
	if r := (Metric{A: 0, B: 3}).Ratio(); !math.IsNaN(r) {
		t.Errorf("ratio over zero = %v, want NaN", r)
	}
	var buf bytes.Buffer
	PrintCompare(&buf, a, b, "A.json", "B.json")
	if !strings.Contains(buf.String(), "2.00x") || !strings.Contains(buf.String(), "0.50x") {
		t.Errorf("compare output:\n%s", buf.String())
	}
}

// TestCompareRuns: several runs a side compare by their medians (the mean of the middle
// two for an even count), each run's p99 listed.
func TestCompareRuns(t *testing.T) {
	rep := func(p99, rate float64) *Report {
		return &Report{Title: "t", AchievedRate: rate, Latency: Summary{P99: p99}}
	}
	as := []*Report{rep(10, 1000), rep(30, 1000), rep(11, 1000), rep(12, 1000)}
	bs := []*Report{rep(12, 1000), rep(13, 1000), rep(90, 1000)}
	got := map[string]Metric{}
	for _, m := range CompareRunMetrics(as, bs) {
		got[m.Name] = m
	}
	if m := got["latency p99 (ms)"]; m.A != 11.5 || m.B != 13 {
		t.Errorf("p99 medians A %v B %v, want 11.5 and 13", m.A, m.B)
	}
	if m := got["achieved rate (req/s)"]; m.A != 1000 || m.B != 1000 {
		t.Errorf("rate medians %v %v", m.A, m.B)
	}
	var buf bytes.Buffer
	PrintCompareRuns(&buf, as, bs, []string{"a1", "a2", "a3", "a4"}, []string{"b1", "b2", "b3"})
	for _, want := range []string{"4 runs", "3 runs", "1.13x", "A 30 a2", "B 90 b3"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("compare of runs lacks %q:\n%s", want, buf.String())
		}
	}
}

func sampleReport() *Report {
	rep := &Report{Scenario: "ingest", Title: "ingest <test>", Rate: 100, Duration: 3,
		Machine: Machine{Cores: 2}, Params: map[string]any{"batch": 50}, Events: EventCounts{Sent: 15000, Accepted: 15000},
		Errors: map[string]int64{"503 service_unavailable": 2}}
	h := NewHistogram()
	for i := 1; i <= 300; i++ {
		RecordDuration(h, time.Duration(i)*100*time.Microsecond)
	}
	rep.Latency, rep.Distribution = Summarize(h), Distribution(h)
	for s := 0; s < 3; s++ {
		rep.Timeline = append(rep.Timeline, Point{T: float64(s), OK: 100, Events: 5000, P50: 2, P99: 9, Max: 30})
	}
	for s := 0; s < 12; s++ {
		rep.Samples = append(rep.Samples, Sample{T: float64(s), HeapInuse: 50 << 20, Goroutines: 40, CPUSeconds: float64(s) * 0.5})
	}
	rep.Freshness = &Freshness{Via: "api", Probes: 2, Seen: 1, Missing: 1, Latency: Summary{P99: 900},
		Distribution: []PercentilePoint{{0, 800}, {50, 850}, {100, 900}}, Timeline: []FreshPoint{{1, 850}, {2, -1}}}
	return rep
}

func TestRenderHTML(t *testing.T) {
	rep := sampleReport()
	var buf bytes.Buffer
	if err := RenderHTML(&buf, rep); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	if n := strings.Count(out, "<svg "); n != 8 {
		t.Errorf("%d charts, want 8 (latency, percentiles, throughput, events, freshness, memory, goroutines, cpu)", n)
	}
	for _, want := range []string{"ingest &lt;test&gt;", "503 service_unavailable", "99.9%", "polyline", "freshness (via api; 1/2 seen)"} {
		if !strings.Contains(out, want) {
			t.Errorf("HTML lacks %q", want)
		}
	}
	if strings.Contains(out, "<test>") {
		t.Error("title not escaped")
	}
	if strings.Contains(out, "NaN") || strings.Contains(out, "Inf") {
		t.Error("NaN or Inf in the SVG")
	}
	var text bytes.Buffer
	PrintSummary(&text, rep)
	for _, want := range []string{"p99", "error", "503 service_unavailable: 2", "freshness"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, text.String())
		}
	}
	// The JSON report round-trips.
	b, _ := json.Marshal(rep)
	var back Report
	if err := json.Unmarshal(b, &back); err != nil || back.Latency != rep.Latency || len(back.Timeline) != 3 {
		t.Errorf("round trip: %v %+v", err, back.Latency)
	}
}

func TestChartEmptyAndTicks(t *testing.T) {
	if svg := (Chart{Title: "x"}).SVG(); !strings.Contains(svg, "no data") {
		t.Error("empty chart should say no data")
	}
	ticks := niceTicks(0, 97, 6)
	if ticks[0] != 0 || ticks[len(ticks)-1] < 80 || len(ticks) > 8 {
		t.Errorf("ticks %v", ticks)
	}
}

func TestGeneratedBodies(t *testing.T) {
	gen := Generate(GenConfig{BatchSize: 50, Pixels: 3, InvalidFrac: 0.1, Bodies: 40, Seed: 7, Now: time.Now()})
	invalid, total := 0, 0
	for i := range gen {
		if gen[i].Pixel != i%3 {
			t.Fatalf("batch %d on pixel %d", i, gen[i].Pixel)
		}
		var v struct {
			PixelID string           `json:"pixel_id"`
			Events  []map[string]any `json:"events"`
		}
		if err := json.Unmarshal(BatchJSON(&gen[i], "pxl_x"), &v); err != nil {
			t.Fatalf("batch %d is not JSON: %v", i, err)
		}
		if v.PixelID != "pxl_x" || len(v.Events) != 50 {
			t.Fatalf("batch %d: %+v", i, v)
		}
		total += len(gen[i].Events)
		invalid += len(gen[i].Events) - gen[i].Valid()
	}
	if share := float64(invalid) / float64(total); share < 0.06 || share > 0.14 {
		t.Errorf("invalid share %.3f, want about 0.1", share)
	}
	rows := AppendDirectRows(nil, &gen[0], "w", "p", "k", "t", 1, time.Now())
	if n := bytes.Count(rows, []byte("\n")); n != gen[0].Valid() {
		t.Errorf("%d direct rows, want %d (valid events only)", n, gen[0].Valid())
	}
}

// TestGeneratedEventIDs: with -event-ids every event of a body carries the id
// EventID(run, j, i) of the request number written into it, the rest of each event as
// BatchJSON writes it; the body stays JSON and another request gets other ids.
func TestGeneratedEventIDs(t *testing.T) {
	gen := Generate(GenConfig{BatchSize: 50, Pixels: 2, InvalidFrac: 0.1, Bodies: 3, Seed: 9, Now: time.Now()})
	for i := range gen {
		body, slots := BatchJSONWithIDs(&gen[i], "pxl_x", "1a2b")
		var plain struct {
			Events []map[string]any `json:"events"`
		}
		if err := json.Unmarshal(BatchJSON(&gen[i], "pxl_x"), &plain); err != nil {
			t.Fatal(err)
		}
		for _, j := range []int64{0, 7, 123456789012} {
			SetEventIDs(body, slots, j)
			var v struct {
				PixelID string           `json:"pixel_id"`
				Events  []map[string]any `json:"events"`
			}
			if err := json.Unmarshal(body, &v); err != nil {
				t.Fatalf("batch %d, request %d: not JSON: %v\n%s", i, j, err, body)
			}
			if v.PixelID != "pxl_x" || len(v.Events) != 50 {
				t.Fatalf("batch %d: %d events", i, len(v.Events))
			}
			for k, e := range v.Events {
				if e["event_id"] != EventID("1a2b", j, k) {
					t.Fatalf("request %d, event %d: event_id %v, want %s", j, k, e["event_id"], EventID("1a2b", j, k))
				}
				delete(e, "event_id")
				a, _ := json.Marshal(e)
				b, _ := json.Marshal(plain.Events[k])
				if !bytes.Equal(a, b) {
					t.Fatalf("event %d: %s, want %s", k, a, b)
				}
			}
		}
	}
}

func TestParsers(t *testing.T) {
	body := []byte(`{"accepted": 48,"rejected":2,"rejections":[],"request_id":"req_1"}`)
	if jsonInt(body, "accepted") != 48 || jsonInt(body, "rejected") != 2 || jsonInt(body, "nope") != -1 {
		t.Error("jsonInt")
	}
	if got := problemCode([]byte(`{"type":"x","code":"rate_limited","status":429}`)); got != "rate_limited" {
		t.Errorf("problemCode = %q", got)
	}
	m := ParseMetrics([]byte("# HELP x\ngo_goroutines 42\ngo_memstats_heap_inuse_bytes 1.5e+07\nprocess_cpu_seconds_total 3.25\nsvc_http_open_connections 7\nother 1\n"))
	if m.Goroutines != 42 || m.HeapInuse != 1.5e7 || m.CPUSeconds != 3.25 || m.Conns != 7 {
		t.Errorf("ParseMetrics = %+v", m)
	}
	if got := jsonStrings([]byte(`{"data":[{"event_name":"a"},{"event_name":"b"}],"meta":{"next_cursor":null}}`), "event_name"); len(got) != 2 || got[1] != "b" {
		t.Errorf("jsonStrings = %v", got)
	}
	if chErrorCode([]byte("Code: 252, e.displayText() = DB::Exception: Too many parts")) != "ch_252_too_many_parts" {
		t.Error("chErrorCode")
	}
}

func TestSoakVerdict(t *testing.T) {
	var flat, growing []Sample
	for i := 0; i < 50; i++ {
		flat = append(flat, Sample{T: float64(i), HeapInuse: float64(100+i%3) * (1 << 20), Goroutines: 60})
		growing = append(growing, Sample{T: float64(i), HeapInuse: float64(100+4*i) * (1 << 20), Goroutines: float64(60 + i)})
	}
	if v := SoakVerdict(flat, 20, 20); !v.Flat {
		t.Errorf("flat judged %+v", v)
	}
	if v := SoakVerdict(growing, 20, 20); v.Flat || !strings.Contains(v.Verdict, "GROWING") {
		t.Errorf("growing judged %+v", v)
	}
	// Goroutines that follow the open connections (one each) are not a leak; the same
	// growth with the connection count flat is.
	var withConns, leak []Sample
	for i := 0; i < 50; i++ {
		withConns = append(withConns, Sample{T: float64(i), HeapInuse: 100 << 20, Goroutines: float64(60 + 3*i), Conns: float64(1 + 3*i)})
		leak = append(leak, Sample{T: float64(i), HeapInuse: 100 << 20, Goroutines: float64(60 + 3*i), Conns: 1})
	}
	if v := SoakVerdict(withConns, 20, 20); !v.Flat || !strings.Contains(v.Verdict, "besides one per open connection") {
		t.Errorf("goroutines following connections judged %+v", v)
	}
	if v := SoakVerdict(leak, 20, 20); v.Flat {
		t.Errorf("goroutines growing with flat connections judged %+v", v)
	}
}

func TestPersistenceForksCountsRewritesAndSnapshots(t *testing.T) {
	info := "# Persistence\r\nloading:0\r\nrdb_saves:2\r\nrdb_bgsave_in_progress:0\r\naof_rewrite_in_progress:1\r\naof_rewrites:3\r\naof_last_bgrewrite_status:ok\r\n"
	if got := persistenceForks(info); got != (forks{done: 5, running: 1}) {
		t.Fatalf("persistenceForks = %+v, want 5 done (2 saves, 3 rewrites), 1 running", got)
	}
	quiet := forks{done: 5}
	if note := forkNote(quiet, quiet); note != "" {
		t.Fatalf("a note without a fork: %q", note)
	}
	for _, c := range [][2]forks{{quiet, {done: 6}}, {{done: 5, running: 1}, {done: 6}}, {quiet, {done: 5, running: 1}}} {
		if !strings.Contains(forkNote(c[0], c[1]), "Redis forked") {
			t.Fatalf("no note from %+v to %+v", c[0], c[1])
		}
	}
}

// CPU per event: each process's cores over the readings' span, per accepted event; the
// generator is svc bench and vegeta together; the pipeline is svc, Redis and ClickHouse
// (not the generator, other engineers' svc or "other"). Every report prints it.
func TestCPUPerEvent(t *testing.T) {
	c := &CPU{Busy: 2, Span: 10, Procs: map[string]float64{"svc (target)": 1, "redis": 0.5, "clickhouse": 0.25,
		"bench": 0.2, "vegeta": 0.1, "svc (other)": 0.4, "other": 0.3}}
	c.SetPerEvent(1_000_000) // 10 s: 1 core is 10 µs per event
	want := map[string]float64{"svc": 10, "redis": 5, "clickhouse": 2.5, "generator": 3, Pipeline: 17.5}
	for k, v := range want {
		if got := c.PerEvent[k]; math.Abs(got-v) > 1e-9 {
			t.Errorf("per event %s = %v µs, want %v", k, got, v)
		}
	}
	if len(c.PerEvent) != len(want) {
		t.Errorf("per event has %v, want only %v", c.PerEvent, want)
	}
	none := &CPU{Span: 10, Procs: map[string]float64{"redis": 1}}
	none.SetPerEvent(0)
	if none.PerEvent != nil {
		t.Errorf("a run without accepted events has CPU per event %v", none.PerEvent)
	}
	rep := sampleReport()
	rep.CPU, rep.Redis = c, redisWork(nil, map[string]cmdStat{"fcall": {2000, 20000}}, 1000, 0)
	rep.Redis.setRoundTrips(960, 950)
	var text, page bytes.Buffer
	PrintSummary(&text, rep)
	if err := RenderHTML(&page, rep); err != nil {
		t.Fatal(err)
	}
	for _, out := range []string{text.String(), html.UnescapeString(page.String())} {
		for _, line := range []string{"svc 10.00, redis 5.00, clickhouse 2.50, generator 3.00, svc+redis+clickhouse 17.50", "20.00 µs in 2.00 commands",
			"0.96 reads and 0.95 writes a request"} {
			if !strings.Contains(out, line) {
				t.Errorf("report lacks %q:\n%s", line, out)
			}
		}
	}
}

// Redis per request from INFO commandstats deltas: the top-level commands' usec (FCALL
// includes the commands its function ran, so those count once), summed over what
// changed, divided by the requests; the bench's own INFO is left out.
func TestRedisWorkFromCommandStats(t *testing.T) {
	before := parseCommandStats("# Commandstats\r\n" +
		"cmdstat_fcall:calls=100,usec=1000,usec_per_call=10.00,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_hget:calls=500,usec=400,usec_per_call=0.80,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_hset:calls=100,usec=100,usec_per_call=1.00,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_info:calls=3,usec=90,usec_per_call=30.00,rejected_calls=0,failed_calls=0\r\n")
	after := parseCommandStats("# Commandstats\r\n" +
		"cmdstat_fcall:calls=2100,usec=21000,usec_per_call=10.00,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_evalsha:calls=1100,usec=5000,usec_per_call=4.55,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_hget:calls=8500,usec=6800,usec_per_call=0.80,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_hset:calls=8100,usec=6500,usec_per_call=0.80,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_client|setinfo:calls=10,usec=10,usec_per_call=1.00,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_info:calls=9,usec=270,usec_per_call=30.00,rejected_calls=0,failed_calls=0\r\n")
	if got := after["client|setinfo"]; got != (cmdStat{10, 10}) {
		t.Fatalf("parsed client|setinfo as %+v", got)
	}
	w := redisWork(before, after, 1000, 0)
	// fcall 20,000 + evalsha 5,000 + client|setinfo 10 usec over 1,000 requests.
	if w.UsecPerRequest != 25.01 || w.CallsPerRequest != 3.11 {
		t.Errorf("%v µs in %v calls per request, want 25.01 in 3.11", w.UsecPerRequest, w.CallsPerRequest)
	}
	if h := w.ByCommand["hget"]; !h.Nested || h.Calls != 8 || h.Usec != 6.4 {
		t.Errorf("hget %+v, want nested, 8 calls, 6.4 µs per request", h)
	}
	if _, ok := w.ByCommand["info"]; ok {
		t.Error("the bench's own INFO counted")
	}
	if top := w.TopCommands(); len(top) != 4 || !strings.HasPrefix(top[0], "fcall 20.00 µs × 2.00") {
		t.Errorf("top commands %q", top)
	}
	if redisWork(before, after, 0, 0) != nil {
		t.Error("figures per request without requests")
	}
	// Round trips: INFO stats' reads and writes over the requests; none when the
	// statistics went back (reset during the run).
	if w.setRoundTrips(2500, 2400); w.RoundTrips() != "2.50 reads and 2.40 writes a request" {
		t.Errorf("round trips %q", w.RoundTrips())
	}
	r := redisWork(before, after, 1000, 0)
	if r.setRoundTrips(-5, 10); r.RoundTrips() != "" {
		t.Errorf("round trips %q after a reset", r.RoundTrips())
	}
	if got := infoInt("# Stats\r\ntotal_reads_processed:1136006\r\ntotal_writes_processed:1135289\r\n", "total_writes_processed"); got != 1135289 {
		t.Errorf("total_writes_processed read as %d", got)
	}
	// svc's own HSETs (the stored answers: 1,000 here) count at HSET's average: 8,000
	// calls took 6,400 usec, so 800 usec more.
	if w := redisWork(before, after, 1000, 1000); w.UsecPerRequest != 25.81 || w.CallsPerRequest != 4.11 {
		t.Errorf("with the stored answers' HSETs: %v µs in %v calls per request, want 25.81 in 4.11", w.UsecPerRequest, w.CallsPerRequest)
	}
}

// The flood's arithmetic: what the answers say the rejections table must count, the
// row bound per pixel and minute, the verdicts, and the summary's lines.
func TestFloodSummary(t *testing.T) {
	errs := map[string]int64{"422 invalid_request": 300, "429 rate_limited": 7, "409 idempotency_key_in_use": 2,
		"503 service_unavailable": 5, "timeout": 1}
	if got := answered(errs, 422); got != 300 {
		t.Errorf("answered 422 = %d", got)
	}
	if got := expectedRejections(errs, 50); got != 300*50+7+2 {
		t.Errorf("expected rejections = %d, want %d (503s and timeouts are not recorded)", got, 300*50+9)
	}
	if got := rowBound(100, time.Second, 3); got != 100+60*3 {
		t.Errorf("row bound = %d, want 280", got)
	}
	if got := rowBound(100, 7*time.Second, 1); got != 109 { // 60/7 flushes, rounded up
		t.Errorf("row bound at 7 s flushes = %d, want 109", got)
	}
	g := RejectionsGrowth{Cap: 100, Kinds: 3, MaxSamples: 100, MaxRows: 280, Rejected: 15009, Expected: 15009}
	if g.judge(time.Second); !g.Exact || !g.Bounded || g.Bound != 280 {
		t.Errorf("at the bound: %+v", g)
	}
	g.MaxSamples, g.Rejected = 101, 15008
	if g.judge(time.Second); g.Exact || g.Bounded {
		t.Errorf("a sample past the cap and a lost rejection: %+v", g)
	}

	alone := NormalFigures{OfferedEvents: 100000, EventsPerS: 100000, OKShare: 1, P99: 20}
	if ok, why := holds(alone, NormalFigures{EventsPerS: 99500, OKShare: 1, P99: 29.9}, 1.5); !ok {
		t.Errorf("within 1%% and 1.5×: %s", why)
	}
	for _, with := range []NormalFigures{{EventsPerS: 98000, OKShare: 1, P99: 20}, {EventsPerS: 100000, OKShare: 1, P99: 30.1},
		{EventsPerS: 100000, OKShare: 0.999, P99: 20}} {
		if ok, why := holds(alone, with, 1.5); ok || !strings.HasPrefix(why, "normal traffic did not hold") {
			t.Errorf("%+v held: %s", with, why)
		}
	}
	rep := &Report{Rate: 2000, Requests: Requests{Scheduled: 100, OK: 99}, Events: EventCounts{PerSecond: 99000},
		Latency: Summary{P99: 12.5}}
	if nf := normalFigures(rep, 50); nf.OfferedEvents != 100000 || nf.OKShare != 0.99 || nf.P99 != 12.5 {
		t.Errorf("normal figures %+v", nf)
	}

	yes := true
	rep.Flood = &FloodResult{OfferedRate: 10000, OfferedEvents: 500000, Requests: Requests{Scheduled: 300000},
		ByCode: map[string]int64{"422 invalid_request": 300000}, TakenPerSecond: 9990.5, Alone: &alone, Holds: &yes,
		Verdict: "normal traffic held: …", Table: g}
	var buf bytes.Buffer
	PrintSummary(&buf, rep)
	for _, want := range []string{"normal alone", "normal with flood", "verdict", "9990.5 req/s taken (answered 422)",
		"422 invalid_request: 300000", "rejected (exact)", "15008 counted, 15009 expected", "bounded"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, buf.String())
		}
	}
}

// The flood's defaults are the scenario: 100k valid events/s beside 500k
// invalid ones (batches of 50); a repeated flag (BENCH_FLOOD_ARGS) wins.
func TestFloodFlags(t *testing.T) {
	fs := flag.NewFlagSet("flood", flag.ContinueOnError)
	var ff floodFlags
	ff.register(fs)
	f, err := parseIngestFlags(fs, "flood", []string{"-rate", "2000", "-flood-rate", "10000", "-rate", "40"})
	if err != nil {
		t.Fatal(err)
	}
	if f.rate != 40 || ff.rate != 10000 || f.batch != 50 || !ff.baseline || ff.validate() != nil {
		t.Fatalf("rate %v flood %v batch %d baseline %v: %v", f.rate, ff.rate, f.batch, ff.baseline, ff.validate())
	}
	fs = flag.NewFlagSet("flood", flag.ContinueOnError)
	ff = floodFlags{}
	ff.register(fs)
	if f, err = parseIngestFlags(fs, "flood", nil); err != nil || f.rate*float64(f.batch) != 100000 || ff.rate*float64(f.batch) != 500000 {
		t.Fatalf("defaults: %v events/s normal, %v flood (%v)", f.rate*float64(f.batch), ff.rate*float64(f.batch), err)
	}
	for src, ok := range map[string]bool{"127.0.0.2": true, "::1": true, "localhost": false, "127.0.0": false} {
		ff.source = src
		if err := ff.validate(); (err == nil) != ok {
			t.Errorf("-flood-source %q: %v", src, err)
		}
	}
}

// What Redis held at a run's start: INFO's used_memory and DBSIZE over the masters,
// printed with the Redis figures.
func TestRedisHeld(t *testing.T) {
	if got := infoInt("# Memory\r\nused_memory:2297436512\r\nused_memory_human:2.14G\r\n", "used_memory"); got != 2297436512 {
		t.Fatalf("infoInt = %d", got)
	}
	if got := infoInt("# Memory\r\nused_memory_human:2.14G\r\n", "used_memory"); got != 0 {
		t.Fatalf("infoInt of an absent field = %d", got)
	}
	w := &RedisWork{HeldBytes: 2297436512, HeldKeys: 624875}
	if got := w.Held(); got != "2.30 GB in 624,875 keys" {
		t.Fatalf("Held = %q", got)
	}
	if got := (&RedisWork{}).Held(); got != "" {
		t.Fatalf("Held unknown = %q", got)
	}
	for n, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", 1234567: "1,234,567", -1234: "-1,234"} {
		if got := thousands(n); got != want {
			t.Errorf("thousands(%d) = %q, want %q", n, got, want)
		}
	}

	rdb := svctest.Redis(t)
	ctx := context.Background()
	key := fmt.Sprintf("svc:test:bench-held:%d", time.Now().UnixNano())
	if err := rdb.Set(ctx, key, strings.Repeat("x", 1<<20), time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.Del(context.Background(), key) })
	bytes, keys, err := redisHeld(ctx, rdb)
	if err != nil {
		t.Fatal(err)
	}
	if keys < 1 || bytes < 1<<20 {
		t.Fatalf("redisHeld = %d B in %d keys with a 1 MiB key in it", bytes, keys)
	}
}
