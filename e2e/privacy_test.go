package e2e

// End-to-end tests of erasure and retention (privacy/README.md) through the built
// binary: svc dev, the admin commands, the HTTP API, ClickHouse as an analyst sees it.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	json "github.com/goccy/go-json"

	"svc/lib/signature"
	"svc/schema/apitest"
)

// privacyEnv makes the pipeline and the privacy worker quick for tests, and lets
// deliveries reach the tests' webhook receivers (httptest servers on loopback).
var privacyEnv = []string{"SVC_ROLLUP_BATCH_INTERVAL=200ms", "SVC_ROLLUP_SESSION_TIMEOUT=6s", "SVC_PRIVACY_POLL=200ms",
	"SVC_WEBHOOKS_POLL=100ms", "SVC_WEBHOOKS_ALLOW_NETS=127.0.0.0/8"}

// ch runs a query with clickhouse-client in the instance's database and returns its
// output, trimmed.
func (in *instance) ch(q string) string {
	in.t.Helper()
	out, err := exec.Command("clickhouse-client", "--port", chPort(), "--database", in.getenv("SVC_CLICKHOUSE_DB"), "-q", q).CombinedOutput()
	if err != nil {
		in.t.Fatalf("clickhouse-client: %v\n%s\n%s", err, q, out)
	}
	return strings.TrimSpace(string(out))
}

func (in *instance) chInt(q string) int {
	in.t.Helper()
	n, err := strconv.Atoi(in.ch(q))
	if err != nil {
		in.t.Fatalf("%s: %v", q, err)
	}
	return n
}

// waitFor polls cond until it holds or timeout passes.
func (in *instance) waitFor(what string, timeout time.Duration, cond func() bool) {
	in.t.Helper()
	for deadline := time.Now().Add(timeout); !cond(); time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			in.t.Fatalf("%s: not within %v\nlog:\n%s", what, timeout, in.log)
		}
	}
}

// forgetIdentities removes, at the end of the test, the erased identities the test's
// workspaces registered in the shared Redis (the pipeline's list is global).
func forgetIdentities(t *testing.T, workspaces ...string) {
	rdb := apitest.Redis(t)
	t.Cleanup(func() {
		ctx := context.Background()
		fields, err := rdb.HKeys(ctx, "svc:privacy:{ids}").Result()
		if err != nil {
			return
		}
		for _, f := range fields {
			for _, ws := range workspaces {
				if strings.HasPrefix(f, strings.TrimPrefix(ws, "org_")+":") {
					rdb.HDel(ctx, "svc:privacy:{ids}", f)
				}
			}
		}
	})
}

func sha(email string) string {
	s := sha256.Sum256([]byte(email))
	return hex.EncodeToString(s[:])
}

// rollupRow is one row of GET /pixel-rollups.
type rollupRow struct {
	Date         string `json:"date"`
	EventName    string `json:"event_name"`
	Currency     string `json:"currency"`
	Events       int    `json:"events"`
	Consented    int    `json:"consented_events"`
	Value        string `json:"value"`
	UniquePeople int    `json:"unique_people"`
}

// eventsCounted is the events counted in rows.
func eventsCounted(rows map[string]rollupRow) int {
	n := 0
	for _, r := range rows {
		n += r.Events
	}
	return n
}

func (in *instance) rollups(secret, pixel string) map[string]rollupRow {
	in.t.Helper()
	st, b := in.get(secret, "/v1/pixel-rollups?limit=1000&pixel_id="+pixel)
	if st != 200 {
		in.t.Fatalf("GET /pixel-rollups: %d %s", st, b)
	}
	var page struct {
		Data []rollupRow `json:"data"`
	}
	if err := json.Unmarshal(b, &page); err != nil {
		in.t.Fatal(err)
	}
	out := map[string]rollupRow{}
	for _, r := range page.Data {
		out[r.Date+"|"+r.EventName+"|"+r.Currency] = r
	}
	return out
}

// erasure waits until erasure id reaches status completed and returns its record.
func (in *instance) erasure(secret, id string) map[string]any {
	in.t.Helper()
	var rec map[string]any
	in.waitFor("erasure "+id+" completed", 90*time.Second, func() bool {
		st, b := in.get(secret, "/v1/erasures/"+id)
		if st != 200 {
			in.t.Fatalf("GET /erasures/%s: %d %s", id, st, b)
		}
		rec = map[string]any{}
		_ = json.Unmarshal(b, &rec)
		return rec["status"] == "completed"
	})
	return rec
}

type sentEvent struct {
	day, name string
	consent   bool
	email     string
}

// TestErasureEndToEnd: events of three people in a workspace and of one of them in a
// second workspace; erasing that person through POST /erasures leaves no row with the
// hash in the first workspace's events, drops unique_people by exactly one on each day
// and event the person was counted, keeps events and value, leaves the second
// workspace's identical hash alone, and delivers a signed erasure.completed whose data
// is the record.
func TestErasureEndToEnd(t *testing.T) {
	in := newInstance(t)
	in.env = append(in.env, privacyEnv...)
	in.run("migrate")
	wsA := field(t, in.run("admin", "workspace", "create", "--name", "Erase A"), "id")
	pxA := field(t, in.run("admin", "pixel", "create", "--workspace", wsA), "id")
	keyA := field(t, in.run("admin", "key", "create", "--workspace", wsA, "--env", "live", "--scopes", "events:write,pixels:read,identities:erase", "--burst", "1000"), "secret")
	wsB := field(t, in.run("admin", "workspace", "create", "--name", "Erase B"), "id")
	pxB := field(t, in.run("admin", "pixel", "create", "--workspace", wsB), "id")
	keyB := field(t, in.run("admin", "key", "create", "--workspace", wsB, "--env", "live", "--scopes", "events:write,pixels:read", "--burst", "1000"), "secret")
	forgetIdentities(t, wsA, wsB)

	var mu sync.Mutex
	var deliveries [][]byte
	var headers []http.Header
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		deliveries, headers = append(deliveries, b), append(headers, r.Header.Clone())
		mu.Unlock()
	}))
	defer recv.Close()
	whSecret := field(t, in.run("admin", "webhook", "endpoint", "create", "--workspace", wsA, "--url", recv.URL, "--kinds", "erasure.completed"), "secret")
	in.start()

	now := time.Now().UTC().Add(-time.Minute)
	days := []time.Time{now, now.Add(-24 * time.Hour), now.Add(-48 * time.Hour)}
	var sent []sentEvent
	for i, at := range days {
		var evs []string
		for j, p := range []string{"ada", "bob", "cy"} {
			consent := !(p == "ada" && i == 1) // Ada is unconsented once: never counted that day
			name := []string{"purchase", "lead"}[(i+j)%2]
			evs = append(evs, fmt.Sprintf(`{"event_name":%q,"occurred_at":%q,"value":%d.5,"currency":"EUR","consent":{"measurement":%v},"identity":{"email":"%s@example.com"}}`,
				name, at.Format(time.RFC3339), 10+j, consent, p))
			sent = append(sent, sentEvent{at.Format("2006-01-02"), name, consent, p + "@example.com"})
		}
		// Ada twice more on this day, as a purchase, consented.
		evs = append(evs, fmt.Sprintf(`{"event_name":"purchase","occurred_at":%q,"value":1,"currency":"EUR","consent":{"measurement":true},"identity":{"email":"ada@example.com"}}`, at.Format(time.RFC3339)))
		sent = append(sent, sentEvent{at.Format("2006-01-02"), "purchase", true, "ada@example.com"})
		if st, b := in.post(keyA, "/v1/events", fmt.Sprintf(`{"pixel_id":%q,"events":[%s]}`, pxA, strings.Join(evs, ","))); st != 202 {
			t.Fatalf("POST /events: %d %s", st, b)
		}
	}
	if st, b := in.post(keyB, "/v1/events", fmt.Sprintf(`{"pixel_id":%q,"events":[{"event_name":"purchase","occurred_at":%q,"consent":{"measurement":true},"identity":{"email":"ada@example.com"}}]}`,
		pxB, now.Format(time.RFC3339))); st != 202 {
		t.Fatalf("POST /events B: %d %s", st, b)
	}
	in.waitFor("events stored", 30*time.Second, func() bool { return in.chInt("SELECT count() FROM events") == len(sent)+1 })
	// The rollups too: ClickHouse 18.16 commits an INSERT's part of events before its
	// views' parts, so the rows can be counted a moment before the rollups show them.
	var beforeA, beforeB map[string]rollupRow
	in.waitFor("rollups of both pixels", 30*time.Second, func() bool {
		beforeA, beforeB = in.rollups(keyA, pxA), in.rollups(keyB, pxB)
		return eventsCounted(beforeA) == len(sent) && eventsCounted(beforeB) == 1
	})

	st, b := in.post(keyA, "/v1/erasures", `{"identity":{"email":"ada@example.com"}}`, "Idempotency-Key", "erase-ada")
	if st != 202 {
		t.Fatalf("POST /erasures: %d %s", st, b)
	}
	id := field(t, b, "id")
	rec := in.erasure(keyA, id)

	ada := sha("ada@example.com")
	if n := in.chInt("SELECT count() FROM events WHERE lower(hex(email_sha256)) = '" + ada + "' AND workspace_id = toUUID('" + strings.TrimPrefix(wsA, "org_") + "')"); n != 0 {
		t.Fatalf("%d events of workspace A still hold the erased hash", n)
	}
	if n := in.chInt("SELECT count() FROM events WHERE lower(hex(email_sha256)) = '" + ada + "' AND has_email = 1 AND workspace_id = toUUID('" + strings.TrimPrefix(wsB, "org_") + "')"); n != 1 {
		t.Fatalf("workspace B's identical hash: %d rows, want 1 (untouched)", n)
	}
	counted := map[string]bool{} // rollup rows where Ada was among the unique people
	affected, affectedDays := 0, map[string]bool{}
	for _, e := range sent {
		if e.email == "ada@example.com" && e.consent {
			counted[e.day+"|"+e.name+"|EUR"] = true
			affected++
			affectedDays[e.day] = true
		}
	}
	afterA := in.rollups(keyA, pxA)
	if len(afterA) != len(beforeA) {
		t.Fatalf("%d rollup rows after, %d before", len(afterA), len(beforeA))
	}
	for k, bf := range beforeA {
		af, want := afterA[k], bf.UniquePeople
		if counted[k] {
			want--
		}
		if af.UniquePeople != want || af.Events != bf.Events || af.Value != bf.Value || af.Consented != bf.Consented {
			t.Errorf("%s: after %+v, before %+v, want unique_people %d", k, af, bf, want)
		}
	}
	if afterB := in.rollups(keyB, pxB); fmt.Sprint(afterB) != fmt.Sprint(beforeB) {
		t.Fatalf("workspace B's rollups changed: %v → %v", beforeB, afterB)
	}
	if rec["events_affected"] != float64(affected) || rec["events_remaining"] != float64(0) ||
		len(rec["days_recomputed"].([]any)) != len(affectedDays) || rec["completed_at"] == nil {
		t.Fatalf("record %v: want %d events affected over %d days", rec, affected, len(affectedDays))
	}
	in.waitFor("erasure.completed delivered", 30*time.Second, func() bool { mu.Lock(); defer mu.Unlock(); return len(deliveries) > 0 })
	mu.Lock()
	defer mu.Unlock()
	if err := signature.Verify(headers[0].Get("SVC-Signature"), deliveries[0], [][]byte{[]byte(whSecret)}, time.Now(), 5*time.Minute); err != nil {
		t.Fatalf("erasure.completed signature: %v", err)
	}
	var env struct {
		Type string         `json:"type"`
		Data map[string]any `json:"data"`
	}
	if err := json.Unmarshal(deliveries[0], &env); err != nil || env.Type != "erasure.completed" || env.Data["id"] != id ||
		env.Data["status"] != "completed" || env.Data["events_affected"] != float64(affected) {
		t.Fatalf("erasure.completed body: %s (%v)", deliveries[0], err)
	}
	// "`data` is the erasure record exactly as `GET /erasures/{id}` returns it"
	// (webhooks/README.md; webhooks.md: "the erasure record, as `GET /erasures/{id}`
	// returns it"): every member, with the same values.
	st, got := in.get(keyA, "/v1/erasures/"+id)
	var record map[string]any
	if err := json.Unmarshal(got, &record); st != 200 || err != nil {
		t.Fatalf("GET /erasures/%s: %d %s (%v)", id, st, got, err)
	}
	if !reflect.DeepEqual(env.Data, record) {
		data, _ := json.Marshal(env.Data)
		t.Fatalf("erasure.completed data differs from GET /erasures/%s:\ndata: %s\nGET:  %s", id, data, got)
	}
	if strings.Contains(in.log.String(), "@example.com") || strings.Contains(string(deliveries[0]), "@example.com") {
		t.Fatal("an address reached the log or the webhook")
	}
	if strings.Contains(in.log.String(), ada) {
		t.Fatal("the erased digest reached the log")
	}
}

// TestErasureRacesIngestion: events of two people keep arriving while one is erased
// (events received up to the request lose the identity, later ones keep it) and the
// other is erased with suppression (no event keeps it, before or after). Afterwards
// every event is stored exactly once and the rollups agree exactly with the events
// table on every row: the rebuild neither lost nor double-counted the inserts that
// raced it.
func TestErasureRacesIngestion(t *testing.T) {
	in := newInstance(t)
	in.env = append(in.env, privacyEnv...)
	in.run("migrate")
	ws := field(t, in.run("admin", "workspace", "create", "--name", "Race"), "id")
	px := field(t, in.run("admin", "pixel", "create", "--workspace", ws), "id")
	key := field(t, in.run("admin", "key", "create", "--workspace", ws, "--env", "live", "--scopes", "events:write,pixels:read,identities:erase", "--burst", "100000", "--daily", "1000000"), "secret")
	forgetIdentities(t, ws)
	in.start()

	var accepted atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for g := 0; g < 2; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				at := time.Now().UTC().Add(-time.Duration(i%3) * 24 * time.Hour).Add(-time.Minute).Format(time.RFC3339)
				var evs []string
				for j, p := range []string{"ada", "bob", fmt.Sprintf("p%d", i%7)} {
					evs = append(evs, fmt.Sprintf(`{"event_name":"purchase","occurred_at":%q,"value":%d,"currency":"EUR","consent":{"measurement":true},"identity":{"email":"%s@example.com"}}`, at, j+1, p))
				}
				st, b := in.post(key, "/v1/events", fmt.Sprintf(`{"pixel_id":%q,"events":[%s]}`, px, strings.Join(evs, ",")))
				if st != 202 {
					t.Errorf("POST /events: %d %s", st, b)
					return
				}
				accepted.Add(3)
				time.Sleep(10 * time.Millisecond)
			}
		}(g)
	}
	time.Sleep(1500 * time.Millisecond)
	_, b1 := in.post(key, "/v1/erasures", `{"identity":{"email":"ada@example.com"}}`)
	_, b2 := in.post(key, "/v1/erasures", `{"identity":{"email_sha256":"`+sha("bob@example.com")+`"},"suppress":true}`)
	adaID, bobID := field(t, b1, "id"), field(t, b2, "id")
	adaRec := in.erasure(key, adaID)
	in.erasure(key, bobID)
	time.Sleep(time.Second) // ingestion goes on after both completed
	close(stop)
	wg.Wait()
	in.waitFor("every accepted event stored", 30*time.Second, func() bool { return in.chInt("SELECT count() FROM events") == int(accepted.Load()) })

	requested, err := time.Parse(time.RFC3339, adaRec["requested_at"].(string))
	if err != nil {
		t.Fatal(err)
	}
	cut := strconv.FormatInt(requested.Unix(), 10)
	if n := in.chInt("SELECT count() FROM events WHERE has_email = 1 AND lower(hex(email_sha256)) = '" + sha("ada@example.com") + "' AND received_at <= toDateTime(" + cut + ")"); n != 0 {
		t.Fatalf("%d events received up to the request still carry the erased identity", n)
	}
	if n := in.chInt("SELECT count() FROM events WHERE has_email = 1 AND lower(hex(email_sha256)) = '" + sha("ada@example.com") + "' AND received_at > toDateTime(" + cut + ")"); n == 0 {
		t.Fatal("no event received after the request kept the identity (the race did not happen, or the erasure overreached)")
	}
	if n := in.chInt("SELECT count() FROM events WHERE has_email = 1 AND lower(hex(email_sha256)) = '" + sha("bob@example.com") + "'"); n != 0 {
		t.Fatalf("%d events keep a suppressed identity", n)
	}
	if got := in.ch("SELECT count() = uniqExact(kafka_partition, kafka_offset, batch_index) FROM events"); got != "1" {
		t.Fatal("an event is stored twice")
	}
	fromEvents := in.ch(`SELECT event_date, event_name, currency, count(), sum(value), uniqExactIf(email_sha256, consent = 1 AND has_email = 1)
		FROM events GROUP BY event_date, event_name, currency ORDER BY event_date, event_name, currency`)
	fromRollups := in.ch(`SELECT event_date, event_name, currency, countMerge(events_state), sumMerge(value_state), uniqIfMerge(people_state)
		FROM pixel_rollups_daily GROUP BY event_date, event_name, currency ORDER BY event_date, event_name, currency`)
	if fromEvents != fromRollups || fromEvents == "" {
		t.Fatalf("rollups disagree with events:\nevents:\n%s\nrollups:\n%s", fromEvents, fromRollups)
	}
}

// TestRetentionRemovesOldRawEvents: `svc admin workspace set-retention` sets a
// workspace's raw-event retention (refusing a value under 8 days), GET /account shows
// it, and the worker removes that workspace's raw events of days before the cutoff,
// keeping newer ones, other workspaces' rows and every rollup.
func TestRetentionRemovesOldRawEvents(t *testing.T) {
	in := newInstance(t)
	in.env = append(in.env, append(privacyEnv, "SVC_PRIVACY_RETENTION_INTERVAL=1s")...)
	in.run("migrate")
	ws := field(t, in.run("admin", "workspace", "create", "--name", "Retained"), "id")
	other := field(t, in.run("admin", "workspace", "create", "--name", "Forever"), "id")
	key := field(t, in.run("admin", "key", "create", "--workspace", ws, "--env", "live", "--scopes", "account:read"), "secret")
	cmd := exec.Command(svcBin, "admin", "workspace", "set-retention", ws, "--days", "3")
	cmd.Env = in.env
	if out, err := cmd.CombinedOutput(); err == nil {
		t.Fatalf("a 3-day retention was accepted: %s", out)
	}
	out := in.run("admin", "workspace", "set-retention", ws, "--days", "8")
	if !strings.Contains(string(out), `"raw_event_retention_days":8`) {
		t.Fatalf("set-retention: %s", out)
	}
	t.Cleanup(func() { in.run("admin", "workspace", "set-retention", ws, "--unlimited") })
	// Raw events the edge would refuse today (older than 7 days) are written as the
	// consumer writes them, straight into ClickHouse; the view rolls them up.
	for _, w := range []string{ws, other} {
		in.ch(`INSERT INTO events (workspace_id, pixel_id, sandbox, key_id, event_id, event_name, occurred_at, event_date,
			value, has_value, currency, consent, has_email, email_sha256, request_id, received_at, inserted_at,
			kafka_topic, kafka_partition, kafka_offset, batch_index)
			SELECT toUUID('` + strings.TrimPrefix(w, "org_") + `'), toUUID('00000000-0000-0000-0000-0000000000aa'), 0,
			       toUUID('00000000-0000-0000-0000-0000000000bb'), generateUUIDv4(), 'purchase',
			       toDateTime(today() - arrayElement([20, 9, 8, 1], number + 1)), today() - arrayElement([20, 9, 8, 1], number + 1),
			       toDecimal64(1, 4), 1, 'EUR', 1, 0, toFixedString('', 32), 'req_old', now(), now(), 'events.v1', 0, number, 0
			FROM system.numbers LIMIT 4`)
	}
	rollupsBefore := in.ch("SELECT event_date, events FROM pixel_rollups_daily_v ORDER BY workspace_id, event_date")
	in.start()
	wsUUID := strings.TrimPrefix(ws, "org_")
	in.waitFor("old raw events removed", 30*time.Second, func() bool {
		return in.chInt("SELECT count() FROM events WHERE workspace_id = toUUID('"+wsUUID+"') AND event_date < today() - 8") == 0
	})
	if got := in.ch("SELECT groupArray(toUInt32(today() - event_date)) FROM (SELECT event_date FROM events WHERE workspace_id = toUUID('" + wsUUID + "') ORDER BY event_date)"); got != "[8,1]" {
		t.Fatalf("rows kept (days ago): %s, want [8,1]", got)
	}
	if n := in.chInt("SELECT count() FROM events WHERE workspace_id = toUUID('" + strings.TrimPrefix(other, "org_") + "')"); n != 4 {
		t.Fatalf("the workspace without retention has %d rows, want 4", n)
	}
	if after := in.ch("SELECT event_date, events FROM pixel_rollups_daily_v ORDER BY workspace_id, event_date"); after != rollupsBefore {
		t.Fatalf("rollups changed:\n%s\n→\n%s", rollupsBefore, after)
	}
	st, b := in.get(key, "/v1/account")
	if st != 200 || !strings.Contains(string(b), `"raw_event_retention_days":8`) {
		t.Fatalf("GET /account: %d %s", st, b)
	}
}
