package e2e

// End-to-end tests: they build the svc binary and run it as a user would (make run's
// steps), against the real Redis and ClickHouse and the embedded broker.

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	json "github.com/goccy/go-json"
	"github.com/twmb/franz-go/pkg/kgo"

	"svc/lib/process"
	"svc/lib/svctest"
	"svc/rollup"
	"svc/schema"
)

var svcBin string

func TestMain(m *testing.M) {
	bin, err := svctest.Build()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	svcBin = bin
	os.Exit(svctest.RunTests(m))
}

// chPort is the native port of the test ClickHouse (from SVC_CLICKHOUSE_ADDR; of a
// cluster's list, the first server: every table the tests read is Distributed there).
func chPort() string {
	if a, _, _ := strings.Cut(os.Getenv("SVC_CLICKHOUSE_ADDR"), ","); a != "" {
		if _, p, err := net.SplitHostPort(a); err == nil {
			return p
		}
	}
	return "9000"
}

// instance is one environment for svc processes: ports, data dir, database.
type instance struct {
	t    *testing.T
	env  []string
	http string
	dev  *exec.Cmd
	log  *bytes.Buffer
	// exited is closed when dev has exited; waitErr is then its exit error.
	exited  chan struct{}
	waitErr error
}

func newInstance(t *testing.T) *instance {
	in := &instance{t: t, http: svctest.FreeAddr(t)}
	db := fmt.Sprintf("svc_e2e_%d", time.Now().UnixNano())
	in.env = append(os.Environ(),
		"SVC_HTTP_ADDR="+in.http, "SVC_METRICS_ADDR=off", "SVC_EMBEDDED_KAFKA_ADDR="+svctest.FreeAddr(t),
		"SVC_DATA_DIR="+t.TempDir(), "SVC_CLICKHOUSE_DB="+db, "SVC_KAFKA_PARTITIONS=2",
		"SVC_INGEST_DELIVERY_TIMEOUT=2s", svctest.WebhooksEnv(t))
	t.Cleanup(func() {
		in.stop()
		exec.Command("clickhouse-client", "--port", chPort(), "-q", "DROP DATABASE IF EXISTS "+db).Run()
		if rdb, err := process.OpenRedis(context.Background(), svctest.RedisConfig()); err == nil {
			_, _ = rollup.DropEventClaims(context.Background(), rdb, db) // the database's event-id claims
			rdb.Close()
		}
	})
	return in
}

// getenv returns the value the processes see: the last one set.
func (in *instance) getenv(name string) string {
	for i := len(in.env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(in.env[i], name+"="); ok {
			return v
		}
	}
	return ""
}

// run runs `svc args...` to completion and returns stdout.
func (in *instance) run(args ...string) []byte {
	in.t.Helper()
	return svctest.Run(in.t, in.env, args...)
}

func (in *instance) start() {
	in.t.Helper()
	for attempt := 0; ; attempt++ {
		if in.tryStart() {
			return
		}
		// A port picked free may be taken by another test's process before svc binds
		// it: pick new ones and try again.
		if attempt < 3 && strings.Contains(in.log.String(), "address already in use") {
			in.http = svctest.FreeAddr(in.t)
			in.env = append(in.env, "SVC_HTTP_ADDR="+in.http, "SVC_EMBEDDED_KAFKA_ADDR="+in.embeddedAddr())
			continue
		}
		in.t.Fatalf("svc dev not ready:\n%s", in.log.String())
	}
}

// embeddedAddr keeps the broker's address unless the failed start was its bind.
func (in *instance) embeddedAddr() string {
	addr := in.getenv("SVC_EMBEDDED_KAFKA_ADDR")
	if strings.Contains(in.log.String(), addr+": bind") || strings.Contains(in.log.String(), "embedded kafka on "+addr) {
		return svctest.FreeAddr(in.t)
	}
	return addr
}

// tryStart starts svc dev and waits until it is ready (true) or has exited or timed out.
func (in *instance) tryStart() bool {
	in.log = &bytes.Buffer{}
	in.dev = exec.Command(svcBin, "dev")
	in.dev.Env = in.env
	in.dev.Stdout, in.dev.Stderr = in.log, in.log
	if err := in.dev.Start(); err != nil {
		in.t.Fatal(err)
	}
	in.exited = make(chan struct{})
	go func(cmd *exec.Cmd, exited chan struct{}) { in.waitErr = cmd.Wait(); close(exited) }(in.dev, in.exited)
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-in.exited:
			in.dev, in.exited = nil, nil
			return false
		default:
		}
		resp, err := http.Get("http://" + in.http + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return true
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	in.dev.Process.Kill()
	<-in.exited
	in.dev, in.exited = nil, nil
	return false
}

// stop sends SIGTERM and waits; it returns the exit error.
func (in *instance) stop() error {
	if in.dev == nil || in.dev.Process == nil {
		return nil
	}
	if in.exited == nil { // started by hand (exec.Cmd.Start) rather than by start()
		in.exited = make(chan struct{})
		go func(cmd *exec.Cmd, exited chan struct{}) { in.waitErr = cmd.Wait(); close(exited) }(in.dev, in.exited)
	}
	in.dev.Process.Signal(syscall.SIGTERM)
	select {
	case <-in.exited:
		in.dev, in.exited = nil, nil
		return in.waitErr
	case <-time.After(40 * time.Second):
		in.dev.Process.Kill()
		<-in.exited
		in.dev, in.exited = nil, nil
		return fmt.Errorf("svc dev did not stop within 40s")
	}
}

func field(t *testing.T, js []byte, name string) string {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(js, &m); err != nil {
		t.Fatalf("not JSON: %s", js)
	}
	s, _ := m[name].(string)
	if s == "" {
		t.Fatalf("no %s in %s", name, js)
	}
	return s
}

func (in *instance) post(secret, path, body string, headers ...string) (int, []byte) {
	req, _ := http.NewRequest("POST", "http://"+in.http+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+secret)
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		in.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// topicRecords counts the records in the events topic of the instance's broker.
func (in *instance) topicRecords() int {
	cl, err := kgo.NewClient(kgo.SeedBrokers(in.getenv("SVC_EMBEDDED_KAFKA_ADDR")), kgo.ConsumeTopics(schema.TopicEvents),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		in.t.Fatal(err)
	}
	defer cl.Close()
	n := 0
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return n
		}
		n += fs.NumRecords()
	}
}

// TestDevAcceptsAndKeepsBatchesAcrossRestart: the README's path (admin commands, POST
// /events) through the built binary; SIGTERM exits cleanly; a restart keeps every
// acknowledged batch in the embedded broker's data dir.
func TestDevAcceptsAndKeepsBatchesAcrossRestart(t *testing.T) {
	in := newInstance(t)
	in.run("migrate")
	ws := field(t, in.run("admin", "workspace", "create", "--name", "E2E"), "id")
	px := field(t, in.run("admin", "pixel", "create", "--workspace", ws), "id")
	secret := field(t, in.run("admin", "key", "create", "--workspace", ws, "--env", "live", "--scopes", "events:write,pixels:read"), "secret")
	in.start()
	now := time.Now().UTC().Add(-time.Minute).Format(time.RFC3339)
	for i := 0; i < 3; i++ {
		body := fmt.Sprintf(`{"pixel_id":%q,"events":[{"event_name":"purchase","occurred_at":%q,"value":10,"currency":"EUR","consent":{"measurement":true},"identity":{"email":"p%d@example.com"}}]}`, px, now, i)
		if st, b := in.post(secret, "/v1/events", body); st != 202 {
			t.Fatalf("POST /v1/events: %d %s", st, b)
		}
	}
	if err := in.stop(); err != nil {
		t.Fatalf("svc dev after SIGTERM: %v\n%s", err, in.log)
	}
	if strings.Contains(in.log.String(), "@example.com") {
		t.Fatal("a raw email reached the log")
	}
	// The broker is gone with the process; start it again on the same data dir.
	in.start()
	if n := in.topicRecords(); n != 3 {
		t.Fatalf("%d records after restart, want 3", n)
	}
}

// TestAdminCommandsRefuseBadArguments: each admin command exits non-zero with a message.
func TestAdminCommandsRefuseBadArguments(t *testing.T) {
	in := newInstance(t)
	ws := field(t, in.run("admin", "workspace", "create", "--name", "Live"), "id")
	show := field(t, in.run("admin", "workspace", "create", "--name", "Show", "--showroom"), "id")
	bad := [][]string{
		{"admin", "workspace", "create"},
		{"admin", "pixel", "create", "--workspace", "org_nope"},
		{"admin", "key", "create", "--workspace", ws, "--env", "sandbox", "--scopes", "events:write"},
		{"admin", "key", "create", "--workspace", show, "--env", "live", "--scopes", "events:write"},
		{"admin", "key", "create", "--workspace", ws, "--env", "live", "--scopes", "events:delete"},
		{"admin", "key", "create", "--workspace", ws, "--env", "live", "--scopes", "events:write", "--expires", "tomorrow"},
		{"admin", "key", "create", "--workspace", ws, "--env", "live", "--scopes", "events:write", "--allow", "300.1.1.1"},
		{"admin", "key", "create", "--workspace", ws, "--env", "live", "--scopes", "events:write", "--version", "1999-01-01"},
		{"admin", "workspace", "create", "--name", "Zoned", "--time-zone", "Mars/Olympus"},
		{"admin", "workspace", "set-time-zone", ws, "+05:45"},
		{"admin", "workspace", "set-time-zone", ws},
		{"admin", "pixel", "create", "--workspace", ws, "--time-zone", "Local"},
		{"admin", "pixel", "set-time-zone", "pxl_nope", "UTC"},
		{"admin", "key", "revoke"},
		{"admin", "key", "rotate", "key_nope"},
		{"admin", "frobnicate"},
	}
	for _, args := range bad {
		cmd := exec.Command(svcBin, args...)
		cmd.Env = in.env
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err == nil || stderr.Len() == 0 || len(out) != 0 {
			t.Fatalf("svc %v: err=%v stdout=%q stderr=%q", args, err, out, stderr.String())
		}
	}
	key := in.run("admin", "key", "create", "--workspace", show, "--env", "sandbox", "--scopes", "events:write", "--burst", "5", "--daily", "50")
	id := field(t, key, "id")
	if !strings.HasPrefix(field(t, key, "secret"), "svc_sandbox_") {
		t.Fatalf("sandbox secret prefix: %s", key)
	}
	rot := in.run("admin", "key", "rotate", id, "--overlap", "1h")
	if field(t, rot, "previous_cutover_at") == "" || field(t, rot, "secret") == field(t, key, "secret") {
		t.Fatalf("rotate: %s", rot)
	}
	lim := in.run("admin", "key", "set-limits", id, "--burst", "600", "--daily", "100000")
	if !bytes.Contains(lim, []byte(`"burst":600`)) || bytes.Contains(lim, []byte("secret")) {
		t.Fatalf("set-limits: %s", lim)
	}
	list := in.run("admin", "key", "list", "--workspace", show)
	if !bytes.Contains(list, []byte(id)) || bytes.Contains(list, []byte("svc_sandbox_")) {
		t.Fatalf("list: %s", list)
	}
	rev := in.run("admin", "key", "revoke", id)
	if field(t, rev, "status") != "revoked" {
		t.Fatalf("revoke: %s", rev)
	}
}

func (in *instance) get(secret, path string) (int, []byte) {
	req, _ := http.NewRequest("GET", "http://"+in.http+path, nil)
	req.Header.Set("Authorization", "Bearer "+secret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		in.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// TestEventsReachRollupsExactlyOnce: known events in through POST /events (with an
// idempotent retry and a rejected event among them), rollups out through GET
// /pixel-rollups, equal to totals computed here; the same in ClickHouse.
func TestEventsReachRollupsExactlyOnce(t *testing.T) {
	in := newInstance(t)
	in.env = append(in.env, "SVC_ROLLUP_BATCH_INTERVAL=200ms", "SVC_ROLLUP_SESSION_TIMEOUT=6s")
	in.run("migrate")
	ws := field(t, in.run("admin", "workspace", "create", "--name", "Pipeline"), "id")
	px := field(t, in.run("admin", "pixel", "create", "--workspace", ws), "id")
	secret := field(t, in.run("admin", "key", "create", "--workspace", ws, "--env", "live", "--scopes", "events:write,pixels:read", "--burst", "1000"), "secret")
	in.start()

	type total struct {
		events, consented int
		value             float64
		people            map[string]bool
	}
	want := map[string]*total{} // "date|name|currency"
	now := time.Now().UTC()
	yesterday := now.Add(-24 * time.Hour)
	for i := 0; i < 40; i++ {
		at, name, cur := now.Add(-time.Minute), "purchase", "EUR"
		if i%4 == 0 {
			at = yesterday // a late event lands on its own day
		}
		if i%5 == 0 {
			name, cur = "lead", "USD"
		}
		consent := i%3 != 0
		email := fmt.Sprintf("person%d@example.com", i%7)
		body := fmt.Sprintf(`{"pixel_id":%q,"events":[{"event_name":%q,"occurred_at":%q,"value":%d.25,"currency":%q,"consent":{"measurement":%v},"identity":{"email":%q}},{"event_name":"broken"}]}`,
			px, name, at.Format(time.RFC3339), i, cur, consent, email)
		key := fmt.Sprintf("batch-%d", i)
		for try := 0; try < 2; try++ { // every batch is sent twice with its key
			if st, b := in.post(secret, "/events", body, "Idempotency-Key", key); st != 202 || !bytes.Contains(b, []byte(`"accepted":1,"rejected":1`)) {
				t.Fatalf("POST /events: %d %s", st, b)
			}
		}
		k := at.Format("2006-01-02") + "|" + name + "|" + cur
		if want[k] == nil {
			want[k] = &total{people: map[string]bool{}}
		}
		w := want[k]
		w.events++
		w.value += float64(i) + 0.25
		if consent {
			w.consented++
			w.people[email] = true
		}
	}
	type row struct {
		Date            string `json:"date"`
		EventName       string `json:"event_name"`
		Currency        string `json:"currency"`
		Events          int    `json:"events"`
		ConsentedEvents int    `json:"consented_events"`
		Value           string `json:"value"`
		UniquePeople    int    `json:"unique_people"`
		Status          string `json:"status"`
		PixelID         string `json:"pixel_id"`
		PixelIDUUID     string `json:"pixel_id_uuid"`
	}
	var got []row
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, b := in.get(secret, "/v1/pixel-rollups?pixel_id="+px+"&limit=2")
		if st != 200 {
			t.Fatalf("GET /pixel-rollups: %d %s", st, b)
		}
		got = got[:0]
		// Walk every page by cursor.
		for {
			var page struct {
				Data []row `json:"data"`
				Meta struct {
					NextCursor *string `json:"next_cursor"`
				} `json:"meta"`
			}
			if err := json.Unmarshal(b, &page); err != nil {
				t.Fatal(err)
			}
			got = append(got, page.Data...)
			if page.Meta.NextCursor == nil {
				break
			}
			st, b = in.get(secret, "/v1/pixel-rollups?pixel_id="+px+"&limit=2&cursor="+*page.Meta.NextCursor)
			if st != 200 {
				t.Fatalf("next page: %d %s", st, b)
			}
		}
		n := 0
		for _, r := range got {
			n += r.Events
		}
		if n >= 40 || time.Now().After(deadline) {
			break
		}
		time.Sleep(300 * time.Millisecond)
	}
	if len(got) != len(want) {
		t.Fatalf("%d rollup rows, want %d: %+v\nlog:\n%s", len(got), len(want), got, in.log)
	}
	for _, r := range got {
		w := want[r.Date+"|"+r.EventName+"|"+r.Currency]
		if w == nil {
			t.Fatalf("unexpected row %+v", r)
		}
		if r.Events != w.events || r.ConsentedEvents != w.consented || r.Value != fmt.Sprintf("%.4f", w.value) ||
			r.UniquePeople != len(w.people) || r.Status != "open" || r.PixelID != px || !strings.HasSuffix(px, r.PixelIDUUID) {
			t.Fatalf("row %+v, want %+v (people %d)", r, *w, len(w.people))
		}
	}
	// ClickHouse holds each accepted event once.
	out, err := exec.Command("clickhouse-client", "--port", chPort(), "-q", "SELECT count(), uniqExact(event_id) FROM "+in.getenv("SVC_CLICKHOUSE_DB")+".events").Output()
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(string(out)) != "40\t40" {
		t.Fatalf("events table: %q, want 40 rows, 40 distinct ids", out)
	}
}
