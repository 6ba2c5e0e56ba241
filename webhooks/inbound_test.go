package webhooks

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"svc/lib/httpserver"
	"svc/lib/ids"
	"svc/lib/signature"
	"svc/schema/apitest"
	"svc/schema/catalog"
)

type inboundEnv struct {
	*testEnv
	srv  *apitest.Server
	in   *Inbound
	ws   uuid.UUID
	path string
}

// flakyWriter fails while down is set, then writes through.
type flakyWriter struct {
	next ActualsWriter
	down bool
}

func (f *flakyWriter) UpsertActuals(ctx context.Context, ws uuid.UUID, rows []ActualsRow) error {
	if f.down {
		return errors.New("clickhouse: connection refused")
	}
	return f.next.UpsertActuals(ctx, ws, rows)
}

// newInbound serves the receiver (and extra routes) on a test server.
func newInbound(t *testing.T, extra ...httpserver.Route) *inboundEnv {
	return newInboundWith(t, nil, extra...)
}

// newInboundWith is newInbound with the server's configuration adjusted by cfg.
func newInboundWith(t *testing.T, cfg func(*httpserver.Config), extra ...httpserver.Route) *inboundEnv {
	e := newEnv(t)
	in := &Inbound{Config: e.cfg, Store: e.store(), Logs: e.logs, Actuals: &flakyWriter{next: NewActualsStore(e.conn)},
		Metrics: NewMetrics(nil), Log: e.log, Now: e.clock.Now}
	srv := apitest.Start(t, append([]httpserver.Route{in.Route()}, extra...), cfg)
	in.Keys = srv.Keys
	ws := srv.Workspace(t, false)
	return &inboundEnv{testEnv: e, srv: srv, in: in, ws: ws.ID, path: "/v1/webhooks/inbound/" + ids.Format(ids.Org, ws.ID)}
}

// flush writes the refusal rows the receiver holds (the role does it every second).
func (ie *inboundEnv) flush(t *testing.T) {
	t.Helper()
	if err := ie.in.FlushLog(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func (ie *inboundEnv) secret(t *testing.T) string {
	s, _, err := ie.in.Store.IssueInboundSecret(context.Background(), ie.ws, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return s.Secret
}

// send posts body with a signature at time at by secrets, and message id.
func (ie *inboundEnv) send(t *testing.T, body, msgID string, at time.Time, secrets ...string) apitest.Response {
	var keys [][]byte
	for _, s := range secrets {
		keys = append(keys, []byte(s))
	}
	h := []string{signature.Header, signature.Value(at.Unix(), []byte(body), keys...)}
	if msgID != "" {
		h = append(h, signature.MessageIDHeader, msgID)
	}
	return ie.srv.Do(t, "POST", ie.path, "", body, h...)
}

func reported(cmp uuid.UUID, date string, impressions int, spend string) string {
	return fmt.Sprintf(`{"type":"actuals.reported","data":{"campaign_id":"%s","currency":"EUR","days":[{"date":"%s","impressions":%d,"clicks":7,"spend":"%s","conversions":2}]}}`,
		ids.Format(ids.Campaign, cmp), date, impressions, spend)
}

func TestInboundSignatures(t *testing.T) {
	ie := newInbound(t)
	old := ie.secret(t)
	now := ie.clock.Now()
	body := `{"type":"partner.ping","data":{}}`
	n := 0
	id := func() string { n++; return "msg-sig-" + strconv.Itoa(n) }

	if r := ie.send(t, body, id(), now, old); r.Status != 200 {
		t.Fatalf("good: %d %s", r.Status, r.Body)
	}
	apitest.Problem(t, ie.send(t, body, id(), now, "whsec_wrong"), 401, "invalid_signature")
	apitest.Problem(t, ie.srv.Do(t, "POST", ie.path, "", body, signature.MessageIDHeader, id()), 401, "invalid_signature")
	apitest.Problem(t, ie.srv.Do(t, "POST", ie.path, "", body, signature.MessageIDHeader, id(), signature.Header, "t=abc"), 401, "invalid_signature")
	apitest.Problem(t, ie.send(t, body, id(), now.Add(-301*time.Second), old), 401, "timestamp_out_of_range")
	apitest.Problem(t, ie.send(t, body, id(), now.Add(301*time.Second), old), 401, "timestamp_out_of_range")
	if r := ie.send(t, body, id(), now.Add(-299*time.Second), old); r.Status != 200 {
		t.Fatalf("within tolerance: %d %s", r.Status, r.Body)
	}
	// Body changed after signing.
	sig := signature.Value(now.Unix(), []byte(body), []byte(old))
	apitest.Problem(t, ie.srv.Do(t, "POST", ie.path, "", body+" ", signature.Header, sig, signature.MessageIDHeader, id()), 401, "invalid_signature")

	// Rotation: a new secret; the old one stays valid for the overlap (1 h here).
	next := ie.secret(t)
	for _, c := range [][]string{{old}, {next}, {old, next}, {"whsec_wrong", next}} {
		if r := ie.send(t, body, id(), now, c...); r.Status != 200 {
			t.Fatalf("rotation with %d v1: %d %s", len(c), r.Status, r.Body)
		}
	}
	ie.clock.Add(time.Hour + time.Second) // the old secret's overlap is over
	now = ie.clock.Now()
	apitest.Problem(t, ie.send(t, body, id(), now, old), 401, "invalid_signature")
	if r := ie.send(t, body, id(), now, old, next); r.Status != 200 {
		t.Fatalf("new secret after the overlap: %d %s", r.Status, r.Body)
	}

	// Unknown workspace: 404; a workspace without a secret: 401.
	if p := apitest.Problem(t, ie.srv.Do(t, "POST", "/webhooks/inbound/org_"+uuid.NewString(), "", body), 404, "not_found"); !strings.Contains(fmt.Sprint(p["suggested_action"]), "workspace id in the URL") {
		t.Fatalf("an unknown workspace's advice %q: the route takes no key", p["suggested_action"])
	}
	apitest.Problem(t, ie.srv.Do(t, "POST", "/webhooks/inbound/not-an-id", "", body), 404, "not_found")
	// The caller of a workspace without a secret is told what a wrong secret is told,
	// not that the workspace has none; its admins read why in its inbound log.
	other := ie.srv.Workspace(t, false)
	noSecret := apitest.Problem(t, ie.srv.Do(t, "POST", "/webhooks/inbound/"+ids.Format(ids.Org, other.ID), "", body,
		signature.Header, signature.Value(now.Unix(), []byte(body), []byte(next)), signature.MessageIDHeader, "x"), 401, "invalid_signature")
	wrong := apitest.Problem(t, ie.send(t, body, "msg-wrong-again", now, "whsec_wrong"), 401, "invalid_signature")
	if noSecret["detail"] != wrong["detail"] {
		t.Fatalf("no secret answered %q, a wrong secret %q: want the same words", noSecret["detail"], wrong["detail"])
	}
	ie.flush(t)
	if rows, err := ie.logs.Inbound(context.Background(), other.ID, Failed, 10); err != nil || len(rows) != 1 ||
		!strings.HasPrefix(rows[0].Reason, "no inbound secret") {
		t.Fatalf("the secretless workspace's inbound log: %+v, %v; want one row saying it has no inbound secret", rows, err)
	}

	// Every refusal is recorded as failed, with a reason that names no secret.
	ie.flush(t)
	rows, err := ie.logs.Inbound(context.Background(), ie.ws, Failed, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 8 {
		t.Fatalf("%d failed rows, want 8: %+v", len(rows), rows)
	}
	for _, r := range rows {
		if strings.Contains(r.Reason, "whsec") || r.Reason == "" || r.Status != 401 {
			t.Fatalf("failed row %+v", r)
		}
	}
}

func TestInboundOversizeRefusedBeforeParsing(t *testing.T) {
	ie := newInbound(t)
	sec := ie.secret(t)
	// 256 KiB + 1 of something that is not JSON and not signed: the size decides.
	big := strings.Repeat("x", 256*1024+1)
	// On a connection of its own, the body written while the answer is read: the server
	// answers and closes before reading it, and an HTTP client still writing may get the
	// reset instead of the answer (seen under make test-scale).
	r, _ := inboundRawPost(t, ie.srv, ie.path, []string{"Content-Length", strconv.Itoa(len(big)), signature.MessageIDHeader, "big-1"}, big)
	apitest.Problem(t, r, 413, "payload_too_large")
	// Exactly 256 KiB, signed, is read (and, not being JSON, refused as malformed).
	exact := strings.Repeat("x", 256*1024)
	apitest.Problem(t, ie.send(t, exact, "big-2", ie.clock.Now(), sec), 422, "invalid_request")
	ie.flush(t)
	rows, err := ie.logs.Inbound(context.Background(), ie.ws, "", 10)
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string]InboundRow{}
	for _, r := range rows {
		byID[r.MessageID] = r
	}
	if b := byID["big-2"]; b.Outcome != Failed || b.Status != 422 {
		t.Fatalf("256 KiB row %+v", b)
	}
	// An oversize body is neither counted against the address nor kept in the log.
	if b, ok := byID["big-1"]; ok {
		t.Fatalf("oversize body kept in the inbound log: %+v", b)
	}
	// The receiver's own check, for a route served with a larger ceiling than its
	// Config (the server did not refuse first): the same 413, the connection closed,
	// nothing charged or kept.
	ie.in.Config.InboundMaxBody = 1024
	bucket := func() string {
		v, _ := ie.rdb.Get(context.Background(), ie.in.Store.failKey("127.0.0.1")).Result()
		return v
	}
	before := bucket()
	r, closed := inboundRawPost(t, ie.srv, ie.path, []string{"Content-Length", "1025", signature.MessageIDHeader, "big-3"}, strings.Repeat("y", 1025))
	apitest.Problem(t, r, 413, "payload_too_large")
	if !closed {
		t.Fatal("the receiver's 413 left the connection open")
	}
	if after := bucket(); after != before {
		t.Fatalf("the receiver's 413 charged the address: its bucket %q, was %q", after, before)
	}
	ie.flush(t)
	if rows, err := ie.logs.Inbound(context.Background(), ie.ws, "", 10); err != nil || len(rows) != 1 {
		t.Fatalf("inbound log after the receiver's 413: %d rows (%v), want only big-2's", len(rows), err)
	}
}

func TestInboundOutcomesAndReplay(t *testing.T) {
	ie := newInbound(t)
	ctx := context.Background()
	sec := ie.secret(t)
	now := ie.clock.Now()
	cmp, cmp2 := uuid.New(), uuid.New()
	putCampaigns(t, ie.conn, ie.ws, cmp, cmp2)
	day := now.AddDate(0, 0, -3).Format("2006-01-02")
	get := func(c uuid.UUID) []catalog.CampaignActual {
		t.Helper()
		as, err := catalog.CampaignActuals(ctx, ie.conn, ie.ws, c, catalog.ActualsQuery{Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		return as
	}

	// processed
	r := ie.send(t, reported(cmp, day, 1000, "12.50"), "m-1", now, sec)
	if r.Status != 200 || r.JSON(t)["outcome"] != Processed || r.JSON(t)["rows_written"] != float64(1) {
		t.Fatalf("processed: %d %s", r.Status, r.Body)
	}
	as := get(cmp)
	if len(as) != 1 || as[0].Impressions != 1000 || as[0].Spend.StringFixed(2) != "12.50" || as[0].Currency != "EUR" {
		t.Fatalf("actuals after m-1: %+v", as)
	}
	// A replay of m-1, even with another body, is ignored and changes nothing.
	r = ie.send(t, reported(cmp, day, 999999, "1.00"), "m-1", now, sec)
	if r.Status != 200 || r.JSON(t)["outcome"] != Ignored {
		t.Fatalf("replay: %d %s", r.Status, r.Body)
	}
	if as := get(cmp); len(as) != 1 || as[0].Impressions != 1000 {
		t.Fatalf("replay changed actuals: %+v", as)
	}
	// Restating the day under a new message id overwrites it.
	if r := ie.send(t, reported(cmp, day, 1500, "20"), "m-2", now, sec); r.Status != 200 {
		t.Fatalf("restate: %d %s", r.Status, r.Body)
	}
	if as := get(cmp); len(as) != 1 || as[0].Impressions != 1500 {
		t.Fatalf("restated actuals: %+v", as)
	}
	// campaign.actuals: several campaigns and days.
	ca := fmt.Sprintf(`{"type":"campaign.actuals","data":{"rows":[
		{"campaign_id":"%s","date":"%s","currency":"USD","impressions":10,"clicks":1,"spend":3.25,"conversions":0},
		{"campaign_id":"%s","date":"%s","currency":"USD","impressions":20}]}}`,
		cmp2.String(), day, ids.Format(ids.Campaign, cmp2), now.AddDate(0, 0, -2).Format("2006-01-02"))
	if r := ie.send(t, ca, "m-3", now, sec); r.Status != 200 || r.JSON(t)["rows_written"] != float64(2) {
		t.Fatalf("campaign.actuals: %d %s", r.Status, r.Body)
	}
	if as := get(cmp2); len(as) != 2 {
		t.Fatalf("campaign.actuals rows: %+v", as)
	}
	// ignored: unknown type
	if r := ie.send(t, `{"type":"partner.hello","data":{"x":1}}`, "m-4", now, sec); r.Status != 200 || r.JSON(t)["outcome"] != Ignored {
		t.Fatalf("unknown type: %d %s", r.Status, r.Body)
	}
	// failed: malformed JSON, missing fields, bad values, no message id
	apitest.Problem(t, ie.send(t, `{"type":`, "m-5", now, sec), 422, "invalid_request")
	p := apitest.Problem(t, ie.send(t, `{"type":"actuals.reported","data":{"campaign_id":"pln_`+uuid.NewString()+`","days":[{"date":"2026-13-01","impressions":-1,"spend":"1.23456"}]}}`, "m-6", now, sec), 422, "invalid_request")
	errs, _ := p["errors"].([]any)
	fields := map[string]string{}
	for _, e := range errs {
		m := e.(map[string]any)
		fields[m["field"].(string)] = m["rule"].(string)
	}
	for f, rule := range map[string]string{"data.campaign_id": "format", "data.currency": "required",
		"data.days[0].date": "date", "data.days[0].impressions": "non_negative_integer", "data.days[0].spend": "non_negative_decimal_4dp"} {
		if fields[f] != rule {
			t.Fatalf("errors[] %v: want %s → %s", fields, f, rule)
		}
	}
	apitest.Problem(t, ie.send(t, `{"type":"actuals.reported"}`, "m-7", now, sec), 422, "invalid_request")
	apitest.Problem(t, ie.send(t, reported(cmp, day, 1, "1"), "", now, sec), 422, "invalid_request")
	// A failed message id is not burnt: corrected, it is processed.
	if r := ie.send(t, reported(cmp, day, 1600, "21"), "m-5", now, sec); r.Status != 200 || r.JSON(t)["outcome"] != Processed {
		t.Fatalf("m-5 corrected: %d %s", r.Status, r.Body)
	}

	// The store is down: 503, nothing marked; the partner's retry is processed.
	ie.in.Actuals.(*flakyWriter).down = true
	p = apitest.Problem(t, ie.send(t, reported(cmp, day, 1700, "22"), "m-8", now, sec), 503, "service_unavailable")
	if strings.Contains(fmt.Sprint(p), "connection refused") {
		t.Fatalf("503 leaks the internal error: %v", p)
	}
	ie.in.Actuals.(*flakyWriter).down = false
	if r := ie.send(t, reported(cmp, day, 1700, "22"), "m-8", now, sec); r.Status != 200 || r.JSON(t)["outcome"] != Processed {
		t.Fatalf("m-8 retry: %d %s", r.Status, r.Body)
	}
	if as := get(cmp); as[0].Impressions != 1700 {
		t.Fatalf("after m-8: %+v", as)
	}

	// Every outcome is recorded.
	ie.flush(t)
	rows, err := ie.logs.Inbound(ctx, ie.ws, "", 100)
	if err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	for _, r := range rows {
		count[r.Outcome]++
		if r.RequestID == "" || r.BodySHA256 == "" {
			t.Fatalf("row without request id or digest: %+v", r)
		}
	}
	// processed: m-1, m-2, m-3, m-5 (corrected), m-8 (retry); ignored: m-1 replay, m-4;
	// failed: m-5, m-6, m-7, no id, m-8 (store down).
	if count[Processed] != 5 || count[Ignored] != 2 || count[Failed] != 5 {
		t.Fatalf("outcomes %v", count)
	}
}

// FuzzParseMessage: no input makes the parser panic or accept rows it should not.
func FuzzParseMessage(f *testing.F) {
	f.Add([]byte(reported(uuid.New(), "2026-01-02", 10, "1.5")))
	f.Add([]byte(`{"type":"campaign.actuals","data":{"rows":[{"campaign_id":"` + uuid.NewString() + `","date":"2026-01-02","currency":"EUR","impressions":1e999999999}]}}`))
	f.Add([]byte(`{"type":"actuals.reported","data":[]}`))
	f.Add([]byte(`{"type":5}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		m, p := ParseMessage(body)
		if p == nil && m.Known() {
			for _, r := range m.Rows {
				if r.CampaignID == uuid.Nil || r.Date.IsZero() || r.Currency == "" || r.Spend.IsNegative() {
					t.Fatalf("accepted a bad row %+v from %q", r, body)
				}
			}
		}
	})
}

// TestInboundRedisDown: with the webhook store unreachable the answer is 503 (the
// partner retries), never 500.
func TestInboundRedisDown(t *testing.T) {
	ie := newInbound(t)
	sec := ie.secret(t)
	dead := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	defer dead.Close()
	ie.in.Store = NewStore(dead, ie.cfg.Prefix)
	r := ie.send(t, reported(uuid.New(), "2026-01-02", 1, "1"), "down-1", ie.clock.Now(), sec)
	apitest.Problem(t, r, 503, "service_unavailable")
	if r.Header.Get("Retry-After") == "" {
		t.Fatal("503 without Retry-After")
	}
}

// putCampaigns makes campaigns ids of workspace ws (inbound actuals are refused for a
// campaign that is not the workspace's).
func putCampaigns(t *testing.T, conn driver.Conn, ws uuid.UUID, ids ...uuid.UUID) {
	t.Helper()
	cs := make([]catalog.Campaign, len(ids))
	for i, id := range ids {
		cs[i] = catalog.Campaign{ID: id, PlanID: uuid.New(), Name: "campaign " + id.String()[:8], Status: "active",
			Currency: "EUR", StartDate: time.Now().UTC().AddDate(0, -1, 0), EndDate: time.Now().UTC().AddDate(0, 1, 0)}
	}
	if err := catalog.PutCampaigns(context.Background(), conn, ws, cs); err != nil {
		t.Fatal(err)
	}
}

// Actuals for a campaign that is not the workspace's (unknown, or another workspace's)
// are refused (422, the message failed) and nothing is stored, as POST /imports/actuals
// refuses a line that is not the plan's.
func TestInboundActualsOfNoCampaignRefused(t *testing.T) {
	ie := newInbound(t)
	sec := ie.secret(t)
	theirs := uuid.New()
	putCampaigns(t, ie.conn, uuid.New(), theirs) // another workspace's
	day := ie.clock.Now().AddDate(0, 0, -2).Format("2006-01-02")
	for i, cmp := range []uuid.UUID{uuid.New(), theirs} {
		r := ie.send(t, reported(cmp, day, 10, "1"), "no-campaign-"+strconv.Itoa(i), ie.clock.Now(), sec)
		apitest.Problem(t, r, 422, "invalid_request")
		as, err := catalog.CampaignActuals(context.Background(), ie.conn, ie.ws, cmp, catalog.ActualsQuery{Limit: 10})
		if err != nil || len(as) != 0 {
			t.Fatalf("campaign %d: stored %+v (%v)", i, as, err)
		}
	}
}

// An inbound day is at most tomorrow (UTC), as documented: the day after is refused at
// any hour.
func TestInboundDayAtMostTomorrow(t *testing.T) {
	today := time.Now().UTC().Truncate(24 * time.Hour)
	for days, ok := range map[int]bool{0: true, 1: true, 2: false} {
		msg := reported(uuid.New(), today.AddDate(0, 0, days).Format("2006-01-02"), 1, "1")
		if _, p := ParseMessage([]byte(msg)); (p == nil) != ok {
			t.Errorf("today + %d days: refused %v, want accepted %v", days, p, ok)
		}
	}
}
