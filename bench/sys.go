package bench

import (
	"bufio"
	"bytes"
	"context"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/valyala/fasthttp"
)

// DescribeMachine returns the machine's cores, CPU model, memory and load.
func DescribeMachine(note string) Machine {
	m := Machine{Cores: runtime.NumCPU(), GoVersion: runtime.Version(), Note: note, Probe: HostProbe()}
	if s, ok := DescribeStorage("."); ok {
		m.Storage = &s
	}
	m.Host, _ = os.Hostname()
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "model name") {
				if i := strings.Index(l, ":"); i > 0 {
					m.CPUModel = strings.TrimSpace(l[i+1:])
				}
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kb float64
		for _, l := range strings.Split(string(b), "\n") {
			if f := strings.Fields(l); len(f) >= 2 && f[0] == "MemTotal:" {
				kb, _ = strconv.ParseFloat(f[1], 64)
			}
		}
		m.MemoryGiB = round(kb/(1<<20), 1)
	}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		if f := strings.Fields(string(b)); len(f) >= 3 {
			m.Load = f[:3]
		}
	}
	return m
}

// cpuSnapshot is the machine's busy CPU time and each interesting process's CPU time,
// in seconds, at one moment (from /proc).
type cpuSnapshot struct {
	at    time.Time
	busy  float64
	procs map[string]float64
}

// procNames maps a process's comm to the name reported for it.
var procNames = map[string]string{
	"clickhouse-serv": "clickhouse",
	"clickhouse":      "clickhouse",
	"redis-server":    "redis",
	"svc":             "svc",
	"vegeta":          "vegeta",
}

const clkTck = 100 // USER_HZ on Linux

// targetPIDs are the processes of the service under test: BENCH_TARGET_PIDS (space or
// comma separated) when set, else the process listening on the target's port. Their CPU
// is reported as "svc (target)"; other processes named svc (other engineers' runs) as
// "svc (other)".
var targetPIDs = map[int]bool{}

// SetTargetPIDs records the processes under test (see targetPIDs).
func SetTargetPIDs(target string) {
	targetPIDs = map[int]bool{}
	if v := os.Getenv("BENCH_TARGET_PIDS"); v != "" {
		for _, f := range strings.FieldsFunc(v, func(r rune) bool { return r == ' ' || r == ',' }) {
			if n, err := strconv.Atoi(f); err == nil {
				targetPIDs[n] = true
			}
		}
		return
	}
	if u, err := url.Parse(target); err == nil {
		if port, err := strconv.Atoi(u.Port()); err == nil {
			if pid := listenerPID(port); pid > 0 {
				targetPIDs[pid] = true
			}
		}
	}
}

// listenerPID finds the process with a listening TCP socket on port (0 if none).
func listenerPID(port int) int {
	inodes := map[string]bool{}
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, l := range strings.Split(string(b), "\n")[1:] {
			fs := strings.Fields(l)
			if len(fs) < 10 || fs[3] != "0A" { // LISTEN
				continue
			}
			_, hexPort, ok := strings.Cut(fs[1], ":")
			if p, err := strconv.ParseInt(hexPort, 16, 32); ok && err == nil && int(p) == port {
				inodes["socket:["+fs[9]+"]"] = true
			}
		}
	}
	if len(inodes) == 0 {
		return 0
	}
	dirs, _ := filepath.Glob("/proc/[0-9]*/fd")
	for _, d := range dirs {
		fds, _ := os.ReadDir(d)
		for _, fd := range fds {
			if l, err := os.Readlink(d + "/" + fd.Name()); err == nil && inodes[l] {
				pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(d)))
				return pid
			}
		}
	}
	return 0
}

func readCPU() cpuSnapshot {
	s := cpuSnapshot{at: time.Now(), procs: map[string]float64{}}
	if b, err := os.ReadFile("/proc/stat"); err == nil {
		line, _, _ := strings.Cut(string(b), "\n")
		f := strings.Fields(line)
		if len(f) > 8 && f[0] == "cpu" {
			var busy float64
			for i, v := range f[1:] {
				n, _ := strconv.ParseFloat(v, 64)
				if i == 3 || i == 4 { // idle, iowait
					continue
				}
				if i >= 8 { // guest time is already in user
					break
				}
				busy += n
			}
			s.busy = busy / clkTck
		}
	}
	self := os.Getpid()
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		pid, _ := strconv.Atoi(filepath.Base(d))
		b, err := os.ReadFile(d + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid … utime(14) stime(15)
		open, close := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
		if open < 0 || close < open {
			continue
		}
		comm := string(b[open+1 : close])
		name, ok := procNames[comm]
		switch {
		case pid == self:
			name, ok = "bench", true
		case targetPIDs[pid]:
			name, ok = "svc (target)", true
		case name == "svc":
			name = "svc (other)"
		}
		if !ok {
			continue
		}
		f := strings.Fields(string(b[close+1:]))
		if len(f) < 13 {
			continue
		}
		u, _ := strconv.ParseFloat(f[11], 64)
		st, _ := strconv.ParseFloat(f[12], 64)
		s.procs[name] += (u + st) / clkTck
	}
	return s
}

// cpuBetween returns the cores used between two snapshots. Processes that started or
// ended in between count only from what both snapshots saw; "other" is what the known
// processes do not explain (other engineers' builds and tests on a shared machine).
func cpuBetween(a, b cpuSnapshot) *CPU {
	dt := b.at.Sub(a.at).Seconds()
	if dt <= 0 {
		return nil
	}
	c := &CPU{Busy: round((b.busy-a.busy)/dt, 2), Procs: map[string]float64{}, Span: round(dt, 3)}
	known := 0.0
	for k, v := range b.procs {
		d := (v - a.procs[k]) / dt
		if d < 0 {
			d = 0
		}
		c.Procs[k] = round(d, 2)
		known += d
	}
	c.Procs["other"] = round(max(0, c.Busy-known), 2)
	return c
}

// addChild adds a child process that started and ended between the snapshots (so
// cpuBetween counted it as "other"): cpu is its whole CPU time, over the span of c's
// snapshots, dt seconds.
func (c *CPU) addChild(name string, cpu time.Duration, dt float64) {
	if c == nil || dt <= 0 {
		return
	}
	d := cpu.Seconds() / dt
	c.Procs[name] = round(c.Procs[name]+d, 2)
	c.Procs["other"] = round(max(0, c.Procs["other"]-d), 2)
}

// Sampler samples the target's Prometheus /metrics every Every until stopped.
type Sampler struct {
	URL   string
	Every time.Duration
	start time.Time

	mu      sync.Mutex
	samples []Sample
	stop    chan struct{}
	done    chan struct{}
}

// StartSampler begins sampling url (no-op when url is empty).
func StartSampler(url string, every time.Duration, start time.Time) *Sampler {
	s := &Sampler{URL: url, Every: every, start: start, stop: make(chan struct{}), done: make(chan struct{})}
	if url == "" {
		close(s.done)
		return s
	}
	go func() {
		defer close(s.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			if smp, ok := scrape(url); ok {
				smp.T = round(time.Since(s.start).Seconds(), 2)
				s.mu.Lock()
				s.samples = append(s.samples, smp)
				s.mu.Unlock()
			}
			select {
			case <-s.stop:
				return
			case <-t.C:
			}
		}
	}()
	return s
}

// Stop ends sampling and returns the samples.
func (s *Sampler) Stop() []Sample {
	select {
	case <-s.done:
	default:
		close(s.stop)
		<-s.done
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.samples
}

// Last returns the latest sample.
func (s *Sampler) Last() (Sample, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.samples) == 0 {
		return Sample{}, false
	}
	return s.samples[len(s.samples)-1], true
}

func scrape(url string) (Sample, bool) {
	body, ok := metricsBody(url)
	if !ok {
		return Sample{}, false
	}
	return ParseMetrics(body), true
}

// metricsBody fetches the target's /metrics exposition at url (false: no 200 within 5 s).
func metricsBody(url string) ([]byte, bool) {
	status, body, err := fasthttp.GetTimeout(nil, url, 5*time.Second)
	return body, err == nil && status == 200
}

// ParseMetrics picks the sampled figures out of a Prometheus text exposition.
func ParseMetrics(body []byte) Sample {
	var s Sample
	eachSample(body, func(name, labels string, v float64) {
		if labels != "" {
			return
		}
		switch name {
		case "go_memstats_heap_inuse_bytes":
			s.HeapInuse = v
		case "go_goroutines":
			s.Goroutines = v
		case "process_resident_memory_bytes":
			s.RSS = v
		case "process_cpu_seconds_total":
			s.CPUSeconds = v
		case "svc_http_open_connections":
			s.Conns = v
		}
	})
	return s
}

// eachSample calls fn with the metric name, the labels (between the braces, "" for
// none) and the value of each sample line of a Prometheus text exposition; comments and
// lines whose value does not parse (one with a timestamp) are skipped.
func eachSample(body []byte, fn func(name, labels string, v float64)) {
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		l := sc.Text()
		if len(l) == 0 || l[0] == '#' {
			continue
		}
		i := strings.IndexAny(l, "{ ")
		if i < 0 {
			continue
		}
		name, labels, rest := l[:i], "", l[i:]
		if rest[0] == '{' {
			j := strings.LastIndexByte(rest, '}')
			if j < 0 {
				continue
			}
			labels, rest = rest[1:j], rest[j+1:]
		}
		if v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64); err == nil {
			fn(name, labels, v)
		}
	}
}

// SoakVerdict judges samples: memory is flat when the heap's floor (smallest heap in
// use) over the last fifth of the run is within tolerance of its floor over the second
// fifth, and goroutines are flat when their mean grew by at most goroutineTol between
// the same fifths (the first fifth is warm-up). The server holds one goroutine per open
// client connection, and the load generator opens connections as latency requires (up
// to -workers); when the target reports its open connections, those goroutines are
// left out of the judgement (and the connection counts are shown beside it).
func SoakVerdict(samples []Sample, heapTolPct, goroutineTol float64) *Soak {
	if len(samples) < 10 {
		return &Soak{Verdict: "too few samples to judge (need 10)"}
	}
	n := len(samples) / 5
	mean := func(ss []Sample, f func(Sample) float64) float64 {
		t := 0.0
		for _, s := range ss {
			t += f(s)
		}
		return t / float64(len(ss))
	}
	// The heap is a sawtooth (it grows until the collector runs): its floor, the
	// smallest sample of a window, is what a leak raises.
	floor := func(ss []Sample) float64 {
		m := math.Inf(1)
		for _, s := range ss {
			m = math.Min(m, s.HeapInuse/(1<<20))
		}
		return m
	}
	// The first fifth is warm-up (pools, caches and the heap grow to their working
	// size): the second fifth is compared with the last.
	first, last := samples[n:2*n], samples[len(samples)-n:]
	byConn := false
	for _, s := range samples {
		byConn = byConn || s.Conns > 0
	}
	gor := func(s Sample) float64 { return s.Goroutines }
	if byConn {
		gor = func(s Sample) float64 { return s.Goroutines - s.Conns }
	}
	conns := func(s Sample) float64 { return s.Conns }
	v := &Soak{HeapFirstMB: round(floor(first), 1), HeapLastMB: round(floor(last), 1),
		GoroutinesFirst: round(mean(first, gor), 1), GoroutinesLast: round(mean(last, gor), 1)}
	for _, s := range samples {
		v.GoroutinesMax = max(v.GoroutinesMax, gor(s))
	}
	if v.HeapFirstMB > 0 {
		v.HeapGrowthPct = round(100*(v.HeapLastMB-v.HeapFirstMB)/v.HeapFirstMB, 1)
	}
	heapFlat := v.HeapGrowthPct <= heapTolPct
	gorFlat := v.GoroutinesLast-v.GoroutinesFirst <= goroutineTol
	v.Flat = heapFlat && gorFlat
	word := map[bool]string{true: "flat", false: "GROWING"}
	v.Verdict = "heap in use (floor) " + word[heapFlat] + " (" + ftoa(v.HeapFirstMB) + " MiB → " + ftoa(v.HeapLastMB) + " MiB, " + ftoa(v.HeapGrowthPct) + "%); " +
		"goroutines " + word[gorFlat] + " (" + ftoa(v.GoroutinesFirst) + " → " + ftoa(v.GoroutinesLast) + ", max " + ftoa(v.GoroutinesMax) + ")"
	if byConn {
		v.Verdict += " besides one per open connection (connections " + ftoa(round(mean(first, conns), 1)) +
			" → " + ftoa(round(mean(last, conns), 1)) + ")"
	}
	return v
}

func ftoa(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

// sleepCtx sleeps d or until ctx is done; false when ctx ended.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
