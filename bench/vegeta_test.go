package bench

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func testPlan() ingestPlan {
	f := &ingestFlags{common: common{rate: 100}, retry: 0.1, seed: 7}
	return newIngestPlan(f, "r1", 5, 3)
}

// The plan is what both generators send: a retry repeats request i-lag exactly (key,
// body, Idempotency-Key), and the keys are the ones ForgetRequests deletes.
func TestIngestPlan(t *testing.T) {
	p := testPlan()
	if p.lag != 50 {
		t.Fatalf("lag %d, want rate/2 = 50", p.lag)
	}
	var retries, chained int64
	for i := int64(0); i < 2000; i++ {
		j, retry := p.original(i)
		switch {
		case retry:
			retries++
			if j >= i || (i-j)%p.lag != 0 || p.isRetry(j) {
				t.Fatalf("retry %d repeats %d: want an earlier request, a multiple of %d back, that is no retry itself", i, j, p.lag)
			}
			if i-j > p.lag {
				chained++ // a retry of a retry: it must reuse the first request's key
			}
		case j != i:
			t.Fatalf("request %d repeats %d without being a retry", i, j)
		}
	}
	if retries < 150 || retries > 250 || p.retries(2000) != retries {
		t.Fatalf("%d retries in 2000 (counted %d), want about 10%%", retries, p.retries(2000))
	}
	if chained == 0 {
		t.Fatal("no retry of a retry in 2000 requests at 10%: the case the plan must follow back is untested")
	}
	if got := p.idemKey(42); got != "bench-r1-42" {
		t.Fatalf("idemKey = %q", got)
	}
	if p.body(7) != 2 || p.key(7) != 1 {
		t.Fatalf("body %d key %d for request 7", p.body(7), p.key(7))
	}
	p.idem = false
	if p.idemKey(1) != "" {
		t.Fatal("no Idempotency-Key expected with -no-idempotency-key")
	}
}

func TestWriteTargets(t *testing.T) {
	p := testPlan()
	var b bytes.Buffer
	if err := writeTargets(&b, 2, p, "http://h/events", []string{"Bearer a", "Bearer b", "Bearer c"}, []string{"/b0", "/b1", "/b2", "/b3", "/b4"}); err != nil {
		t.Fatal(err)
	}
	want := "POST http://h/events\nAuthorization: Bearer a\nContent-Type: application/json\nIdempotency-Key: bench-r1-0\n@/b0\n\n" +
		"POST http://h/events\nAuthorization: Bearer b\nContent-Type: application/json\nIdempotency-Key: bench-r1-1\n@/b1\n\n"
	if b.String() != want {
		t.Fatalf("targets:\n%s\nwant:\n%s", b.String(), want)
	}
	if err := writeTargets(failWriter{}, 5, p, "u", []string{"x", "y", "z"}, []string{"a", "b", "c", "d", "e"}); err == nil {
		t.Fatal("a write error must stop the targets")
	}
}

// The json targets carry each request's own body: request j's event ids (a retry
// repeats its original's ids, key and Idempotency-Key), decodable as vegeta reads them.
func TestWriteTargetsJSON(t *testing.T) {
	p := testPlan()
	gen := Generate(GenConfig{BatchSize: 3, Pixels: 1, Bodies: 5, Seed: 1, Now: time.Now()})
	bodies, slots := make([][]byte, len(gen)), make([][]int, len(gen))
	for i := range gen {
		bodies[i], slots[i] = BatchJSONWithIDs(&gen[i], "pxl_x", "r1")
	}
	var b bytes.Buffer
	const n = 200
	if err := writeTargetsJSON(&b, n, p, "http://h/events", []string{"Bearer a", "Bearer b", "Bearer c"}, bodies, slots); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(lines) != n {
		t.Fatalf("%d lines, want %d", len(lines), n)
	}
	seen := map[string]int64{} // event id -> request that sent it first
	for i, l := range lines {
		var tg struct {
			Method, URL string
			Header      map[string][]string
			Body        []byte // base64 in JSON
		}
		if err := json.Unmarshal([]byte(l), &tg); err != nil {
			t.Fatalf("line %d: %v: %s", i, err, l)
		}
		j, _ := p.original(int64(i))
		if tg.Method != "POST" || tg.URL != "http://h/events" || tg.Header["Authorization"][0] != []string{"Bearer a", "Bearer b", "Bearer c"}[p.key(j)] ||
			tg.Header["Idempotency-Key"][0] != p.idemKey(j) || tg.Header["Content-Type"][0] != "application/json" {
			t.Fatalf("line %d: %+v", i, tg)
		}
		var batch struct {
			Events []struct {
				EventID string `json:"event_id"`
			}
		}
		if err := json.Unmarshal(tg.Body, &batch); err != nil || len(batch.Events) == 0 {
			t.Fatalf("line %d body: %v: %s", i, err, tg.Body)
		}
		for _, ev := range batch.Events {
			if first, ok := seen[ev.EventID]; ok && first != j {
				t.Fatalf("event id %s sent by requests %d and %d", ev.EventID, first, j)
			}
			seen[ev.EventID] = j
		}
	}
	if len(seen) < n {
		t.Fatalf("%d distinct event ids over %d requests", len(seen), n)
	}
	if err := writeTargetsJSON(failWriter{}, 5, p, "u", []string{"x", "y", "z"}, bodies, slots); err == nil {
		t.Fatal("a write error must stop the targets")
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, io.ErrClosedPipe }

func TestParseVegetaReport(t *testing.T) {
	x, err := parseVegetaReport([]byte(`{"latencies":{"total":0,"mean":2500000,"50th":2000000,"90th":4000000,"95th":5000000,"99th":12345678,"max":40000000,"min":500000},
		"requests":1200,"rate":400.2,"throughput":399.9,"success":0.995,"status_codes":{"202":1194,"503":6},"errors":["503 Service Unavailable"]}`))
	if err != nil {
		t.Fatal(err)
	}
	if x.Requests != 1200 || x.Rate != 400.2 || x.Throughput != 399.9 || x.StatusCodes["202"] != 1194 || len(x.Errors) != 1 {
		t.Fatalf("%+v", x)
	}
	if l := x.Latency; l.P50 != 2 || l.P90 != 4 || x.P95 != 5 || l.P99 != 12.346 || l.Max != 40 || l.Mean != 2.5 || l.Min != 0.5 {
		t.Fatalf("latencies (ms) %+v p95 %v", l, x.P95)
	}
	if _, err := parseVegetaReport([]byte("not json")); err == nil {
		t.Fatal("bad JSON accepted")
	}
}

// csvRow renders one result as `vegeta encode -to=csv` does (encoding/csv).
func csvRow(start time.Time, code int, lat time.Duration, errText, body string, seq int, hdr string) string {
	var b bytes.Buffer
	w := csv.NewWriter(&b)
	_ = w.Write([]string{fmt.Sprint(start.UnixNano()), fmt.Sprint(code), fmt.Sprint(lat.Nanoseconds()), "9000", "100",
		errText, base64.StdEncoding.EncodeToString([]byte(body)), "svc-bench", fmt.Sprint(seq), "POST", "http://h/events",
		base64.StdEncoding.EncodeToString([]byte(hdr))})
	w.Flush()
	return b.String()
}

// Results become the usual figures: accepted events from 202 bodies (none for a
// replay), problem codes and transport errors by name, and latency from due = the
// attack's start + seq/rate, so a request vegeta sent late carries its wait.
func TestRecordVegetaResults(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ms := time.Millisecond
	csv := csvRow(t0, 202, 2*ms, "", `{"accepted":49,"rejected":1,"rejections":[]}`, 0, "Content-Type: application/json\r\n\r\n") +
		csvRow(t0.Add(10*ms), 202, 3*ms, "", `{"accepted":50,"rejected":0}`, 1, "Idempotent-Replayed: true\r\n\r\n") +
		csvRow(t0.Add(20*ms), 503, 1*ms, "", `{"type":"x","code":"service_unavailable"}`, 2, "") +
		// due at +30 ms, sent at +80 ms: 50 ms late, 55 ms from due.
		csvRow(t0.Add(80*ms), 0, 5*ms, "Post \"http://h/events\": context deadline exceeded (Client.Timeout exceeded while awaiting headers)", "", 3, "")
	rows, err := readVegetaCSV(strings.NewReader(csv))
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 4 || !rows[1].Replayed || rows[0].Replayed || rows[3].Seq != 3 {
		t.Fatalf("rows %+v", rows)
	}
	rec, elapsed := recordVegeta(rows, 100, 10*ms, 50)
	if elapsed != 85*ms {
		t.Fatalf("elapsed %v, want 85ms", elapsed)
	}
	var rep Report
	rec.Finish(&rep, elapsed)
	if q := rep.Requests; q.OK != 2 || q.Errors != 2 || q.Late != 1 {
		t.Fatalf("requests %+v", q)
	}
	if e := rep.Events; e.Accepted != 49 || e.Rejected != 1 || e.Sent != 150 {
		t.Fatalf("events %+v (sent: 50 answered + 0 replayed + 2×50 failed)", e)
	}
	if rep.Errors["503 service_unavailable"] != 1 || rep.Errors["timeout"] != 1 {
		t.Fatalf("errors %v", rep.Errors)
	}
	if rep.Latency.Max < 54.9 || rep.Latency.Max > 55.1 || rep.Service.Max < 4.9 || rep.Service.Max > 5.1 {
		t.Fatalf("latency from due max %v (want 55), service max %v (want 5)", rep.Latency.Max, rep.Service.Max)
	}
	if _, err := readVegetaCSV(strings.NewReader("1,2,3\n")); err == nil {
		t.Fatal("a short row must fail")
	}
}

func TestAddChildCPU(t *testing.T) {
	c := &CPU{Busy: 1.5, Procs: map[string]float64{"svc (target)": 0.5, "other": 1.0}}
	c.addChild("vegeta", 1500*time.Millisecond, 2) // 0.75 cores over the 2 s window
	if c.Procs["vegeta"] != 0.75 || c.Procs["other"] != 0.25 {
		t.Fatalf("%v", c.Procs)
	}
}

func TestCompareWithExternal(t *testing.T) {
	a := &Report{Title: "svc", Rate: 100, OKRate: 100, Service: Summary{P50: 2, P99: 10}}
	b := &Report{Title: "vegeta", Rate: 100, External: &External{Tool: "vegeta", Throughput: 99, Latency: Summary{P50: 3, P99: 15}}}
	var out bytes.Buffer
	PrintCompare(&out, a, b, "svc.json", "vegeta.json")
	for _, want := range []string{"p99 from send (A service time, B vegeta's own)", "1.50x", "ok/s (B vegeta's own throughput)", "0.99x"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("compare lacks %q:\n%s", want, out.String())
		}
	}
	var sum bytes.Buffer
	PrintSummary(&sum, b)
	if !strings.Contains(sum.String(), "vegeta's own report") || !strings.Contains(sum.String(), "p95") {
		t.Errorf("summary lacks vegeta's report:\n%s", sum.String())
	}
}

// TestVegetaAttackEndToEnd runs the real vegeta binary (BENCH_VEGETA, or vegeta on
// PATH; skipped when neither exists) against a stand-in /events: 60 targets at 200/s,
// every one answered, read back through vegeta's report and its per-request results.
func TestVegetaAttackEndToEnd(t *testing.T) {
	bin, err := exec.LookPath(envOr("BENCH_VEGETA", "vegeta"))
	if err != nil {
		t.Skip("no vegeta binary (set BENCH_VEGETA): ", err)
	}
	var hits, withKey atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		hits.Add(1)
		if r.Header.Get("Idempotency-Key") != "" && r.Header.Get("Authorization") != "" && string(body) != "" {
			withKey.Add(1)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(202)
		fmt.Fprintf(w, `{"accepted":%d,"rejected":0,"rejections":[]}`, bytes.Count(body, []byte("event_name")))
	}))
	defer srv.Close()
	dir := t.TempDir()
	paths := make([]string, 3)
	for i := range paths {
		paths[i] = filepath.Join(dir, fmt.Sprintf("b%d.json", i))
		body := `{"events":[` + strings.Repeat(`{"event_name":"x"},`, i) + `{"event_name":"x"}]}`
		if err := os.WriteFile(paths[i], []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	f := &ingestFlags{common: common{rate: 200, duration: 300 * time.Millisecond, timeout: 5 * time.Second, workers: 8, late: 10 * time.Millisecond}, batch: 3}
	plan := newIngestPlan(f, "t", len(paths), 2)
	va := vegetaAttack{bin: bin, results: filepath.Join(dir, "r.bin"), rate: f.rate, duration: f.duration, timeout: f.timeout, workers: f.workers}
	ctx := context.Background()
	cpu, err := va.run(ctx, func(w io.Writer) error {
		return writeTargets(w, 60, plan, srv.URL+"/events", []string{"Bearer a", "Bearer b"}, paths)
	})
	if err != nil {
		t.Fatal(err)
	}
	if cpu <= 0 {
		t.Errorf("vegeta's CPU time %v: want its user+system time", cpu)
	}
	x, err := va.report(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if x.Requests != 60 || x.StatusCodes["202"] != 60 || hits.Load() != 60 || withKey.Load() != 60 {
		t.Fatalf("vegeta report %+v; server saw %d (%d with key, auth and body)", x, hits.Load(), withKey.Load())
	}
	rec, elapsed, err := va.recordResults(ctx, f, 70) // 10 more planned than vegeta had time for
	if err != nil {
		t.Fatal(err)
	}
	var rep Report
	rec.Finish(&rep, elapsed)
	// 60 requests over bodies of 1, 2, 3 events in turn: 120 events.
	if rep.Requests.OK != 60 || rep.Requests.Unsent != 10 || rep.Requests.Scheduled != 70 || rep.Events.Accepted != 120 || elapsed < 250*time.Millisecond {
		t.Fatalf("requests %+v events %+v elapsed %v", rep.Requests, rep.Events, elapsed)
	}
	if v := moduleVersion(bin); !strings.HasPrefix(v, "github.com/tsenart/vegeta/v12@") {
		t.Logf("module version of %s: %q (not a go-installed vegeta)", bin, v)
	}

	// The json format (-event-ids): each request's body inline, its event ids its own.
	var ids sync.Map
	var dupIDs atomic.Int64
	srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var batch struct {
			Events []struct {
				EventID string `json:"event_id"`
			}
		}
		body, _ := io.ReadAll(r.Body)
		if json.Unmarshal(body, &batch) != nil || r.Header.Get("Idempotency-Key") == "" {
			w.WriteHeader(400)
			return
		}
		for _, ev := range batch.Events {
			if _, dup := ids.LoadOrStore(ev.EventID, true); dup {
				dupIDs.Add(1)
			}
		}
		w.WriteHeader(202)
		fmt.Fprintf(w, `{"accepted":%d,"rejected":0,"rejections":[]}`, len(batch.Events))
	})
	gen := Generate(GenConfig{BatchSize: 3, Pixels: 1, Bodies: 3, Seed: 1, Now: time.Now()})
	bodies, slots := make([][]byte, len(gen)), make([][]int, len(gen))
	for i := range gen {
		bodies[i], slots[i] = BatchJSONWithIDs(&gen[i], "pxl_x", "t")
	}
	vj := va
	vj.format, vj.results = "json", filepath.Join(dir, "rj.bin")
	if _, err := vj.run(ctx, func(w io.Writer) error {
		return writeTargetsJSON(w, 60, plan, srv.URL+"/events", []string{"Bearer a", "Bearer b"}, bodies, slots)
	}); err != nil {
		t.Fatal(err)
	}
	xj, err := vj.report(ctx)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	ids.Range(func(any, any) bool { n++; return true })
	if xj.Requests != 60 || xj.StatusCodes["202"] != 60 || dupIDs.Load() != 0 || n < 60 {
		t.Fatalf("json targets: vegeta report %+v; %d distinct event ids, %d repeated", xj, n, dupIDs.Load())
	}
}
