package bench

import (
	"math"
	"sort"
	"sync"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"
)

// Latencies are recorded in microseconds, from 1 µs to 5 minutes, with three
// significant digits (HdrHistogram: every recorded value is within 0.1% of the true
// one).
const (
	histMin    = 1
	histMax    = int64(5 * time.Minute / time.Microsecond)
	histDigits = 3
)

// NewHistogram returns an empty latency histogram in microseconds.
func NewHistogram() *hdr.Histogram { return hdr.New(histMin, histMax, histDigits) }

// RecordDuration records d (clamped to the histogram's range).
func RecordDuration(h *hdr.Histogram, d time.Duration) {
	us := int64(d / time.Microsecond)
	_ = h.RecordValue(min(max(us, histMin), histMax))
}

// Summary is a latency distribution's headline figures, in milliseconds.
type Summary struct {
	Count int64   `json:"count"`
	Mean  float64 `json:"mean_ms"`
	Min   float64 `json:"min_ms"`
	P50   float64 `json:"p50_ms"`
	P90   float64 `json:"p90_ms"`
	P99   float64 `json:"p99_ms"`
	P999  float64 `json:"p99_9_ms"`
	Max   float64 `json:"max_ms"`
}

func usToMs(v int64) float64 { return float64(v) / 1000 }

// Summarize returns h's summary; the zero Summary when h is empty.
func Summarize(h *hdr.Histogram) Summary {
	if h == nil || h.TotalCount() == 0 {
		return Summary{}
	}
	return Summary{Count: h.TotalCount(), Mean: h.Mean() / 1000, Min: usToMs(h.Min()),
		P50: usToMs(h.ValueAtQuantile(50)), P90: usToMs(h.ValueAtQuantile(90)),
		P99: usToMs(h.ValueAtQuantile(99)), P999: usToMs(h.ValueAtQuantile(99.9)),
		Max: usToMs(h.Max())}
}

// PercentilePoint is one point of a percentile distribution.
type PercentilePoint struct {
	Percentile float64 `json:"percentile"`
	Ms         float64 `json:"ms"`
}

// DistributionPercentiles are the percentiles a report's distribution lists: 0, then
// ten steps per decade of 1/(1-p) up to 99.999, then 100.
func DistributionPercentiles() []float64 {
	ps := []float64{0}
	for k := 1; k <= 50; k++ {
		ps = append(ps, 100*(1-math.Pow(10, -float64(k)/10)))
	}
	return append(ps, 100)
}

// Distribution returns h's value at each of DistributionPercentiles, stopping after
// the first percentile whose rank reaches the last recorded value (beyond it every
// point would be the maximum).
func Distribution(h *hdr.Histogram) []PercentilePoint {
	if h == nil || h.TotalCount() == 0 {
		return nil
	}
	n := float64(h.TotalCount())
	var out []PercentilePoint
	for _, p := range DistributionPercentiles() {
		out = append(out, PercentilePoint{Percentile: round(p, 4), Ms: usToMs(h.ValueAtQuantile(p))})
		if p >= 100 || (1-p/100)*n < 1 {
			if p < 100 {
				out = append(out, PercentilePoint{Percentile: 100, Ms: usToMs(h.Max())})
			}
			break
		}
	}
	return out
}

func round(v float64, digits int) float64 {
	f := math.Pow(10, float64(digits))
	return math.Round(v*f) / f
}

// Point is one second of a run, by completion time.
type Point struct {
	T      float64 `json:"t"` // seconds since the start of the schedule
	OK     int64   `json:"ok"`
	Err    int64   `json:"err"`
	Late   int64   `json:"late"`
	Events int64   `json:"events"`
	P50    float64 `json:"p50_ms"`
	P99    float64 `json:"p99_ms"`
	Max    float64 `json:"max_ms"`
}

// Recorder collects a run's outcomes: one histogram of latency from the due time,
// one of service time (from the actual send), counts by outcome, errors by code, and a
// per-second timeline (by completion time). It is safe for concurrent use.
type Recorder struct {
	mu      sync.Mutex
	start   time.Time
	total   *hdr.Histogram // from due time (what a user of an open system sees)
	service *hdr.Histogram // from send time (what the server took)
	cur     *hdr.Histogram // the current second of the timeline
	curSec  int64
	curPt   Point
	points  []Point
	errors  map[string]int64
	kinds   map[string]*hdr.Histogram // latency from due time, by Outcome.Kind

	ok, errs, late, unsent    int64
	events, rejected, evtSent int64
}

// NewRecorder returns a recorder whose timeline starts at start.
func NewRecorder(start time.Time) *Recorder {
	return &Recorder{start: start, total: NewHistogram(), service: NewHistogram(),
		cur: NewHistogram(), errors: map[string]int64{}, kinds: map[string]*hdr.Histogram{}}
}

// Record adds one request: due, sent and done times, whether it was sent late, and
// its outcome.
func (r *Recorder) Record(due, sent, done time.Time, late bool, o Outcome) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.roll(done)
	lat := done.Sub(due)
	RecordDuration(r.total, lat)
	RecordDuration(r.service, done.Sub(sent))
	RecordDuration(r.cur, lat)
	if o.Kind != "" {
		h := r.kinds[o.Kind]
		if h == nil {
			h = NewHistogram()
			r.kinds[o.Kind] = h
		}
		RecordDuration(h, lat)
	}
	r.evtSent += int64(o.Sent)
	if late {
		r.late++
		r.curPt.Late++
	}
	if o.OK {
		r.ok++
		r.curPt.OK++
		r.events += int64(o.Events)
		r.rejected += int64(o.Rejected)
		r.curPt.Events += int64(o.Events)
		return
	}
	r.errs++
	r.curPt.Err++
	r.errors[ErrorKey(o)]++
}

// ErrorKey names a failed outcome in "errors by code": "429 rate_limited",
// "503 service_unavailable", "timeout".
func ErrorKey(o Outcome) string {
	switch {
	case o.Status == 0 && o.Code == "":
		return "no_answer"
	case o.Status == 0:
		return o.Code
	case o.Code == "":
		return itoa(o.Status)
	}
	return itoa(o.Status) + " " + o.Code
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b [20]byte
	i := len(b)
	neg := n < 0
	if neg {
		n = -n
	}
	for n > 0 {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
	}
	if neg {
		i--
		b[i] = '-'
	}
	return string(b[i:])
}

// roll closes the timeline's seconds before t's. Called with mu held.
func (r *Recorder) roll(t time.Time) {
	sec := int64(t.Sub(r.start) / time.Second)
	if sec < 0 {
		sec = 0
	}
	for r.curSec < sec {
		r.closeSecond()
	}
}

func (r *Recorder) closeSecond() {
	p := r.curPt
	p.T = float64(r.curSec)
	if r.cur.TotalCount() > 0 {
		p.P50 = usToMs(r.cur.ValueAtQuantile(50))
		p.P99 = usToMs(r.cur.ValueAtQuantile(99))
		p.Max = usToMs(r.cur.Max())
	}
	r.points = append(r.points, p)
	r.cur.Reset()
	r.curPt = Point{}
	r.curSec++
}

// Tick closes the seconds that ended before t even when nothing completed in them
// (a stalled target shows as empty seconds).
func (r *Recorder) Tick(t time.Time) {
	r.mu.Lock()
	r.roll(t)
	r.mu.Unlock()
}

// SetUnsent records how many requests could not be sent at all.
func (r *Recorder) SetUnsent(n int64) {
	r.mu.Lock()
	r.unsent = n
	r.mu.Unlock()
}

// Totals is a snapshot of a recorder's counts.
type Totals struct {
	OK, Err, Late, Unsent     int64
	Events, Rejected, EvtSent int64
	Errors                    map[string]int64
	Last                      Point // the last closed second
}

// Totals returns the counts so far.
func (r *Recorder) Totals() Totals {
	r.mu.Lock()
	defer r.mu.Unlock()
	t := Totals{OK: r.ok, Err: r.errs, Late: r.late, Unsent: r.unsent, Events: r.events,
		Rejected: r.rejected, EvtSent: r.evtSent, Errors: map[string]int64{}}
	for k, v := range r.errors {
		t.Errors[k] = v
	}
	if n := len(r.points); n > 0 {
		t.Last = r.points[n-1]
	}
	return t
}

// Finish closes the current second (if anything happened in it) and fills rep's
// request counts, latency summaries, distribution, errors and timeline. elapsed is
// the run's length from the schedule's start to the last answer.
func (r *Recorder) Finish(rep *Report, elapsed time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.curPt.OK+r.curPt.Err > 0 {
		r.closeSecond()
	}
	secs := elapsed.Seconds()
	if secs <= 0 {
		secs = 1
	}
	rep.Elapsed = round(secs, 3)
	rep.Requests = Requests{Scheduled: r.ok + r.errs + r.unsent, Completed: r.ok + r.errs, OK: r.ok,
		Errors: r.errs, Late: r.late, Unsent: r.unsent}
	rep.AchievedRate = round(float64(r.ok+r.errs)/secs, 1)
	rep.OKRate = round(float64(r.ok)/secs, 1)
	rep.Events = EventCounts{Sent: r.evtSent, Accepted: r.events, Rejected: r.rejected,
		PerSecond: round(float64(r.events)/secs, 1)}
	rep.Latency = Summarize(r.total)
	rep.Service = Summarize(r.service)
	rep.Distribution = Distribution(r.total)
	rep.Errors = map[string]int64{}
	for k, v := range r.errors {
		rep.Errors[k] = v
	}
	rep.Timeline = append([]Point(nil), r.points...)
	if len(r.kinds) > 0 {
		rep.Reads = map[string]Summary{}
		for k, h := range r.kinds {
			rep.Reads[k] = Summarize(h)
		}
	}
}

// sortedKeys returns m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
