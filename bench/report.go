package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// Report is one run's result: what was asked, what the machine was, and what came
// out. It is written as JSON (the input of `svc bench compare`) and as HTML.
type Report struct {
	Scenario string         `json:"scenario"`
	Title    string         `json:"title"`
	Started  time.Time      `json:"started"`
	Command  string         `json:"command"`
	Target   string         `json:"target"`
	Params   map[string]any `json:"params"`
	Machine  Machine        `json:"machine"`

	Rate         float64     `json:"target_rate"`   // scheduled requests per second
	Duration     float64     `json:"duration_s"`    // scheduled seconds
	Elapsed      float64     `json:"elapsed_s"`     // from start to the last answer
	AchievedRate float64     `json:"achieved_rate"` // completed requests per elapsed second
	OKRate       float64     `json:"ok_rate"`       // successful requests per elapsed second
	Requests     Requests    `json:"requests"`
	Events       EventCounts `json:"events"`
	// Latency is measured from each request's due time (includes waiting for a free
	// worker); Service from its actual send.
	Latency      Summary           `json:"latency"`
	Service      Summary           `json:"service_time"`
	Distribution []PercentilePoint `json:"distribution"`
	Errors       map[string]int64  `json:"errors"`
	Timeline     []Point           `json:"timeline"`

	Freshness *Freshness `json:"freshness,omitempty"`
	// Reads splits a read run by endpoint.
	Reads map[string]Summary `json:"reads,omitempty"`
	// Samples are the target's /metrics sampled during the run.
	Samples []Sample `json:"samples,omitempty"`
	CPU     *CPU     `json:"cpu,omitempty"`
	// CaughtUp is the CPU until the consumer and ClickHouse's merges caught up after the
	// load (-catch-up; catchup.go).
	CaughtUp *CaughtUp `json:"caught_up,omitempty"`
	// Redis is what Redis's commands cost per request (INFO commandstats).
	Redis *RedisWork `json:"redis,omitempty"`
	// ClickHouse is what ClickHouse's logs say of its INSERTs and merges (chwork.go).
	ClickHouse *ClickHouseWork `json:"clickhouse,omitempty"`
	Soak       *Soak           `json:"soak,omitempty"`
	// Flood is the flood scenario's invalid traffic and what it left (flood.go).
	Flood *FloodResult `json:"flood,omitempty"`
	// External is the load generator's own report when it was not svc bench (vegeta).
	External *External `json:"external,omitempty"`
	Notes    []string  `json:"notes,omitempty"`
}

// Requests counts requests by what became of them.
type Requests struct {
	Scheduled int64 `json:"scheduled"`
	Completed int64 `json:"completed"`
	OK        int64 `json:"ok"`
	Errors    int64 `json:"errors"`
	Late      int64 `json:"late"`   // sent later than the late threshold after being due
	Unsent    int64 `json:"unsent"` // never sent (no worker free before the give-up time)
}

// EventCounts counts events (ingest and direct).
type EventCounts struct {
	Sent      int64   `json:"sent"`
	Accepted  int64   `json:"accepted"`
	Rejected  int64   `json:"rejected"`
	PerSecond float64 `json:"accepted_per_s"`
	// PerCore is accepted events per second per core of the machine.
	PerCore float64 `json:"accepted_per_s_per_core"`
	// PerTargetCPU is accepted events per CPU-second the target process used.
	PerTargetCPU float64 `json:"accepted_per_target_cpu_s,omitempty"`
}

// Freshness is the end-to-end result: time from a probe's 202 until its marker event
// was visible.
type Freshness struct {
	Via          string            `json:"via"` // "api" (GET /pixel-rollups) or "clickhouse"
	PollEvery    float64           `json:"poll_every_ms"`
	Probes       int64             `json:"probes"`
	Seen         int64             `json:"seen"`
	Missing      int64             `json:"missing"`
	Latency      Summary           `json:"latency"`
	Distribution []PercentilePoint `json:"distribution"`
	Timeline     []FreshPoint      `json:"timeline"`
}

// FreshPoint is one probe.
type FreshPoint struct {
	T  float64 `json:"t"`  // seconds since the start, at the 202
	Ms float64 `json:"ms"` // -1 when never seen
}

// Sample is the target's state at one moment.
type Sample struct {
	T          float64 `json:"t"`
	HeapInuse  float64 `json:"heap_inuse_bytes"`
	Goroutines float64 `json:"goroutines"`
	RSS        float64 `json:"rss_bytes"`
	CPUSeconds float64 `json:"cpu_seconds"`
	// Conns is the target's open client connections (svc_http_open_connections), 0 when
	// it does not say.
	Conns float64 `json:"open_connections,omitempty"`
}

// Soak is the verdict on memory and goroutines over a long run.
type Soak struct {
	HeapFirstMB, HeapLastMB float64 // floor (smallest) of heap in use over the second and last fifth
	HeapGrowthPct           float64
	GoroutinesFirst         float64
	GoroutinesLast          float64
	GoroutinesMax           float64
	Flat                    bool
	Verdict                 string
}

// Machine says where a run happened.
type Machine struct {
	Host      string   `json:"host"`
	Cores     int      `json:"cores"`
	CPUModel  string   `json:"cpu_model"`
	MemoryGiB float64  `json:"memory_gib"`
	GoVersion string   `json:"go_version"`
	Load      []string `json:"loadavg_start"`
	Storage   *Storage `json:"storage,omitempty"` // the working directory's filesystem (storage.go)
	// Probe is the host probe at the run's start, ns/op (probe.go): compare runs at like probes.
	Probe float64 `json:"probe_ns_op,omitempty"`
	Note  string  `json:"note,omitempty"`
}

// CPU is how the machine's cores were used during the run, in cores (CPU-seconds per
// second), by process.
type CPU struct {
	Busy  float64            `json:"busy_cores"`
	Procs map[string]float64 `json:"by_process_cores"`
	Span  float64            `json:"span_s"` // seconds between the two /proc readings
	// PerEvent is CPU time per accepted event, µs, by process (svc, redis, clickhouse,
	// generator) and for the pipeline without the generator (svc+redis+clickhouse);
	// set by SetPerEvent when the run accepted events.
	PerEvent map[string]float64 `json:"per_event_us,omitempty"`
}

// Pipeline is the PerEvent entry of svc, Redis and ClickHouse together.
const Pipeline = "svc+redis+clickhouse"

// perEventOrder is the order PerEvent is printed in.
var perEventOrder = []string{"svc", "redis", "clickhouse", "generator", Pipeline}

// SetPerEvent sets c.PerEvent from the cores each process used over c.Span and the
// events accepted: svc is the target's processes, generator the load generator's (svc
// bench, vegeta).
func (c *CPU) SetPerEvent(accepted int64) {
	if c == nil || accepted <= 0 || c.Span <= 0 {
		return
	}
	us := func(cores float64) float64 { return round(cores*c.Span*1e6/float64(accepted), 3) }
	p := c.Procs
	c.PerEvent = map[string]float64{
		"svc":        us(p["svc (target)"]),
		"redis":      us(p["redis"]),
		"clickhouse": us(p["clickhouse"]),
		"generator":  us(p["bench"] + p["vegeta"]),
		Pipeline:     us(p["svc (target)"] + p["redis"] + p["clickhouse"]),
	}
}

// PerEventLine is PerEvent as one line: "svc 1.20, redis 0.40, …".
func (c *CPU) PerEventLine() string {
	var parts []string
	for _, k := range perEventOrder {
		if v, ok := c.PerEvent[k]; ok {
			parts = append(parts, fmt.Sprintf("%s %.2f", k, v))
		}
	}
	return strings.Join(parts, ", ")
}

// Write writes rep as JSON and HTML at base+".json" and base+".html", creating the
// directory.
func (rep *Report) Write(base string) error {
	if err := os.MkdirAll(filepath.Dir(base), 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(base+".json", append(b, '\n'), 0o644); err != nil {
		return err
	}
	f, err := os.Create(base + ".html")
	if err != nil {
		return err
	}
	if err := RenderHTML(f, rep); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// ReadReport reads a JSON report.
func ReadReport(path string) (*Report, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r Report
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &r, nil
}

// PrintSummary writes the summary table.
func PrintSummary(w io.Writer, rep *Report) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "%s\t%s\n", "scenario", rep.Title)
	fmt.Fprintf(tw, "target rate\t%.0f req/s for %.0fs\n", rep.Rate, rep.Duration)
	if p := rep.Machine.Probe; p > 0 {
		fmt.Fprintf(tw, "host probe\t%.1f ns/op (BenchmarkPackClean202's work before the load: compare runs at like probes)\n", p)
	}
	fmt.Fprintf(tw, "achieved rate\t%.1f req/s (%.1f ok/s) over %.1fs\n", rep.AchievedRate, rep.OKRate, rep.Elapsed)
	q := rep.Requests
	fmt.Fprintf(tw, "requests\t%d scheduled, %d ok, %d errors, %d late, %d unsent\n", q.Scheduled, q.OK, q.Errors, q.Late, q.Unsent)
	if rep.Events.Sent > 0 {
		e := rep.Events
		fmt.Fprintf(tw, "events\t%d sent, %d accepted, %d rejected\n", e.Sent, e.Accepted, e.Rejected)
		fmt.Fprintf(tw, "events/s\t%.0f accepted/s (%.0f per core", e.PerSecond, e.PerCore)
		if e.PerTargetCPU > 0 {
			fmt.Fprintf(tw, ", %.0f per target CPU-second", e.PerTargetCPU)
		}
		fmt.Fprintln(tw, ")")
	}
	l := rep.Latency
	fmt.Fprintf(tw, "latency (ms, from due)\tp50 %s  p90 %s  p99 %s  p99.9 %s  max %s\n", ms(l.P50), ms(l.P90), ms(l.P99), ms(l.P999), ms(l.Max))
	s := rep.Service
	fmt.Fprintf(tw, "service time (ms)\tp50 %s  p90 %s  p99 %s  p99.9 %s  max %s\n", ms(s.P50), ms(s.P90), ms(s.P99), ms(s.P999), ms(s.Max))
	for _, name := range sortedKeys(rep.Reads) {
		r := rep.Reads[name]
		fmt.Fprintf(tw, "  %s (ms)\tn %d  p50 %s  p90 %s  p99 %s  p99.9 %s  max %s\n", name, r.Count, ms(r.P50), ms(r.P90), ms(r.P99), ms(r.P999), ms(r.Max))
	}
	if f := rep.Freshness; f != nil {
		fmt.Fprintf(tw, "freshness (ms, via %s)\t%d probes, %d seen, %d missing; p50 %s  p90 %s  p99 %s  max %s\n",
			f.Via, f.Probes, f.Seen, f.Missing, ms(f.Latency.P50), ms(f.Latency.P90), ms(f.Latency.P99), ms(f.Latency.Max))
	}
	if len(rep.Errors) == 0 {
		fmt.Fprintf(tw, "errors\tnone\n")
	}
	for _, k := range sortedKeys(rep.Errors) {
		fmt.Fprintf(tw, "error\t%s: %d\n", k, rep.Errors[k])
	}
	if c := rep.CPU; c != nil {
		var parts []string
		for _, k := range sortedKeys(c.Procs) {
			parts = append(parts, fmt.Sprintf("%s %.2f", k, c.Procs[k]))
		}
		fmt.Fprintf(tw, "cpu (cores)\tbusy %.2f of %d: %s\n", c.Busy, rep.Machine.Cores, strings.Join(parts, ", "))
		if c.PerEvent != nil {
			fmt.Fprintf(tw, "cpu per event (µs)\t%s\n", c.PerEventLine())
		}
	}
	if s := rep.CaughtUp; s != nil && s.CPU != nil && s.CPU.PerEvent != nil {
		fmt.Fprintf(tw, "cpu per event, caught up\t%s\n", s.CaughtUpLine())
	}
	if r := rep.Redis; r != nil {
		over := "" // with -catch-up, Redis's commands are counted until the pipeline caught up
		if rep.CaughtUp != nil {
			over = ", the load and its catch-up"
		}
		fmt.Fprintf(tw, "redis per request\t%.2f µs in %.2f commands (commandstats%s); top: %s\n",
			r.UsecPerRequest, r.CallsPerRequest, over, strings.Join(r.TopCommands(), ", "))
		if h := r.Held(); h != "" {
			fmt.Fprintf(tw, "redis held\t%s at the start (its commands' times grow with it)\n", h)
		}
		if t := r.RoundTrips(); t != "" {
			fmt.Fprintf(tw, "redis round trips\t%s (INFO stats; each a system call commandstats does not count)\n", t)
		}
	}
	if w := rep.ClickHouse; w != nil {
		fmt.Fprintf(tw, "clickhouse's work\t%s\n", w.Line(rep.Events.Accepted))
	}
	if s := rep.Soak; s != nil {
		fmt.Fprintf(tw, "soak\t%s\n", s.Verdict)
	}
	if f := rep.Flood; f != nil {
		printFlood(tw, f)
	}
	if x := rep.External; x != nil {
		fmt.Fprintf(tw, "%s's own report\t%s: %d requests, %.1f req/s sent, %.1f ok/s, success %.2f%%, status %s\n",
			x.Tool, x.Version, x.Requests, x.Rate, x.Throughput, 100*x.Success, statusCodes(x.StatusCodes))
		l := x.Latency
		fmt.Fprintf(tw, "%s latency (ms, from send)\tp50 %s  p90 %s  p95 %s  p99 %s  max %s\n", x.Tool, ms(l.P50), ms(l.P90), ms(x.P95), ms(l.P99), ms(l.Max))
		for _, e := range x.Errors {
			fmt.Fprintf(tw, "%s error\t%s\n", x.Tool, e)
		}
	}
	for _, n := range rep.Notes {
		fmt.Fprintf(tw, "note\t%s\n", n)
	}
	tw.Flush()
}

// statusCodes renders {"202": 10} as "202×10".
func statusCodes(m map[string]int64) string {
	var parts []string
	for _, k := range sortedKeys(m) {
		parts = append(parts, fmt.Sprintf("%s×%d", k, m[k]))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, " ")
}

func ms(v float64) string {
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.2f", v)
}

// Metric is one figure compared between two reports.
type Metric struct {
	Name   string
	A, B   float64
	Better string // "higher" or "lower"
}

// Ratio is B/A (NaN when A is zero).
func (m Metric) Ratio() float64 {
	if m.A == 0 {
		if m.B == 0 {
			return 1
		}
		return math.NaN()
	}
	return m.B / m.A
}

// CompareMetrics lists the figures `svc bench compare` prints for reports a and b.
func CompareMetrics(a, b *Report) []Metric {
	ms := []Metric{
		{"achieved rate (req/s)", a.AchievedRate, b.AchievedRate, "higher"},
		{"ok rate (req/s)", a.OKRate, b.OKRate, "higher"},
		{"events accepted/s", a.Events.PerSecond, b.Events.PerSecond, "higher"},
		{"latency p50 (ms)", a.Latency.P50, b.Latency.P50, "lower"},
		{"latency p90 (ms)", a.Latency.P90, b.Latency.P90, "lower"},
		{"latency p99 (ms)", a.Latency.P99, b.Latency.P99, "lower"},
		{"latency p99.9 (ms)", a.Latency.P999, b.Latency.P999, "lower"},
		{"latency max (ms)", a.Latency.Max, b.Latency.Max, "lower"},
		{"errors", float64(a.Requests.Errors), float64(b.Requests.Errors), "lower"},
		{"late", float64(a.Requests.Late), float64(b.Requests.Late), "lower"},
		{"unsent", float64(a.Requests.Unsent), float64(b.Requests.Unsent), "lower"},
	}
	ms = append(ms,
		Metric{"service time p50 (ms)", a.Service.P50, b.Service.P50, "lower"},
		Metric{"service time p99 (ms)", a.Service.P99, b.Service.P99, "lower"})
	if x := b.External; x != nil && a.External == nil {
		// B's tool measured from each send: set against A's service time.
		ms = append(ms,
			Metric{"p50 from send (A service time, B " + x.Tool + "'s own)", a.Service.P50, x.Latency.P50, "lower"},
			Metric{"p99 from send (A service time, B " + x.Tool + "'s own)", a.Service.P99, x.Latency.P99, "lower"},
			Metric{"ok/s (B " + x.Tool + "'s own throughput)", a.OKRate, x.Throughput, "higher"})
	}
	if a.Freshness != nil && b.Freshness != nil {
		ms = append(ms,
			Metric{"freshness p50 (ms)", a.Freshness.Latency.P50, b.Freshness.Latency.P50, "lower"},
			Metric{"freshness p99 (ms)", a.Freshness.Latency.P99, b.Freshness.Latency.P99, "lower"})
	}
	if a.CPU != nil && b.CPU != nil {
		ms = append(ms, Metric{"machine busy (cores)", a.CPU.Busy, b.CPU.Busy, "lower"})
		if a.CPU.PerEvent != nil && b.CPU.PerEvent != nil {
			ms = append(ms, Metric{"CPU per event, " + Pipeline + " (µs)", a.CPU.PerEvent[Pipeline], b.CPU.PerEvent[Pipeline], "lower"})
		}
	}
	if a.Redis != nil && b.Redis != nil {
		ms = append(ms, Metric{"Redis per request (µs, commandstats)", a.Redis.UsecPerRequest, b.Redis.UsecPerRequest, "lower"})
	}
	if a.Machine.Probe > 0 && b.Machine.Probe > 0 { // the host's own speed: B/A far from 1, the runs do not compare
		ms = append(ms, Metric{"host probe (ns/op)", a.Machine.Probe, b.Machine.Probe, "lower"})
	}
	return ms
}

// PrintCompare writes the comparison table: each figure of A and B and B/A.
func PrintCompare(w io.Writer, a, b *Report, nameA, nameB string) {
	fmt.Fprintf(w, "A: %s (%s, %.0f req/s)\nB: %s (%s, %.0f req/s)\n\n", nameA, a.Title, a.Rate, nameB, b.Title, b.Rate)
	printMetrics(w, CompareMetrics(a, b))
}

// printMetrics writes the table of figures: each figure's A, B and B/A.
func printMetrics(w io.Writer, ms []Metric) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "figure\tA\tB\tB/A\t\n")
	for _, m := range ms {
		r := m.Ratio()
		rs := "n/a"
		if !math.IsNaN(r) {
			rs = fmt.Sprintf("%.2fx", r)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t\n", m.Name, num(m.A), num(m.B), rs)
	}
	tw.Flush()
}

// PrintCompareRuns writes the comparison of several runs of A and of B (the same two
// scenarios repeated, interleaved): each figure's median over A's runs and over B's, and
// B/A of the medians, then every run's latency p99. One run's p99 on two shared cores
// moves by a third from run to run (a few slow seconds decide it), so the median of
// several is the figure to set against a target.
func PrintCompareRuns(w io.Writer, as, bs []*Report, namesA, namesB []string) {
	fmt.Fprintf(w, "A: %d runs (%s, %.0f req/s)\nB: %d runs (%s, %.0f req/s)\nmedians over the runs\n\n",
		len(as), as[0].Title, as[0].Rate, len(bs), bs[0].Title, bs[0].Rate)
	printMetrics(w, CompareRunMetrics(as, bs))
	printRatioInterval(w, as, bs)
	fmt.Fprintln(w, "\nlatency p99 (ms) of each run:")
	for i, a := range as {
		fmt.Fprintf(w, "  A %s %s\n", num(a.Latency.P99), filepath.Base(namesA[i]))
	}
	for i, b := range bs {
		fmt.Fprintf(w, "  B %s %s\n", num(b.Latency.P99), filepath.Base(namesB[i]))
	}
}

// CompareRunMetrics lists CompareMetrics' figures, each A the median over as and each B
// the median over bs (a figure missing from a run is left out of its median).
func CompareRunMetrics(as, bs []*Report) []Metric {
	valuesA, valuesB := map[string][]float64{}, map[string][]float64{}
	for _, a := range as {
		for _, m := range CompareMetrics(a, bs[0]) {
			valuesA[m.Name] = append(valuesA[m.Name], m.A)
		}
	}
	for _, b := range bs {
		for _, m := range CompareMetrics(as[0], b) {
			valuesB[m.Name] = append(valuesB[m.Name], m.B)
		}
	}
	ms := CompareMetrics(as[0], bs[0])
	for i := range ms {
		ms[i].A, ms[i].B = median(valuesA[ms[i].Name]), median(valuesB[ms[i].Name])
	}
	return ms
}

// median is the middle value of vs (the mean of the two middle ones for an even count).
func median(vs []float64) float64 {
	if len(vs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(vs)
	slices.Sort(s)
	if n := len(s); n%2 == 0 {
		return (s[n/2-1] + s[n/2]) / 2
	}
	return s[len(s)/2]
}

func num(v float64) string {
	if v == math.Trunc(v) && math.Abs(v) < 1e12 {
		return fmt.Sprintf("%.0f", v)
	}
	if math.Abs(v) >= 100 {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.2f", v)
}
