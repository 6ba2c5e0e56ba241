package bench

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"debug/buildinfo"
	"encoding/base64"
	"encoding/csv"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
)

// vegetaMain is `svc bench vegeta`: the ingest scenario (same flags, same provisioned
// keys and pixels, same bodies, same retries and Idempotency-Keys as `svc bench
// ingest`, and with -event-ids the same event ids: every event an id of its own) driven
// by vegeta, a load generator we did not write, as a second opinion on svc bench's
// figures. Its targets are in vegeta's http format, each body a file, or with
// -event-ids in its json format, each request's body inline (base64). vegeta's own report goes into the report's External; the
// per-request results (vegeta encode -to=csv) fill the usual figures, with latency
// from due taken as vegeta's attack start + seq/rate (its pacer is constant-rate).
func vegetaMain(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("bench vegeta", flag.ContinueOnError)
	f, err := parseIngestFlags(fs, "vegeta", args)
	if err != nil {
		return err
	}
	if f.rate < 1 {
		return errors.New("-rate must be at least 1 for vegeta")
	}
	bin, err := exec.LookPath(f.vegeta)
	if err != nil {
		return fmt.Errorf("-vegeta %s: %w (bench/run-standard.sh installs it with go install github.com/tsenart/vegeta/v12@%s)", f.vegeta, err, VegetaVersion)
	}
	title := fmt.Sprintf("vegeta: POST /events, %d events per batch, %.0f req/s (%.0f events/s) for %s",
		f.batch, f.rate, f.rate*float64(f.batch), f.duration)
	if f.eventIDs {
		title += ", every event with an event_id"
	}
	rep := newReport("vegeta", title, &f.common, args)
	for k, v := range map[string]any{"batch": f.batch, "keys": f.keys, "pixels": f.pixels, "invalid": f.invalid,
		"retry": f.retry, "bodies": f.bodies, "idempotency_key": !f.noIdem, "seed": f.seed, "event_ids": f.eventIDs} {
		rep.Params[k] = v
	}
	run := runID()
	fx, err := Provision(ctx, f.redis(), "bench-vegeta-"+run, f.pixels, f.keys, []string{"events:write", "pixels:read"})
	if err != nil {
		return err
	}
	defer func() {
		if err := fx.Close(ctx); err != nil {
			fmt.Printf("cleanup: %v\n", err)
		}
	}()
	dir, err := os.MkdirTemp("", "svc-bench-vegeta-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	gen := Generate(GenConfig{BatchSize: f.batch, Pixels: f.pixels, InvalidFrac: f.invalid, Bodies: f.bodies,
		Seed: f.seed, Now: time.Now()})
	auth := make([]string, len(fx.Secrets))
	for i, s := range fx.Secrets {
		auth[i] = "Bearer " + s
	}
	plan := newIngestPlan(f, run, len(gen), len(auth))
	total := Schedule{Rate: f.rate, Duration: f.duration}.Total()
	va := vegetaAttack{bin: bin, results: filepath.Join(dir, "results.bin"), rate: f.rate, duration: f.duration,
		timeout: f.timeout, workers: f.workers}
	var targets func(io.Writer) error
	if f.eventIDs {
		bodies, slots := make([][]byte, len(gen)), make([][]int, len(gen))
		for i := range gen {
			bodies[i], slots[i] = BatchJSONWithIDs(&gen[i], fx.PixelIDs[gen[i].Pixel], run)
		}
		va.format = "json"
		targets = func(w io.Writer) error {
			return writeTargetsJSON(w, total, plan, f.target+"/events", auth, bodies, slots)
		}
	} else {
		paths := make([]string, len(gen))
		for i := range gen {
			paths[i] = filepath.Join(dir, "body-"+strconv.Itoa(i)+".json")
			if err := os.WriteFile(paths[i], BatchJSON(&gen[i], fx.PixelIDs[gen[i].Pixel]), 0o600); err != nil {
				return err
			}
		}
		targets = func(w io.Writer) error { return writeTargets(w, total, plan, f.target+"/events", auth, paths) }
	}
	SetTargetPIDs(f.target)
	noteForks := watchForks(ctx, fx.Redis())
	noteRedis := watchRedisWork(ctx, fx.Redis())
	cpu0 := readCPU()
	sampler := StartSampler(f.metrics, f.sample, time.Now())
	fmt.Fprintf(os.Stderr, "[vegeta] %s attack: %d requests at %.0f/s\n", bin, total, f.rate)
	child, err := va.run(ctx, targets)
	cpu1 := readCPU()
	samples := sampler.Stop()
	if err != nil {
		return err
	}
	cpu := cpuBetween(cpu0, cpu1)
	cpu.addChild("vegeta", child, cpu1.at.Sub(cpu0.at).Seconds())
	own, err := va.report(ctx)
	if err != nil {
		return err
	}
	own.Version = moduleVersion(bin)
	own.Command = "vegeta " + strings.Join(va.args(), " ")
	rep.External = own
	rec, elapsed, err := va.recordResults(ctx, f, total)
	if err != nil {
		return err
	}
	finishLoad(rep, &f.common, rec, elapsed, cpu, samples)
	rep.Notes = append(rep.Notes, "latency from due is vegeta's attack start + seq/rate (its constant pacer); "+
		"vegeta's own figures (External) are measured from each request's send, like service time")
	noteForks(rep)
	var answers int64 // the stored answers: svc's own HSETs
	if !f.noIdem {
		answers = rep.Requests.OK - plan.retries(total)
	}
	noteRedis(rep, answers)
	if n := plan.retries(total); n > 0 {
		rep.Notes = append(rep.Notes, fmt.Sprintf("%d requests were idempotent retries of an earlier request; their replayed 202s count as ok requests, not as accepted events", n))
	}
	if plan.idem {
		err := fx.ForgetRequests(ctx, total, func(j int64) (uuid.UUID, string) {
			return fx.KeyIDs[plan.key(j)], plan.idemKey(j)
		})
		if err != nil {
			rep.Notes = append(rep.Notes, "cleanup: "+err.Error())
		}
	}
	if f.eventIDs {
		rep.Notes = append(rep.Notes, dropEventClaims(ctx, fx, f.chDB))
	}
	return finish(&f.common, rep)
}

// VegetaVersion is the vegeta release bench/run-standard.sh installs.
const VegetaVersion = "v12.13.0"

// External is another tool's own report of a run (vegeta report -type=json): its
// figures, not ours. Its latency is measured from each request's send.
type External struct {
	Tool        string           `json:"tool"`
	Version     string           `json:"version"`
	Command     string           `json:"command"`
	Requests    int64            `json:"requests"`
	Rate        float64          `json:"rate"`       // requests sent per second
	Throughput  float64          `json:"throughput"` // successful requests per second, until the last answer
	Success     float64          `json:"success"`    // share of answers with a status in [200, 400)
	StatusCodes map[string]int64 `json:"status_codes"`
	Latency     Summary          `json:"latency"` // ms from send; no p99.9 (vegeta has none): 0
	P95         float64          `json:"p95_ms"`
	Errors      []string         `json:"errors,omitempty"`
}

// vegetaAttack is one `vegeta attack` run and the reading of its results.
type vegetaAttack struct {
	bin, results      string
	rate              float64
	duration, timeout time.Duration
	workers           int
	format            string // vegeta's target format: "" or http (bodies in files), json (inline)
}

// args are the attack's arguments: targets read lazily from stdin in vegeta's format
// v.format, at most workers requests in flight (as svc bench's -workers), keep-alive.
func (v vegetaAttack) args() []string {
	return []string{"attack", "-lazy", "-format=" + cmp.Or(v.format, "http"), "-name=svc-bench",
		"-rate=" + strconv.FormatInt(int64(math.Round(v.rate)), 10) + "/1s",
		"-duration=" + v.duration.String(), "-timeout=" + v.timeout.String(),
		"-workers=" + strconv.Itoa(min(v.workers, 64)), "-max-workers=" + strconv.Itoa(v.workers),
		"-keepalive=true", "-output=" + v.results}
}

// run runs the attack, feeding it targets from write (which may be cut short when
// vegeta stops reading), and returns the CPU time vegeta used.
func (v vegetaAttack) run(ctx context.Context, write func(io.Writer) error) (time.Duration, error) {
	cmd := exec.CommandContext(ctx, v.bin, v.args()...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return 0, err
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("vegeta attack: %w", err)
	}
	go func() {
		bw := bufio.NewWriterSize(stdin, 256<<10)
		if write(bw) == nil {
			_ = bw.Flush()
		}
		stdin.Close()
	}()
	if err := cmd.Wait(); err != nil {
		return 0, fmt.Errorf("vegeta attack: %w: %s", err, tail(stderr.String(), 500))
	}
	return cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime(), nil
}

// report reads vegeta's own summary of the results.
func (v vegetaAttack) report(ctx context.Context) (*External, error) {
	out, err := exec.CommandContext(ctx, v.bin, "report", "-type=json", v.results).Output()
	if err != nil {
		return nil, fmt.Errorf("vegeta report: %w", err)
	}
	return parseVegetaReport(out)
}

// parseVegetaReport turns vegeta's JSON report (latencies in nanoseconds) into an
// External.
func parseVegetaReport(b []byte) (*External, error) {
	var m struct {
		Latencies struct {
			Mean float64 `json:"mean"`
			P50  float64 `json:"50th"`
			P90  float64 `json:"90th"`
			P95  float64 `json:"95th"`
			P99  float64 `json:"99th"`
			Max  float64 `json:"max"`
			Min  float64 `json:"min"`
		} `json:"latencies"`
		Requests    int64            `json:"requests"`
		Rate        float64          `json:"rate"`
		Throughput  float64          `json:"throughput"`
		Success     float64          `json:"success"`
		StatusCodes map[string]int64 `json:"status_codes"`
		Errors      []string         `json:"errors"`
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("vegeta report: %w", err)
	}
	ns := func(v float64) float64 { return round(v/1e6, 3) }
	l := m.Latencies
	return &External{Tool: "vegeta", Requests: m.Requests, Rate: round(m.Rate, 1), Throughput: round(m.Throughput, 1),
		Success: m.Success, StatusCodes: m.StatusCodes, Errors: m.Errors, P95: ns(l.P95),
		Latency: Summary{Count: m.Requests, Mean: ns(l.Mean), Min: ns(l.Min), P50: ns(l.P50), P90: ns(l.P90), P99: ns(l.P99), Max: ns(l.Max)}}, nil
}

// recordResults reads every request's result (vegeta encode -to=csv) into a Recorder,
// and returns it with the span from the attack's start to the last answer. Of the
// planned requests, those vegeta never sent (it drops a due request it has no free
// worker for by the end of -duration) count as unsent, as in svc bench.
func (v vegetaAttack) recordResults(ctx context.Context, f *ingestFlags, planned int64) (*Recorder, time.Duration, error) {
	cmd := exec.CommandContext(ctx, v.bin, "encode", "-to=csv", v.results)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, 0, err
	}
	if err := cmd.Start(); err != nil {
		return nil, 0, fmt.Errorf("vegeta encode: %w", err)
	}
	rows, err := readVegetaCSV(out)
	if werr := cmd.Wait(); err == nil && werr != nil {
		err = fmt.Errorf("vegeta encode: %w", werr)
	}
	if err != nil {
		return nil, 0, err
	}
	rec, elapsed := recordVegeta(rows, f.rate, f.late, f.batch)
	rec.SetUnsent(max(0, planned-int64(len(rows))))
	return rec, elapsed, nil
}

// vegetaResult is one request as vegeta recorded it.
type vegetaResult struct {
	Start    time.Time // when vegeta sent it
	Latency  time.Duration
	Code     int
	Error    string
	Body     []byte
	Seq      int64
	Replayed bool // the answer carried Idempotent-Replayed: true
}

// readVegetaCSV parses `vegeta encode -to=csv`: timestamp (ns), code, latency (ns),
// bytes out, bytes in, error, body (base64), attack, seq, method, url, headers
// (base64).
func readVegetaCSV(r io.Reader) ([]vegetaResult, error) {
	cr := csv.NewReader(bufio.NewReaderSize(r, 1<<20))
	cr.FieldsPerRecord = 12
	cr.ReuseRecord = true
	var out []vegetaResult
	for {
		f, err := cr.Read()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("vegeta results: %w", err)
		}
		ts, err1 := strconv.ParseInt(f[0], 10, 64)
		code, err2 := strconv.Atoi(f[1])
		lat, err3 := strconv.ParseInt(f[2], 10, 64)
		body, err4 := base64.StdEncoding.DecodeString(f[6])
		seq, err5 := strconv.ParseInt(f[8], 10, 64)
		hdr, err6 := base64.StdEncoding.DecodeString(f[11])
		if err := errors.Join(err1, err2, err3, err4, err5, err6); err != nil {
			return nil, fmt.Errorf("vegeta results, line %d: %w", len(out)+1, err)
		}
		out = append(out, vegetaResult{Start: time.Unix(0, ts), Latency: time.Duration(lat), Code: code,
			Error: f[5], Body: body, Seq: seq, Replayed: replayed(hdr)})
	}
}

// replayed reports whether an HTTP header block says Idempotent-Replayed: true.
func replayed(hdr []byte) bool {
	for _, l := range strings.Split(string(hdr), "\r\n") {
		k, v, ok := strings.Cut(l, ":")
		if ok && strings.EqualFold(strings.TrimSpace(k), "Idempotent-Replayed") && strings.TrimSpace(v) == "true" {
			return true
		}
	}
	return false
}

// recordVegeta fills a Recorder from vegeta's results. Request seq was due at the
// attack's start + seq/rate (vegeta's constant pacer; the start is the earliest send);
// it was late when sent more than late after that. batch is the events a failed request
// carried.
func recordVegeta(rows []vegetaResult, rate float64, late time.Duration, batch int) (*Recorder, time.Duration) {
	var start, end time.Time
	for i, r := range rows {
		if i == 0 || r.Start.Before(start) {
			start = r.Start
		}
		if done := r.Start.Add(r.Latency); done.After(end) {
			end = done
		}
	}
	rec := NewRecorder(start)
	sched := Schedule{Start: start, Rate: rate}
	for _, r := range rows {
		due := sched.Due(r.Seq)
		if r.Start.Before(due) {
			due = r.Start // sent early by the pacer's rounding: no negative wait
		}
		rec.Record(due, r.Start, r.Start.Add(r.Latency), r.Start.Sub(due) > late, vegetaOutcome(r, batch))
	}
	return rec, end.Sub(start)
}

// vegetaOutcome is what one vegeta result means for the report.
func vegetaOutcome(r vegetaResult, batch int) Outcome {
	switch {
	case r.Code == 0:
		code := "conn_error"
		if strings.Contains(strings.ToLower(r.Error), "timeout") {
			code = "timeout"
		}
		return Outcome{Code: code, Sent: batch}
	case r.Code >= 200 && r.Code < 300:
		if r.Replayed {
			return Outcome{Status: r.Code, OK: true} // a replay: no new events
		}
		acc, rej := max(0, jsonInt(r.Body, "accepted")), max(0, jsonInt(r.Body, "rejected"))
		return Outcome{Status: r.Code, OK: true, Events: acc, Rejected: rej, Sent: acc + rej}
	}
	return Outcome{Status: r.Code, Code: problemCode(r.Body), Sent: batch}
}

// writeTargets writes n requests of plan in vegeta's http target format: request line,
// headers, @body-file, blank line. It stops at the first write error (vegeta stopped
// reading).
func writeTargets(w io.Writer, n int64, plan ingestPlan, url string, auth, bodies []string) error {
	var b []byte
	for i := int64(0); i < n; i++ {
		j, _ := plan.original(i)
		b = append(b[:0], "POST "...)
		b = append(b, url...)
		b = append(b, "\nAuthorization: "...)
		b = append(b, auth[plan.key(j)]...)
		b = append(b, "\nContent-Type: application/json\n"...)
		if plan.idem {
			b = append(b, "Idempotency-Key: "...)
			b = plan.appendIdemKey(b, j)
			b = append(b, '\n')
		}
		b = append(b, '@')
		b = append(b, bodies[plan.body(j)]...)
		b = append(b, "\n\n"...)
		if _, err := w.Write(b); err != nil {
			return err
		}
	}
	return nil
}

// writeTargetsJSON writes n requests of plan in vegeta's json target format, one object
// a line, each body inline (base64) with request j's event ids written into it
// (SetEventIDs at slots), so that every event of the run has an id of its own. It stops
// at the first write error (vegeta stopped reading).
func writeTargetsJSON(w io.Writer, n int64, plan ingestPlan, url string, auth []string, bodies [][]byte, slots [][]int) error {
	var b, body []byte
	for i := int64(0); i < n; i++ {
		j, _ := plan.original(i)
		k := plan.body(j)
		body = append(body[:0], bodies[k]...)
		SetEventIDs(body, slots[k], j)
		b = append(b[:0], `{"method":"POST","url":`...)
		b = strconv.AppendQuote(b, url)
		b = append(b, `,"header":{"Authorization":[`...)
		b = strconv.AppendQuote(b, auth[plan.key(j)])
		b = append(b, `],"Content-Type":["application/json"]`...)
		if plan.idem {
			b = append(b, `,"Idempotency-Key":["`...)
			b = plan.appendIdemKey(b, j) // letters, digits and dashes: nothing to escape
			b = append(b, `"]`...)
		}
		b = append(b, `},"body":"`...)
		b = base64.StdEncoding.AppendEncode(b, body)
		b = append(b, "\"}\n"...)
		if _, err := w.Write(b); err != nil {
			return err
		}
	}
	return nil
}

// retries counts the retries among the first n requests.
func (p ingestPlan) retries(n int64) int64 {
	var k int64
	for i := int64(0); i < n; i++ {
		if _, r := p.original(i); r {
			k++
		}
	}
	return k
}

// moduleVersion is the module version a Go binary was built from ("" if unknown).
func moduleVersion(bin string) string {
	info, err := buildinfo.ReadFile(bin)
	if err != nil {
		return ""
	}
	return info.Main.Path + "@" + info.Main.Version
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}
