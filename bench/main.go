// Package bench is `svc bench`: an open-model load generator for the service, with
// end-to-end freshness probes, read and soak scenarios, a direct-to-ClickHouse baseline,
// and JSON, text and HTML (inline SVG) reports.
//
//	svc bench ingest  [flags]   POST /events at a fixed arrival rate
//	svc bench e2e     [flags]   ingest load plus freshness probes (202 → visible in rollups)
//	svc bench read    [flags]   GET /pixel-rollups (90 days) and GET /plans/{id}/actuals mix
//	svc bench soak    [flags]   ingest for a long time, sampling heap and goroutines
//	svc bench flood   [flags]   normal ingest beside a flood of invalid events; the rejections table's growth
//	svc bench vegeta  [flags]   the ingest scenario driven by vegeta (a tool we did not write)
//	svc bench direct  [flags]   the same batches straight into ClickHouse over HTTP
//	svc bench zones   [flags]   the cost of local-day rollups (15-minute buckets), on ClickHouse
//	svc bench compare A.json B.json   each figure of A and B, and B/A (lists of runs: medians)
//	svc bench report A.json   summary again, HTML rewritten
//
// Load is open-model: request i is due at start + i/rate whatever the target does, and
// latency is measured from that due time (see Runner), so a stalled target shows up as
// latency rather than as a slower sender.
package bench

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/url"
	"os"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"svc/lib/process"
	"svc/lib/settings"
)

// Main runs `svc bench <scenario> [flags]`.
func Main(ctx context.Context, args []string) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "help" || args[0] == "--help" {
		usage(os.Stderr)
		return errors.New("a scenario is required")
	}
	switch args[0] {
	case "ingest", "soak", "e2e":
		return ingestMain(ctx, args[0], args[1:])
	case "vegeta":
		return vegetaMain(ctx, args[1:])
	case "flood":
		return floodMain(ctx, args[1:])
	case "direct":
		return directMain(ctx, args[1:])
	case "read":
		return readMain(ctx, args[1:])
	case "zones":
		return zonesMain(ctx, args[1:])
	case "compare":
		return compareMain(args[1:])
	case "report":
		return reportMain(args[1:])
	}
	usage(os.Stderr)
	return fmt.Errorf("unknown scenario %q", args[0])
}

func usage(w io.Writer) {
	fmt.Fprint(w, `usage: svc bench <scenario> [flags]   (svc bench <scenario> -h for its flags)

scenarios:
  ingest    POST /events at a fixed arrival rate
  e2e       ingest load plus freshness probes (time from 202 to visible in GET /pixel-rollups)
  read      GET /pixel-rollups over 90 days and GET /plans/{id}/actuals (500 lines, 30 days)
  soak      ingest for a long time, sampling the target's heap and goroutines
  flood     normal ingest (100k events/s) beside a flood of invalid events (500k/s): does it hold, and the rejections table's growth
  vegeta    the ingest scenario (same flags and requests) driven by vegeta, as a second opinion
  direct    the same batches inserted straight into ClickHouse over HTTP (one INSERT per batch)
  zones     what local-day rollups cost: rows per pixel-day, 90-day reads per zone, flush CPU (ClickHouse only)
  compare   A.json B.json: the figures of two reports and their ratios; A1.json,A2.json,… B1.json,…: the medians of several runs
  report    A.json: print the summary again and rewrite A.html (a soak is judged again)
`)
}

// common are the flags every load scenario has.
type common struct {
	target       string
	metrics      string
	redisURL     string
	redisCluster string
	rate         float64
	duration     time.Duration
	workers      int
	late         time.Duration
	drain        time.Duration
	timeout      time.Duration
	out          string
	note         string
	quiet        bool
	sample       time.Duration
	cpuProfile   string
	// catchUp, when its limit is set, is what the run waits for after the load before it
	// reads the CPU again for Report.CaughtUp (catchup.go; ingest's -catch-up).
	catchUp catchUp
}

func (c *common) register(fs *flag.FlagSet, rate float64, dur time.Duration) {
	r := settings.New() // the service's settings, for the defaults of the flags
	addr, maddr := r.String("SVC_HTTP_ADDR"), r.String("SVC_METRICS_ADDR")
	murl := "http://" + maddr + "/metrics"
	if maddr == "off" {
		murl = ""
	}
	fs.StringVar(&c.target, "target", "http://"+addr, "base URL of the service (default from SVC_HTTP_ADDR)")
	fs.StringVar(&c.metrics, "metrics", murl, "the target's Prometheus /metrics URL, sampled every -sample (empty: none)")
	fs.StringVar(&c.redisURL, "redis", r.String("SVC_REDIS_URL"), "Redis of the target, where the bench provisions its workspace, pixels and keys")
	fs.StringVar(&c.redisCluster, "redis-cluster", strings.Join(r.List("SVC_REDIS_CLUSTER"), ","), "the target's Redis Cluster, seed host:port list (replaces -redis)")
	fs.Float64Var(&c.rate, "rate", rate, "arrival rate, requests per second")
	fs.DurationVar(&c.duration, "duration", dur, "how long to send")
	fs.IntVar(&c.workers, "workers", 256, "most requests in flight (and connections)")
	fs.DurationVar(&c.late, "late", 10*time.Millisecond, "a request sent later than this after its due time counts as late")
	fs.DurationVar(&c.drain, "drain", 10*time.Second, "after the schedule ends, how long due requests may still be sent")
	fs.DurationVar(&c.timeout, "timeout", 10*time.Second, "per-request timeout")
	fs.StringVar(&c.out, "out", "", "report base path: writes BASE.json and BASE.html (default bench/results/<scenario>-<time>)")
	fs.StringVar(&c.note, "note", envOr("BENCH_NOTE", ""), "what else shared the machine (goes into the report)")
	fs.BoolVar(&c.quiet, "quiet", false, "no live progress line")
	fs.DurationVar(&c.sample, "sample", time.Second, "how often to sample the target's /metrics")
	fs.StringVar(&c.cpuProfile, "cpuprofile", "", "write the generator's own CPU profile over the load to this file (go tool pprof)")
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// redis is the target's Redis as the flags name it.
func (c *common) redis() process.RedisConfig {
	rc := process.RedisConfig{URL: c.redisURL}
	if c.redisCluster != "" {
		rc.Cluster = strings.Split(c.redisCluster, ",")
	}
	return rc
}

func (c *common) outBase(scenario string) string {
	if c.out != "" {
		return c.out
	}
	return "bench/results/" + scenario + "-" + time.Now().Format("20060102-150405")
}

func (c *common) validate() error {
	if c.rate <= 0 {
		return errors.New("-rate must be positive")
	}
	if c.duration <= 0 {
		return errors.New("-duration must be positive")
	}
	if c.workers < 1 {
		return errors.New("-workers must be at least 1")
	}
	if _, err := url.Parse(c.target); err != nil {
		return fmt.Errorf("-target: %w", err)
	}
	return nil
}

// hostClient returns a keep-alive fasthttp client for base's host, with at most conns
// connections.
func hostClient(base string, conns int, timeout time.Duration) (*fasthttp.HostClient, error) {
	u, err := url.Parse(base)
	if err != nil {
		return nil, err
	}
	if u.Scheme != "http" {
		return nil, fmt.Errorf("%s: only http:// targets are supported", base)
	}
	return &fasthttp.HostClient{Addr: u.Host, MaxConns: conns, ReadTimeout: timeout, WriteTimeout: timeout,
		MaxIdleConnDuration: time.Minute, NoDefaultUserAgentHeader: true,
		MaxConnWaitTimeout: timeout, ReadBufferSize: 16 << 10}, nil
}

// dialFrom is a fasthttp dial function whose connections leave from local address source.
func dialFrom(source string, timeout time.Duration) fasthttp.DialFunc {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(source)}, Timeout: timeout}
	return func(addr string) (net.Conn, error) { return d.Dial("tcp", addr) }
}

// doHTTP sends req and turns the answer into an Outcome (OK for 2xx; otherwise the
// problem code when the body carries one).
func doHTTP(hc *fasthttp.HostClient, req *fasthttp.Request, resp *fasthttp.Response, timeout time.Duration) Outcome {
	if err := hc.DoTimeout(req, resp, timeout); err != nil {
		switch {
		case errors.Is(err, fasthttp.ErrTimeout):
			return Outcome{Code: "timeout"}
		case errors.Is(err, fasthttp.ErrNoFreeConns), errors.Is(err, fasthttp.ErrConnPoolStrategyNotImpl):
			return Outcome{Code: "no_free_conn"}
		}
		return Outcome{Code: "conn_error"}
	}
	st := resp.StatusCode()
	if st >= 200 && st < 300 {
		return Outcome{Status: st, OK: true}
	}
	return Outcome{Status: st, Code: problemCode(resp.Body())}
}

// problemCode returns the "code" member of a problem document ("" when absent).
func problemCode(b []byte) string {
	const k = `"code":"`
	i := strings.Index(string(b), k) // no copy: the compiler does not allocate here
	if i < 0 {
		return ""
	}
	rest := b[i+len(k):]
	j := 0
	for j < len(rest) && j < 64 && rest[j] != '"' {
		j++
	}
	return string(rest[:j])
}

// jsonInt returns the integer after `"name":` in b, or -1.
func jsonInt(b []byte, name string) int {
	k := `"` + name + `":`
	i := strings.Index(string(b), k)
	if i < 0 {
		return -1
	}
	n, seen := 0, false
	for _, c := range b[i+len(k):] {
		if c == ' ' && !seen {
			continue
		}
		if c < '0' || c > '9' {
			break
		}
		n, seen = n*10+int(c-'0'), true
	}
	if !seen {
		return -1
	}
	return n
}

// runLoad runs the schedule with do, shows progress, samples the target, and fills rep.
// extra, when set, is appended to the progress line.
func runLoad(ctx context.Context, c *common, rep *Report, do func(w int, i int64) Outcome, extra func() string) {
	start := time.Now().Add(200 * time.Millisecond)
	sched := Schedule{Start: start, Rate: c.rate, Duration: c.duration}
	rec := NewRecorder(start)
	run := &Runner{Schedule: sched, Workers: c.workers, LateAfter: c.late, DrainAfter: c.drain, Do: do, Rec: rec}
	if c.metrics != "" { // a service run (direct has no service)
		SetTargetPIDs(c.target)
	}
	cpu0 := readCPU()
	sampler := StartSampler(c.metrics, c.sample, start)
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case now := <-t.C:
				rec.Tick(now)
				if !c.quiet {
					progress(os.Stderr, rep.Scenario, now.Sub(start), c.duration, run.Started(), rec.Totals(), sampler, extra)
				}
			}
		}
	}()
	stopProfile := startCPUProfile(c.cpuProfile)
	run.Run(ctx)
	end := time.Now()
	stopProfile()
	close(done)
	if !c.quiet {
		fmt.Fprintln(os.Stderr)
	}
	cpu1 := readCPU()
	finishLoad(rep, c, rec, end.Sub(start), cpuBetween(cpu0, cpu1), sampler.Stop())
	if c.catchUp.limit > 0 && c.metrics != "" {
		ok := c.catchUp.wait(ctx)
		cpu2 := readCPU()
		s := &CaughtUp{After: round(cpu2.at.Sub(cpu1.at).Seconds(), 1), Complete: ok, CPU: cpuBetween(cpu0, cpu2)}
		s.CPU.SetPerEvent(rep.Events.Accepted)
		rep.CaughtUp = s
	}
}

// startCPUProfile starts the generator's CPU profile into path (nothing when path is
// empty) and returns what stops it; a profile that cannot start is reported, not fatal.
func startCPUProfile(path string) (stop func()) {
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err == nil {
		if err = pprof.StartCPUProfile(f); err != nil {
			f.Close()
		}
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench: no CPU profile: %v\n", err)
		return func() {}
	}
	return func() { pprof.StopCPUProfile(); f.Close() }
}

// finishLoad fills rep from a finished run: the recorder's figures over elapsed, the
// machine's CPU by process, the target's samples, and the per-core and per-target-CPU
// event rates.
func finishLoad(rep *Report, c *common, rec *Recorder, elapsed time.Duration, cpu *CPU, samples []Sample) {
	rep.Samples = samples
	rep.Rate, rep.Duration = c.rate, c.duration.Seconds()
	rec.Finish(rep, elapsed)
	rep.CPU = cpu
	cpu.SetPerEvent(rep.Events.Accepted)
	cores := rep.Machine.Cores
	if cores > 0 {
		rep.Events.PerCore = round(rep.Events.PerSecond/float64(cores), 1)
	}
	if n := len(rep.Samples); n > 1 {
		cpu := rep.Samples[n-1].CPUSeconds - rep.Samples[0].CPUSeconds
		if cpu > 0 && rep.Events.Accepted > 0 {
			span := rep.Samples[n-1].T - rep.Samples[0].T
			rep.Events.PerTargetCPU = round(rep.Events.PerSecond*span/cpu, 0)
		}
	}
}

func progress(w io.Writer, name string, el, dur time.Duration, started int64, t Totals, s *Sampler, extra func() string) {
	line := fmt.Sprintf("\r[%s] %3.0f/%.0fs sent %d ok %d err %d late %d | last s: %d ok/s %d ev/s p50 %sms p99 %sms max %sms",
		name, el.Seconds(), dur.Seconds(), started, t.OK, t.Err, t.Late, t.Last.OK, t.Last.Events, ms(t.Last.P50), ms(t.Last.P99), ms(t.Last.Max))
	if smp, ok := s.Last(); ok {
		line += fmt.Sprintf(" | heap %.0fMiB gor %.0f", smp.HeapInuse/(1<<20), smp.Goroutines)
	}
	if extra != nil {
		line += " | " + extra()
	}
	fmt.Fprintf(w, "%s\x1b[K", line)
}

// newReport starts a report for scenario.
func newReport(scenario, title string, c *common, args []string) *Report {
	m := DescribeMachine(c.note)
	return &Report{Scenario: scenario, Title: title, Started: time.Now().UTC(),
		Command: "svc bench " + scenario + " " + strings.Join(args, " "), Target: c.target,
		Params: map[string]any{"rate": c.rate, "duration": c.duration.String(), "workers": c.workers,
			"late_after": c.late.String(), "timeout": c.timeout.String()},
		Machine: m, Notes: storageNotes(m.Storage)}
}

// storageNotes is the report's note on a filesystem that costs file creation more
// (Storage), or none.
func storageNotes(s *Storage) []string {
	if s != nil && s.NoJournal {
		return []string{"data on " + s.String() + ": each file created scans the inodes deleted in the last minutes, and ClickHouse 18.16 writes two files a column for every part; its CPU includes that scan (bench/HISTORY.md, stop 52)"}
	}
	return nil
}

// finish prints the summary and writes the reports.
func finish(c *common, rep *Report) error {
	PrintSummary(os.Stdout, rep)
	base := c.outBase(rep.Scenario)
	if err := rep.Write(base); err != nil {
		return err
	}
	fmt.Printf("reports: %s.json %s.html\n", base, base)
	return nil
}

func runID() string { return fmt.Sprintf("%x", rand.Uint32()) }

func compareMain(args []string) error {
	if len(args) != 2 {
		return errors.New("usage: svc bench compare A.json[,A2.json…] B.json[,B2.json…]")
	}
	as, err := readReports(args[0])
	if err != nil {
		return err
	}
	bs, err := readReports(args[1])
	if err != nil {
		return err
	}
	if len(as) == 1 && len(bs) == 1 {
		PrintCompare(os.Stdout, as[0], bs[0], args[0], args[1])
		return nil
	}
	PrintCompareRuns(os.Stdout, as, bs, strings.Split(args[0], ","), strings.Split(args[1], ","))
	return nil
}

// readReports reads the reports of a comma-separated list of paths.
func readReports(list string) ([]*Report, error) {
	var reps []*Report
	for _, path := range strings.Split(list, ",") {
		r, err := ReadReport(path)
		if err != nil {
			return nil, err
		}
		reps = append(reps, r)
	}
	return reps, nil
}

// reportMain re-renders a JSON report: summary table and HTML next to it.
func reportMain(args []string) error {
	if len(args) != 1 || !strings.HasSuffix(args[0], ".json") {
		return errors.New("usage: svc bench report A.json")
	}
	rep, err := ReadReport(args[0])
	if err != nil {
		return err
	}
	if rep.Soak != nil {
		rep.Soak = SoakVerdict(rep.Samples, 20, 20)
	}
	PrintSummary(os.Stdout, rep)
	return rep.Write(strings.TrimSuffix(args[0], ".json"))
}
