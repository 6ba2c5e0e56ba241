package e2e

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	json "github.com/goccy/go-json"
)

// tcpProxy forwards connections from a loopback port to target until cut.
type tcpProxy struct {
	addr  string
	ln    net.Listener
	mu    sync.Mutex
	conns []net.Conn
}

func newTCPProxy(t *testing.T, target string) *tcpProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &tcpProxy{addr: ln.Addr().String(), ln: ln}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			u, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, u)
			p.mu.Unlock()
			go func() { io.Copy(u, c); u.Close() }()
			go func() { io.Copy(c, u); c.Close() }()
		}
	}()
	t.Cleanup(p.cut)
	return p
}

// cut closes the listener and every forwarded connection: the target is gone.
func (p *tcpProxy) cut() {
	p.ln.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// checkJSONLines fails on any line of out that is not a JSON object with a level, a msg
// and a role among roles.
func checkJSONLines(t *testing.T, name string, out []byte, roles ...string) {
	t.Helper()
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	n := 0
	for sc.Scan() {
		line := sc.Bytes()
		n++
		var m map[string]any
		if err := json.Unmarshal(line, &m); err != nil {
			t.Errorf("%s: a line that is not a JSON object: %s", name, line)
			continue
		}
		level, _ := m["level"].(string)
		msg, _ := m["msg"].(string)
		role, _ := m["role"].(string)
		if level == "" || msg == "" || !contains(roles, role) {
			t.Errorf("%s: want level, msg and role in %v: %s", name, roles, line)
		}
	}
	if n == 0 {
		t.Errorf("%s: wrote nothing", name)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// TestEveryRoleLogsJSONLines runs every role as the built binary through the paths that
// log: a database that does not exist (svc api exits with its error; svc rollup waits
// for it), a flush that fails (the events table renamed away), Redis cut under the
// consumer (go-redis's own dial errors), the broker stopped under the consumer
// (franz-go's warnings), then svc dev. Every line each process
// wrote is a JSON object with level, msg and the role that wrote it.
func TestEveryRoleLogsJSONLines(t *testing.T) {
	in := newInstance(t)
	in.env = append(in.env, "SVC_ROLLUP_BATCH_INTERVAL=100ms", "SVC_ROLLUP_RETRY_MIN=50ms", "SVC_ROLLUP_RETRY_MAX=300ms",
		"SVC_ROLLUP_SESSION_TIMEOUT=3s")
	db := in.getenv("SVC_CLICKHOUSE_DB")
	kafka := "SVC_KAFKA_BROKERS=" + in.getenv("SVC_EMBEDDED_KAFKA_ADDR")
	brk := in.spawn(t, "broker")

	// svc api against a database that does not exist exits with its error.
	missing := in.spawn(t, "api", "SVC_CLICKHOUSE_DB="+db+"_missing")
	if err := missing.Cmd.Wait(); err == nil {
		t.Fatal("svc api started against a missing database")
	}
	checkJSONLines(t, "svc api (missing database)", []byte(missing.Output()), "api")

	// svc rollup waits for its database, then consumes through a Redis that is cut later.
	redisProxy := newTCPProxy(t, redisAddr(in.getenv("SVC_REDIS_URL")))
	roll := in.spawn(t, "rollup", kafka, "SVC_REDIS_URL=redis://"+redisProxy.addr+"/0")
	roll.WaitLog(t, 20*time.Second, "ClickHouse not reachable yet")
	in.run("migrate")
	ws := field(t, in.run("admin", "workspace", "create", "--name", "Logs"), "id")
	px := field(t, in.run("admin", "pixel", "create", "--workspace", ws), "id")
	secret := field(t, in.run("admin", "key", "create", "--workspace", ws, "--env", "live", "--scopes", "events:write"), "secret")
	edge, api, wh := in.spawn(t, "ingest", kafka), in.spawn(t, "api"), in.spawn(t, "webhooks")
	for _, p := range []*proc{edge, api, wh, roll} {
		p.WaitReady(t, 30*time.Second)
	}
	post := func(n int) int {
		body := fmt.Sprintf(`{"pixel_id":%q,"events":[{"event_name":"purchase","occurred_at":%q,"value":%d,"currency":"EUR","consent":{"measurement":true}}]}`,
			px, time.Now().UTC().Add(-time.Minute).Format(time.RFC3339), n)
		// With an Idempotency-Key, so the consumer claims the batch id in Redis.
		st, _ := edge.post(t, secret, body, "Idempotency-Key", fmt.Sprint("logs-", n))
		return st
	}
	if st := post(1); st != 202 {
		t.Fatalf("POST /events: %d", st)
	}
	waitCount(t, db, 1)

	// A flush that fails: the table is away, then back.
	chq(t, "RENAME TABLE "+db+".events TO "+db+".events_away")
	if st := post(2); st != 202 {
		t.Fatalf("POST /events: %d", st)
	}
	roll.WaitLog(t, 20*time.Second, "flush failed; retrying")
	chq(t, "RENAME TABLE "+db+".events_away TO "+db+".events")
	waitCount(t, db, 2)

	// Redis cut under the consumer: its batch claims fail, go-redis cannot dial.
	redisProxy.cut()
	if st := post(3); st != 202 {
		t.Fatalf("POST /events: %d", st)
	}
	roll.WaitLog(t, 20*time.Second, "failed to dial")

	// The broker stops under the consumer.
	for _, p := range []*proc{edge, api, wh} {
		p.Stop(t, 40*time.Second)
	}
	brk.Stop(t, 40*time.Second)
	time.Sleep(2 * time.Second)
	roll.Stop(t, 40*time.Second)
	checkJSONLines(t, "svc broker", []byte(brk.Output()), "broker")
	checkJSONLines(t, "svc ingest", []byte(edge.Output()), "ingest")
	checkJSONLines(t, "svc api", []byte(api.Output()), "api")
	checkJSONLines(t, "svc webhooks", []byte(wh.Output()), "webhooks", "privacy")
	checkJSONLines(t, "svc rollup", []byte(roll.Output()), "rollup")
	if !strings.Contains(roll.Output(), `"lib":"go-redis"`) || !strings.Contains(roll.Output()+edge.Output(), `"lib":"franz-go"`) {
		t.Errorf("the libraries' own lines are missing:\nrollup:\n%s\ningest:\n%s", roll.Output(), edge.Output())
	}

	// svc dev: every role in one process, each line naming its role.
	in.start()
	if st, b := in.post(secret, "/v1/events", fmt.Sprintf(`{"pixel_id":%q,"events":[{"event_name":"lead","occurred_at":%q,"consent":{"measurement":true}}]}`,
		px, time.Now().UTC().Add(-time.Minute).Format(time.RFC3339))); st != 202 {
		t.Fatalf("svc dev POST /events: %d %s", st, b)
	}
	if err := in.stop(); err != nil {
		t.Fatalf("svc dev: %v", err)
	}
	checkJSONLines(t, "svc dev", in.log.Bytes(), "dev", "ingest", "rollup", "api", "webhooks", "privacy", "app", "broker")
}

// redisAddr is the host:port of a redis:// URL.
func redisAddr(url string) string {
	if url == "" {
		return "127.0.0.1:6379"
	}
	hp := strings.TrimPrefix(url, "redis://")
	if i := strings.LastIndex(hp, "@"); i >= 0 {
		hp = hp[i+1:]
	}
	hp, _, _ = strings.Cut(hp, "/")
	return hp
}

func chq(t *testing.T, q string) string {
	t.Helper()
	out, err := exec.Command("clickhouse-client", "--port", chPort(), "-q", q).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", q, err, out)
	}
	return strings.TrimSpace(string(out))
}

// waitCount waits until db.events holds n rows.
func waitCount(t *testing.T, db string, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		got := chq(t, "SELECT count() FROM "+db+".events")
		if got == fmt.Sprint(n) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s.events holds %s rows, want %d", db, got, n)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
