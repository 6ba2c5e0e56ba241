package bench

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/valyala/fasthttp"

	"svc/lib/settings"
)

// ingestFlags are the flags of ingest, e2e and soak.
type ingestFlags struct {
	common
	batch       int
	keys        int
	pixels      int
	invalid     float64
	retry       float64
	bodies      int
	noIdem      bool
	seed        uint64
	heapTol     float64
	goroutTol   float64
	probeEvery  time.Duration
	poll        time.Duration
	probeWait   time.Duration
	via         string
	chHTTP      string
	chDB        string
	keepRunning bool
	vegeta      string
	eventIDs    bool
}

// parseIngestFlags registers and parses the flags of an ingest-like scenario (ingest,
// e2e, soak, vegeta, and flood's normal traffic).
func parseIngestFlags(fs *flag.FlagSet, scenario string, args []string) (*ingestFlags, error) {
	var f ingestFlags
	rate, dur := 4000.0, 30*time.Second
	switch scenario {
	case "e2e":
		rate, dur = 1000, 60*time.Second
	case "soak":
		rate, dur = 1000, 10*time.Minute
	case "flood": // the normal traffic beside the flood: 2,000 × 50 = 100k events/s
		rate, dur = 2000, 30*time.Second
	}
	f.register(fs, rate, dur)
	fs.IntVar(&f.batch, "batch", 50, "events per request (1..50)")
	fs.IntVar(&f.keys, "keys", 4, "API keys the requests rotate over")
	fs.IntVar(&f.pixels, "pixels", 16, "pixels the batches spread over")
	fs.Float64Var(&f.invalid, "invalid", 0, "share of events that break a rule (0..1); each is rejected alone in a 202")
	fs.Float64Var(&f.retry, "retry", 0, "share of requests that are idempotent retries of an earlier request (same key, body and Idempotency-Key)")
	fs.IntVar(&f.bodies, "bodies", 512, "distinct batch bodies generated up front")
	fs.BoolVar(&f.noIdem, "no-idempotency-key", false, "send no Idempotency-Key header (then -retry resends create duplicates)")
	fs.Uint64Var(&f.seed, "seed", 1, "generator seed")
	fs.BoolVar(&f.eventIDs, "event-ids", false, "give every event a client event_id of its own (<run>-<request>-<index>), so that the consumer claims each: what event-id deduplication costs (vegeta then reads each request's body inline: -format=json)")
	fs.Float64Var(&f.heapTol, "heap-tolerance", 20, "soak: largest heap growth (%) from the first to the last fifth that counts as flat")
	fs.Float64Var(&f.goroutTol, "goroutine-tolerance", 20, "soak: largest goroutine growth that counts as flat")
	fs.DurationVar(&f.probeEvery, "probe-every", 200*time.Millisecond, "e2e: interval between freshness probes")
	fs.DurationVar(&f.poll, "poll", 50*time.Millisecond, "e2e: how often to look for probes that became visible")
	fs.DurationVar(&f.probeWait, "probe-wait", 30*time.Second, "e2e: after the load, how long to wait for probes still unseen")
	fs.StringVar(&f.via, "via", "auto", "e2e: where to look for probes: api (GET /pixel-rollups), clickhouse, or auto (api when served)")
	fs.StringVar(&f.chHTTP, "clickhouse-http", envOr("BENCH_CLICKHOUSE_HTTP", "http://127.0.0.1:8123"), "e2e with -via clickhouse: ClickHouse HTTP interface")
	fs.StringVar(&f.chDB, "db", settings.New().String("SVC_CLICKHOUSE_DB"), "the service's ClickHouse database: e2e with -via clickhouse reads it; with -event-ids, a scratch database (named bench_…) has the consumer's claims on event ids dropped after the run")
	if scenario == "vegeta" {
		fs.StringVar(&f.vegeta, "vegeta", envOr("BENCH_VEGETA", "vegeta"), "the vegeta binary (bench/run-standard.sh installs it)")
	}
	fs.DurationVar(&f.catchUp.limit, "catch-up", 0, "after the load, wait up to this long until the rollup consumer has caught up and ClickHouse merges nothing in -db, and report the CPU per event until then as well (0: don't wait)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	f.catchUp.metrics, f.catchUp.ch, f.catchUp.db = f.metrics, f.chHTTP, f.chDB
	if err := f.validate(); err != nil {
		return nil, err
	}
	if f.batch < 1 || f.batch > 50 {
		return nil, errors.New("-batch must be 1..50")
	}
	if f.keys < 1 || f.pixels < 1 || f.bodies < 1 {
		return nil, errors.New("-keys, -pixels and -bodies must be at least 1")
	}
	if f.invalid < 0 || f.invalid > 1 || f.retry < 0 || f.retry >= 1 {
		return nil, errors.New("-invalid must be in 0..1 and -retry in 0..1 (exclusive)")
	}
	return &f, nil
}

// ingestPlan says what request i of an ingest run sends, the same for svc bench's own
// client and for vegeta: a retry repeats request i-lag (same key, body and
// Idempotency-Key), chosen by a hash of i; every other request j sends body j mod
// bodies with key j mod keys and Idempotency-Key bench-<run>-<j>.
type ingestPlan struct {
	run          string
	retry        float64
	seed         uint64
	lag          int64
	bodies, keys int
	idem         bool
}

func newIngestPlan(f *ingestFlags, run string, bodies, keys int) ingestPlan {
	// A retry repeats the request lag places earlier (about half a second before, so the
	// first is usually answered and the retry is a replay).
	return ingestPlan{run: run, retry: f.retry, seed: f.seed, lag: max(int64(1), int64(f.rate/2)),
		bodies: bodies, keys: keys, idem: !f.noIdem}
}

// original returns the request i repeats (i itself unless i is a retry). A retry of a
// retry repeats what that one repeated: every retry carries an Idempotency-Key that an
// earlier request used, so it is always a replay (or the first of the two to arrive).
func (p ingestPlan) original(i int64) (j int64, retry bool) {
	if !p.isRetry(i) {
		return i, false
	}
	j = i - p.lag
	for p.isRetry(j) {
		j -= p.lag
	}
	return j, true
}

func (p ingestPlan) isRetry(i int64) bool {
	return p.retry > 0 && i >= p.lag && unitHash(uint64(i)^p.seed) < p.retry
}

func (p ingestPlan) body(j int64) int { return int(j % int64(p.bodies)) }
func (p ingestPlan) key(j int64) int  { return int(j % int64(p.keys)) }

// idemKey is request j's Idempotency-Key ("" when the run sends none).
func (p ingestPlan) idemKey(j int64) string { return string(p.appendIdemKey(nil, j)) }

// appendIdemKey appends request j's Idempotency-Key to dst (nothing when the run sends
// none).
func (p ingestPlan) appendIdemKey(dst []byte, j int64) []byte {
	if !p.idem {
		return dst
	}
	return strconv.AppendInt(append(append(append(dst, "bench-"...), p.run...), '-'), j, 10)
}

func ingestMain(ctx context.Context, scenario string, args []string) error {
	fs := flag.NewFlagSet("bench "+scenario, flag.ContinueOnError)
	pf, err := parseIngestFlags(fs, scenario, args)
	if err != nil {
		return err
	}
	f := *pf
	title := fmt.Sprintf("%s: POST /events, %d events per batch, %.0f req/s (%.0f events/s) for %s",
		scenario, f.batch, f.rate, f.rate*float64(f.batch), f.duration)
	if f.eventIDs {
		title += ", every event with an event_id"
	}
	rep := newReport(scenario, title, &f.common, args)
	for k, v := range map[string]any{"batch": f.batch, "keys": f.keys, "pixels": f.pixels, "invalid": f.invalid,
		"retry": f.retry, "bodies": f.bodies, "idempotency_key": !f.noIdem, "seed": f.seed, "event_ids": f.eventIDs} {
		rep.Params[k] = v
	}
	run := runID()
	fx, err := Provision(ctx, f.redis(), "bench-"+scenario+"-"+run, f.pixels, f.keys, []string{"events:write", "pixels:read"})
	if err != nil {
		return err
	}
	defer func() {
		if err := fx.Close(ctx); err != nil {
			fmt.Printf("cleanup: %v\n", err)
		}
	}()
	gen := Generate(GenConfig{BatchSize: f.batch, Pixels: f.pixels, InvalidFrac: f.invalid, Bodies: f.bodies,
		Seed: f.seed, Now: time.Now()})
	bodies := make([][]byte, len(gen))
	slots := make([][]int, len(gen)) // -event-ids: where each body's ids take the request number
	valid := make([]int, len(gen))
	for i := range gen {
		if f.eventIDs {
			bodies[i], slots[i] = BatchJSONWithIDs(&gen[i], fx.PixelIDs[gen[i].Pixel], run)
		} else {
			bodies[i] = BatchJSON(&gen[i], fx.PixelIDs[gen[i].Pixel])
		}
		valid[i] = gen[i].Valid()
	}
	hc, err := hostClient(f.target, f.workers, f.timeout)
	if err != nil {
		return err
	}
	eventsURL := f.target + "/events"
	plan := newIngestPlan(&f, run, len(bodies), len(fx.Secrets))
	type wstate struct {
		req  *fasthttp.Request
		resp *fasthttp.Response
		idem []byte
		body []byte // -event-ids: the body with this request's ids
	}
	states := make([]wstate, f.workers)
	for i := range states {
		states[i] = wstate{req: fasthttp.AcquireRequest(), resp: fasthttp.AcquireResponse()}
		states[i].req.SetRequestURI(eventsURL)
		states[i].req.Header.SetMethod("POST")
		states[i].req.Header.SetContentType("application/json")
	}
	auth := make([][]byte, len(fx.Secrets))
	for i, s := range fx.Secrets {
		auth[i] = []byte("Bearer " + s)
	}
	var retries atomic.Int64
	do := func(w int, i int64) Outcome {
		st := &states[w]
		j, retry := plan.original(i)
		if retry {
			retries.Add(1)
		}
		b := plan.body(j)
		st.req.Header.SetBytesV("Authorization", auth[plan.key(j)])
		if plan.idem {
			st.idem = plan.appendIdemKey(st.idem[:0], j)
			st.req.Header.SetBytesV("Idempotency-Key", st.idem)
		}
		if f.eventIDs {
			st.body = append(st.body[:0], bodies[b]...)
			SetEventIDs(st.body, slots[b], j)
			st.req.SetBodyRaw(st.body)
		} else {
			st.req.SetBodyRaw(bodies[b])
		}
		out := doHTTP(hc, st.req, st.resp, f.timeout)
		out.Sent = len(gen[b].Events)
		if out.OK {
			if retry {
				out.Sent = 0 // a replay: no new events
			} else {
				body := st.resp.Body()
				out.Events = max(0, jsonInt(body, "accepted"))
				out.Rejected = max(0, jsonInt(body, "rejected"))
			}
		}
		return out
	}

	var probe *prober
	if scenario == "e2e" {
		if err := fx.AddPixel(ctx, "bench-probe-"+run); err != nil {
			return err
		}
		probe, err = newProber(ctx, &f, fx, run)
		if err != nil {
			return err
		}
		rep.Notes = append(rep.Notes, probe.note())
	}
	var extra func() string
	pctx, stopProbes := context.WithCancel(ctx)
	defer stopProbes()
	probesDone := make(chan struct{})
	if probe != nil {
		extra = probe.progress
		go func() { probe.run(pctx, f.duration); close(probesDone) }()
	} else {
		close(probesDone)
	}
	noteForks := watchForks(ctx, fx.Redis())
	noteRedis := watchRedisWork(ctx, fx.Redis())
	noteClickHouse := watchClickHouseWork(f.chHTTP, f.chDB)
	runLoad(ctx, &f.common, rep, do, extra)
	<-probesDone
	noteForks(rep)
	noteClickHouse(rep)
	var answers int64 // the stored answers: svc's own HSETs
	if !f.noIdem {
		answers = rep.Requests.OK - retries.Load()
		if probe != nil {
			answers += int64(probe.count())
		}
	}
	noteRedis(rep, answers)
	if probe != nil {
		probe.wait(ctx, f.probeWait)
		rep.Freshness = probe.report(rep.Started)
	}
	if n := retries.Load(); n > 0 {
		rep.Notes = append(rep.Notes, fmt.Sprintf("%d requests were idempotent retries of an earlier request; their replayed 202s count as ok requests, not as accepted events", n))
	}
	if !f.noIdem {
		err := fx.ForgetRequests(ctx, rep.Requests.Scheduled, func(j int64) (uuid.UUID, string) {
			return fx.KeyIDs[plan.key(j)], plan.idemKey(j)
		})
		if err == nil && probe != nil {
			err = fx.ForgetRequests(ctx, int64(probe.count()), func(j int64) (uuid.UUID, string) {
				return fx.KeyIDs[0], "bench-probe-" + probe.marker(int(j))
			})
		}
		if err != nil {
			rep.Notes = append(rep.Notes, "cleanup: "+err.Error())
		}
	}
	if f.eventIDs {
		rep.Notes = append(rep.Notes, dropEventClaims(ctx, fx, f.chDB))
	}
	if scenario == "soak" {
		rep.Soak = SoakVerdict(rep.Samples, f.heapTol, f.goroutTol)
		if f.duration < time.Hour {
			rep.Notes = append(rep.Notes, fmt.Sprintf("soak ran %s (the target is an hour)", f.duration))
		}
	}
	for i := range states {
		fasthttp.ReleaseRequest(states[i].req)
		fasthttp.ReleaseResponse(states[i].resp)
	}
	return finish(&f.common, rep)
}

// unitHash maps x to [0, 1) (splitmix64), for deterministic per-request choices.
func unitHash(x uint64) float64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	x ^= x >> 31
	return float64(x>>11) / (1 << 53)
}
