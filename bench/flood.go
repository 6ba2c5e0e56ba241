package bench

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/valyala/fasthttp"

	"svc/lib/settings"
)

// The flood scenario: normal traffic (valid batches, an Idempotency-Key each) beside a
// flood of batches every event of which is invalid, on pixels of another workspace.
// Each flood batch is refused whole (422) and becomes one rejection record, which the
// rejections consumer writes to ClickHouse: exact counts always, stored samples capped
// per pixel and minute. The run answers three questions: does the normal traffic's p99
// and throughput hold (against the same normal load alone, run first); how many flood
// requests per second the edge took (read, validated, answered 422 and recorded); and
// does the rejections table grow bounded while counting every rejection.

// floodFlags are the flood's own flags, beside the ingest flags of the normal traffic.
type floodFlags struct {
	rate       float64
	workers    int
	pixels     int
	keys       int
	samples    int
	flushEvery time.Duration
	settle     time.Duration
	baseline   bool
	warmup     time.Duration
	holdP99    float64
	source     string
}

func (ff *floodFlags) register(fs *flag.FlagSet) {
	r := settings.New()
	fs.Float64Var(&ff.rate, "flood-rate", 10000, "flood requests per second (each -batch events, every one invalid: 10,000 × 50 = 500k events/s)")
	fs.IntVar(&ff.workers, "flood-workers", 1024, "most flood requests in flight (and connections)")
	fs.IntVar(&ff.pixels, "flood-pixels", 16, "pixels the flood spreads over (its own workspace)")
	fs.IntVar(&ff.keys, "flood-keys", 4, "API keys the flood rotates over")
	fs.IntVar(&ff.samples, "samples", r.Int("SVC_ROLLUP_REJECTION_SAMPLES"), "the service's cap of stored samples per pixel and minute (SVC_ROLLUP_REJECTION_SAMPLES)")
	fs.DurationVar(&ff.flushEvery, "flush-interval", r.Duration("SVC_ROLLUP_BATCH_INTERVAL"), "the rejections consumer's flush interval (SVC_ROLLUP_BATCH_INTERVAL): each flush may add one count row per pixel, minute, status, field and rule")
	fs.DurationVar(&ff.settle, "settle", 2*time.Minute, "after the load, how long to wait for the rejections table to hold every rejection")
	fs.BoolVar(&ff.baseline, "baseline", true, "first run the normal traffic alone for -duration, the figures the flood run is held against")
	fs.DurationVar(&ff.warmup, "warmup", 2*time.Second, "before the baseline, the normal traffic for this long, not recorded (the workspace's keys and pixels cold in the caches; 0: none)")
	fs.Float64Var(&ff.holdP99, "hold-p99", 1.5, "the normal traffic's p99 holds when at most this many times its p99 alone")
	fs.StringVar(&ff.source, "flood-source", "", "the local address the flood connects from (e.g. 127.0.0.2 against a service on loopback): a flooder is another client than the normal traffic, whose connections the per-address cap (SVC_MAX_CONNS_PER_IP) must not count against it; empty: the system's choice")
}

func (ff *floodFlags) validate() error {
	switch {
	case ff.rate <= 0:
		return errors.New("-flood-rate must be positive")
	case ff.workers < 1 || ff.pixels < 1 || ff.keys < 1:
		return errors.New("-flood-workers, -flood-pixels and -flood-keys must be at least 1")
	case ff.samples < 0 || ff.flushEvery <= 0:
		return errors.New("-samples must not be negative and -flush-interval must be positive")
	case ff.warmup < 0:
		return errors.New("-warmup must not be negative")
	case ff.holdP99 < 1:
		return errors.New("-hold-p99 must be at least 1")
	case ff.source != "" && net.ParseIP(ff.source) == nil:
		return errors.New("-flood-source must be an IP address")
	}
	return nil
}

// FloodResult is the flood's part of the report (Report.Flood).
type FloodResult struct {
	OfferedRate   float64          `json:"offered_req_per_s"`
	OfferedEvents float64          `json:"offered_events_per_s"`
	Requests      Requests         `json:"requests"`
	ByCode        map[string]int64 `json:"by_code"` // answers other than 2xx, by problem code
	// TakenPerSecond is flood requests answered 422 (read, validated, recorded) per
	// elapsed second: the invalid traffic's accepted-request rate.
	TakenPerSecond float64 `json:"taken_req_per_s"`
	Latency        Summary `json:"latency"`
	// Alone is the normal traffic without the flood (nil: -baseline=false).
	Alone   *NormalFigures   `json:"normal_alone,omitempty"`
	With    NormalFigures    `json:"normal_with_flood"`
	Holds   *bool            `json:"normal_holds,omitempty"`
	Verdict string           `json:"verdict"`
	Table   RejectionsGrowth `json:"rejections_table"`
}

// NormalFigures are the normal traffic's figures in one run.
type NormalFigures struct {
	OfferedEvents float64 `json:"offered_events_per_s"`
	EventsPerS    float64 `json:"accepted_events_per_s"`
	OKShare       float64 `json:"ok_share"`
	P99           float64 `json:"p99_ms"`
}

// RejectionsGrowth is what the flood left in the rejections table.
type RejectionsGrowth struct {
	RowsBefore   int64 `json:"rows_before"` // whole table
	RowsAfter    int64 `json:"rows_after"`
	FloodRows    int64 `json:"flood_rows"` // rows of the flood's workspace
	Samples      int64 `json:"samples"`
	CountRows    int64 `json:"count_rows"`
	Rejected     int64 `json:"rejected"` // sum(rejections): the exact count
	Expected     int64 `json:"expected"` // what the 422 answers carried
	Exact        bool  `json:"exact"`
	PixelMinutes int64 `json:"pixel_minutes"`
	Kinds        int64 `json:"kinds"` // distinct (status, field, rule)
	// MaxSamples and MaxRows are the most stored samples and rows of one pixel and minute.
	MaxSamples int64   `json:"max_samples_per_pixel_minute"`
	MaxRows    int64   `json:"max_rows_per_pixel_minute"`
	Cap        int     `json:"samples_cap"`
	Bound      int64   `json:"row_bound_per_pixel_minute"`
	Bounded    bool    `json:"bounded"`
	Waited     float64 `json:"waited_s"` // for the consumer to store the last of them
}

// rowBound is the most rows one pixel and minute can get: cap samples, and past the
// cap one count row per flush and kind (status, field, rule) in the minute.
func rowBound(samplesCap int, flushEvery time.Duration, kinds int64) int64 {
	flushes := int64(math.Ceil(float64(time.Minute) / float64(flushEvery)))
	return int64(samplesCap) + flushes*kinds
}

// answered counts the answers of status in a report's errors ("<status> <code>" → n).
func answered(errs map[string]int64, status int) int64 {
	var n int64
	prefix := strconv.Itoa(status) + " "
	for k, v := range errs {
		if strings.HasPrefix(k, prefix) {
			n += v
		}
	}
	return n
}

// expectedRejections is what the flood's answers say the table must count: a 422 (a
// batch none of whose events is acceptable) one rejection per event, a 429 or 409
// (refused before its events were read) one. Other answers (503, transport errors) are
// not recorded.
func expectedRejections(errs map[string]int64, batch int) int64 {
	return answered(errs, 422)*int64(batch) + answered(errs, 429) + answered(errs, 409)
}

// judge fills g's verdicts.
func (g *RejectionsGrowth) judge(flushEvery time.Duration) {
	g.Exact = g.Rejected == g.Expected
	g.Bound = rowBound(g.Cap, flushEvery, g.Kinds)
	g.Bounded = g.MaxSamples <= int64(g.Cap) && g.MaxRows <= g.Bound
}

// normalFigures reads the normal traffic's figures from its report.
func normalFigures(rep *Report, batch int) NormalFigures {
	nf := NormalFigures{OfferedEvents: rep.Rate * float64(batch), EventsPerS: rep.Events.PerSecond, P99: rep.Latency.P99}
	if rep.Requests.Scheduled > 0 {
		nf.OKShare = round(float64(rep.Requests.OK)/float64(rep.Requests.Scheduled), 4)
	}
	return nf
}

// holds says whether the normal traffic held beside the flood: every request ok,
// throughput within 1% of the alone run's, and p99 at most holdP99 times its p99 alone.
func holds(alone, with NormalFigures, holdP99 float64) (bool, string) {
	var why []string
	if with.OKShare < 1 {
		why = append(why, fmt.Sprintf("%.2f%% of its requests not ok", 100*(1-with.OKShare)))
	}
	if alone.EventsPerS > 0 && with.EventsPerS < 0.99*alone.EventsPerS {
		why = append(why, fmt.Sprintf("throughput %.0f events/s against %.0f alone", with.EventsPerS, alone.EventsPerS))
	}
	if alone.P99 > 0 && with.P99 > holdP99*alone.P99 {
		why = append(why, fmt.Sprintf("p99 %.1f ms against %.1f ms alone (more than %.1f×)", with.P99, alone.P99, holdP99))
	}
	if len(why) > 0 {
		return false, "normal traffic did not hold: " + strings.Join(why, "; ")
	}
	return true, fmt.Sprintf("normal traffic held: p99 %.1f ms (alone %.1f), %.0f events/s (alone %.0f)", with.P99, alone.P99, with.EventsPerS, alone.EventsPerS)
}

// poster returns the do function of a load that posts bodies[j mod len] with key
// j mod len(auth) (and, when idem, Idempotency-Key bench-<run>-<j>).
func poster(hc *fasthttp.HostClient, url string, workers int, timeout time.Duration, bodies [][]byte, sent []int, auth [][]byte, plan ingestPlan) func(w int, i int64) Outcome {
	type wstate struct {
		req  *fasthttp.Request
		resp *fasthttp.Response
		idem []byte
	}
	states := make([]wstate, workers)
	for i := range states {
		states[i] = wstate{req: fasthttp.AcquireRequest(), resp: fasthttp.AcquireResponse()}
		states[i].req.SetRequestURI(url)
		states[i].req.Header.SetMethod("POST")
		states[i].req.Header.SetContentType("application/json")
	}
	return func(w int, i int64) Outcome {
		st := &states[w]
		j, retry := plan.original(i)
		b := plan.body(j)
		st.req.Header.SetBytesV("Authorization", auth[plan.key(j)])
		if plan.idem {
			st.idem = plan.appendIdemKey(st.idem[:0], j)
			st.req.Header.SetBytesV("Idempotency-Key", st.idem)
		}
		st.req.SetBodyRaw(bodies[b])
		out := doHTTP(hc, st.req, st.resp, timeout)
		out.Sent = sent[b]
		if out.OK && !retry {
			body := st.resp.Body()
			out.Events = max(0, jsonInt(body, "accepted"))
			out.Rejected = max(0, jsonInt(body, "rejected"))
		} else if retry {
			out.Sent = 0
		}
		return out
	}
}

// rejTable reads the rejections table over ClickHouse's HTTP interface.
type rejTable struct {
	hc      *fasthttp.HostClient
	base    string
	db      string
	timeout time.Duration
}

func (t rejTable) ints(stmt string) ([]int64, error) {
	out, err := chQuery(t.hc, t.base, stmt+" FORMAT TSV", t.timeout)
	if err != nil {
		return nil, err
	}
	var vs []int64
	for _, f := range strings.Fields(out) {
		v, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("ClickHouse answered %q", strings.TrimSpace(out))
		}
		vs = append(vs, v)
	}
	return vs, nil
}

func (t rejTable) rows() (int64, error) {
	v, err := t.ints("SELECT count() FROM " + t.db + ".rejections")
	if err != nil || len(v) != 1 {
		return 0, errors.Join(err, errors.New("rejections: no count"))
	}
	return v[0], nil
}

// growth reads what workspace ws has in the table (ws: our own UUID's text).
func (t rejTable) growth(ws string, g *RejectionsGrowth) error {
	where := " FROM " + t.db + ".rejections WHERE workspace_id = toUUID('" + ws + "')"
	v, err := t.ints("SELECT count(), countIf(sample = 1), countIf(sample = 0), sum(toUInt64(rejections)), " +
		"uniqExact(pixel_id, minute), uniqExact(status, field, rule)" + where)
	if err != nil || len(v) != 6 {
		return errors.Join(err, errors.New("rejections: no figures"))
	}
	g.FloodRows, g.Samples, g.CountRows, g.Rejected, g.PixelMinutes, g.Kinds = v[0], v[1], v[2], v[3], v[4], v[5]
	v, err = t.ints("SELECT max(c), max(s) FROM (SELECT count() AS c, countIf(sample = 1) AS s" + where + " GROUP BY pixel_id, minute)")
	if err != nil || len(v) != 2 {
		return errors.Join(err, errors.New("rejections: no per-minute figures"))
	}
	g.MaxRows, g.MaxSamples = v[0], v[1]
	return nil
}

// settle waits until ws's exact count reaches expected or stops moving for 5 s
// (at most d), and returns how long it waited.
func (t rejTable) settle(ctx context.Context, ws string, expected int64, d time.Duration) time.Duration {
	start := time.Now()
	var last int64 = -1
	still := 0
	for time.Since(start) < d && ctx.Err() == nil {
		v, err := t.ints("SELECT sum(toUInt64(rejections)) FROM " + t.db + ".rejections WHERE workspace_id = toUUID('" + ws + "')")
		if err == nil && len(v) == 1 {
			if v[0] >= expected {
				break
			}
			if v[0] == last {
				still++
			} else {
				still, last = 0, v[0]
			}
			if still >= 5 {
				break
			}
		}
		time.Sleep(time.Second)
	}
	return time.Since(start)
}

// runBoth runs the normal load (with the progress line) and the flood at once.
func runBoth(ctx context.Context, normal *common, rep *Report, do func(int, int64) Outcome,
	flood *common, frep *Report, fdo func(int, int64) Outcome) {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		runLoad(ctx, flood, frep, fdo, nil)
	}()
	runLoad(ctx, normal, rep, do, nil)
	wg.Wait()
}

// printFlood writes the flood's lines of the summary.
func printFlood(w io.Writer, f *FloodResult) {
	if a := f.Alone; a != nil {
		fmt.Fprintf(w, "normal alone\t%.0f of %.0f events/s, p99 %.1f ms, %.2f%% ok\n", a.EventsPerS, a.OfferedEvents, a.P99, 100*a.OKShare)
	}
	n := f.With
	fmt.Fprintf(w, "normal with flood\t%.0f of %.0f events/s, p99 %.1f ms, %.2f%% ok\n", n.EventsPerS, n.OfferedEvents, n.P99, 100*n.OKShare)
	fmt.Fprintf(w, "verdict\t%s\n", f.Verdict)
	q := f.Requests
	fmt.Fprintf(w, "flood\t%.0f req/s offered (%.0f invalid events/s): %d scheduled, %d unsent; %.1f req/s taken (answered 422), p99 %s ms\n",
		f.OfferedRate, f.OfferedEvents, q.Scheduled, q.Unsent, f.TakenPerSecond, ms(f.Latency.P99))
	for _, k := range sortedKeys(f.ByCode) {
		fmt.Fprintf(w, "flood answer\t%s: %d\n", k, f.ByCode[k])
	}
	g := f.Table
	fmt.Fprintf(w, "rejections table\t%d → %d rows (+%d); the flood's: %d rows (%d samples, %d count rows) over %d pixel-minutes\n",
		g.RowsBefore, g.RowsAfter, g.RowsAfter-g.RowsBefore, g.FloodRows, g.Samples, g.CountRows, g.PixelMinutes)
	fmt.Fprintf(w, "rejected (exact)\t%d counted, %d expected from the answers: exact %v (waited %.1f s)\n", g.Rejected, g.Expected, g.Exact, g.Waited)
	fmt.Fprintf(w, "bounded\t%v: per pixel-minute at most %d samples (cap %d) and %d rows (bound %d: the cap + a count row per flush and kind, %d kinds)\n",
		g.Bounded, g.MaxSamples, g.Cap, g.MaxRows, g.Bound, g.Kinds)
}
