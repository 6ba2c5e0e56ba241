package main

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"svc/lib/svctest"
)

// proc is one svc process of a multi-process topology.
type proc struct {
	name string
	cmd  *exec.Cmd
	http string
	log  syncBuffer // stdout and stderr
}

// syncBuffer is a bytes.Buffer that the process's output copiers and the test may use
// at the same time.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func (s *syncBuffer) Bytes() []byte { return []byte(s.String()) }

func (p *proc) output() string { return p.log.String() }

// post sends body to p's POST /v1/events with the secret and headers (name, value, ...).
func (p *proc) post(t *testing.T, secret, body string, headers ...string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest("POST", "http://"+p.http+"/v1/events", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+secret)
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := (&http.Client{Timeout: 15 * time.Second}).Do(req)
	if err != nil {
		return 0, []byte(err.Error())
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func (in *instance) spawn(t *testing.T, name string, extra ...string) *proc {
	t.Helper()
	p := &proc{name: name, http: svctest.FreeAddr(t)}
	args := strings.Fields(name)
	p.cmd = exec.Command(svcBin, args[0])
	p.cmd.Env = append(append(append([]string{}, in.env...), "SVC_HTTP_ADDR="+p.http, "SVC_METRICS_ADDR=off"), extra...)
	p.cmd.Stdout, p.cmd.Stderr = &p.log, &p.log
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if p.cmd.ProcessState == nil {
			p.cmd.Process.Kill()
			p.cmd.Wait()
		}
	})
	return p
}

func (p *proc) waitReady(t *testing.T, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if resp, err := http.Get("http://" + p.http + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s not ready:\n%s", p.name, p.log.String())
}

func (p *proc) kill() {
	p.cmd.Process.Kill()
	p.cmd.Wait()
}

// TestScaleOutSurvivesLosingAnEdgeAndAConsumer: two edges and two consumers as
// separate processes against one broker with four partitions. Under load, one edge and
// one consumer are killed with SIGKILL; clients retry on the other edge with the same
// Idempotency-Key. Every event answered 202 is stored exactly once, and throughput
// recovers on the surviving edge.
func TestScaleOutSurvivesLosingAnEdgeAndAConsumer(t *testing.T) {
	in := newInstance(t)
	brokerAddr := in.getenv("SVC_EMBEDDED_KAFKA_ADDR")
	in.env = append(in.env, "SVC_KAFKA_PARTITIONS=4", "SVC_ROLLUP_BATCH_INTERVAL=200ms",
		"SVC_ROLLUP_SESSION_TIMEOUT=3s", "SVC_IDEMPOTENCY_PENDING_TTL=3s")
	brk := in.spawn(t, "broker")
	in.run("migrate")
	ws := field(t, in.run("admin", "workspace", "create", "--name", "Scale"), "id")
	var pixels []string
	for i := 0; i < 4; i++ {
		pixels = append(pixels, field(t, in.run("admin", "pixel", "create", "--workspace", ws), "id"))
	}
	secret := field(t, in.run("admin", "key", "create", "--workspace", ws, "--env", "live", "--scopes", "events:write",
		"--burst", "1000000", "--daily", "100000000"), "secret")
	kafka := "SVC_KAFKA_BROKERS=" + brokerAddr
	edges := []*proc{in.spawn(t, "ingest", kafka), in.spawn(t, "ingest", kafka)}
	consumers := []*proc{in.spawn(t, "rollup", kafka), in.spawn(t, "rollup", kafka)}
	for _, p := range append(edges, consumers...) {
		p.waitReady(t, 30*time.Second)
	}
	_ = brk

	var accepted atomic.Int64
	var alive atomic.Int32
	alive.Store(2)
	const perBatch = 10
	start := time.Now()
	buckets := make([]atomic.Int64, 40) // 202s per 250 ms
	stop := make(chan struct{})
	var wg sync.WaitGroup
	client := &http.Client{Timeout: 10 * time.Second}
	send := func(edge *proc, body, key string) (int, error) {
		req, _ := http.NewRequest("POST", "http://"+edge.http+"/v1/events", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+secret)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", key)
		resp, err := client.Do(req)
		if err != nil {
			return 0, err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				var evs []string
				at := time.Now().UTC().Add(-time.Minute).Format(time.RFC3339)
				for i := 0; i < perBatch; i++ {
					evs = append(evs, fmt.Sprintf(`{"event_name":"purchase","occurred_at":%q,"value":1,"currency":"EUR","consent":{"measurement":true}}`, at))
				}
				body := fmt.Sprintf(`{"pixel_id":%q,"events":[%s]}`, pixels[(w+n)%len(pixels)], strings.Join(evs, ","))
				key := fmt.Sprintf("w%d-n%d", w, n)
				// Retry the same logical batch, with the same key, until an edge says 202.
				for try := 0; ; try++ {
					edge := edges[(w+n+try)%2]
					if alive.Load() == 1 {
						edge = edges[1]
					}
					st, err := send(edge, body, key)
					if err == nil && st == 202 {
						accepted.Add(perBatch)
						if b := int(time.Since(start) / (250 * time.Millisecond)); b < len(buckets) {
							buckets[b].Add(1)
						}
						break
					}
					if err == nil && st != 503 && st != 409 {
						t.Errorf("POST /events: %d", st)
						return
					}
					if try > 200 {
						t.Errorf("batch %s never accepted", key)
						return
					}
					time.Sleep(50 * time.Millisecond)
				}
			}
		}(w)
	}
	time.Sleep(3 * time.Second)
	edges[0].kill()
	alive.Store(1)
	consumers[0].kill()
	time.Sleep(5 * time.Second)
	close(stop)
	wg.Wait()
	if t.Failed() {
		return
	}
	rate := func(from, to int) float64 {
		n := int64(0)
		for i := from; i < to; i++ {
			n += buckets[i].Load()
		}
		return float64(n) / (float64(to-from) / 4)
	}
	before, after := rate(4, 12), rate(20, 32)
	t.Logf("accepted %d events; 202/s before the kill %.0f, after %.0f", accepted.Load(), before, after)
	if after < before/3 {
		t.Fatalf("throughput did not recover: %.0f/s after vs %.0f/s before", after, before)
	}
	db := in.getenv("SVC_CLICKHOUSE_DB")
	deadline := time.Now().Add(60 * time.Second)
	want := fmt.Sprintf("%d\t%d", accepted.Load(), accepted.Load())
	for {
		out, err := exec.Command("clickhouse-client", "--port", chPort(), "-q", "SELECT count(), uniqExact(event_id) FROM "+db+".events").Output()
		got := strings.TrimSpace(string(out))
		if err == nil && got == want {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("events table %q, want %q (count, distinct ids)\nconsumer log:\n%s", got, want, consumers[1].log.String())
		}
		time.Sleep(500 * time.Millisecond)
	}
}
