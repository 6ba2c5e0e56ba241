package webhooks

// Documented promises of the inbound receiver, one test each: the bounds of an actuals
// message, replays charged to the sender's failure bucket, an oversize body neither
// counted nor logged, a copy of a message in flight (409, Retry-After 1, not charged),
// and the bounds of SVC-Webhook-Id with the processed answer's body. The promises are
// quoted from webhooks/README.md and the developer page api/docs/pages/webhooks.md
// ("Inbound actuals", "Replays and retries", "Failed messages are limited per
// address").

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"svc/lib/httpserver"
	"svc/lib/ids"
	"svc/lib/logs"
	"svc/lib/settings"
	"svc/lib/signature"
	"svc/schema/apitest"
	"svc/schema/workspace"
)

// TestInboundActualsBoundsRefusedAsProblems: "1–500 days or rows, one per campaign and
// day", "date is YYYY-MM-DD (a UTC day, from 2000-01-01 to tomorrow)", and a refusal is
// a problem document, invalid_request with "one errors[] entry per field (field, rule,
// value, pointer)" and nothing written (api/docs/pages/webhooks.md, errors.md,
// plans-and-actuals.md; the rule for too many rows is max_items, as for POST
// /imports/actuals in limits.md). Both message types, each bound from both sides.
func TestInboundActualsBoundsRefusedAsProblems(t *testing.T) {
	ie := newInbound(t)
	sec := ie.secret(t)
	now := ie.clock.Now()
	a, b, c, d := uuid.New(), uuid.New(), uuid.New(), uuid.New()
	putCampaigns(t, ie.conn, ie.ws, a, b, c, d)
	n := 0
	send := func(body string) apitest.Response {
		t.Helper()
		n++
		return ie.send(t, body, "bounds-"+strconv.Itoa(n), now, sec)
	}
	stored := func(cmp uuid.UUID) uint64 {
		t.Helper()
		return inboundStoredActuals(t, ie.conn, ie.ws, cmp)
	}
	// 501 consecutive days ending yesterday (all within 2000-01-01 … tomorrow).
	today := now.UTC().Truncate(24 * time.Hour)
	days := make([]string, 501)
	for i := range days {
		days[i] = today.AddDate(0, 0, i-501).Format("2006-01-02")
	}

	// 501 days (actuals.reported) or rows (campaign.actuals): refused whole.
	inboundOneFieldError(t, send(inboundReported(a, days...)), "data.days", "max_items", "/data/days", float64(501))
	rows := make([][2]string, 501)
	for i, day := range days {
		rows[i] = [2]string{ids.Format(ids.Campaign, b), day}
	}
	inboundOneFieldError(t, send(inboundCampaignActuals(rows...)), "data.rows", "max_items", "/data/rows", float64(501))
	if sa, sb := stored(a), stored(b); sa != 0 || sb != 0 {
		t.Fatalf("501 rows refused, yet %d and %d rows stored", sa, sb)
	}
	// 0 days or rows: refused too (the lower bound, 1).
	inboundOneFieldError(t, send(inboundReported(a)), "data.days", "required", "/data/days", nil)
	inboundOneFieldError(t, send(inboundCampaignActuals()), "data.rows", "required", "/data/rows", nil)

	// 500: processed, every row stored. campaign.actuals: 250 days of b and the same
	// 250 days of c (one per campaign and day, the same day for two campaigns is fine).
	inboundProcessed(t, send(inboundReported(a, days[1:]...)), 500)
	if got := stored(a); got != 500 {
		t.Fatalf("500 days processed, %d stored", got)
	}
	rows = rows[:0]
	for _, day := range days[251:] {
		rows = append(rows, [2]string{ids.Format(ids.Campaign, b), day}, [2]string{c.String(), day})
	}
	inboundProcessed(t, send(inboundCampaignActuals(rows...)), 500)
	if sb, sc := stored(b), stored(c); sb != 250 || sc != 250 {
		t.Fatalf("500 rows processed, %d + %d stored", sb, sc)
	}

	// The same campaign and day twice in one message: refused whole, the second entry
	// named. In campaign.actuals the campaign is the same one however it is spelled.
	d1, d2 := days[499], days[500]
	inboundOneFieldError(t, send(inboundReported(d, d1, d2, d1)), "data.days[2].date", "unique", "/data/days/2/date", nil)
	inboundOneFieldError(t, send(inboundCampaignActuals([2]string{ids.Format(ids.Campaign, d), d1}, [2]string{d.String(), d1})),
		"data.rows[1].date", "unique", "/data/rows/1/date", nil)
	if got := stored(d); got != 0 {
		t.Fatalf("duplicate (campaign, day) refused, yet %d rows stored", got)
	}

	// 1999-12-31 is refused (rule range, the value sent), 2000-01-01 is stored.
	inboundOneFieldError(t, send(inboundReported(d, "1999-12-31")), "data.days[0].date", "range", "/data/days/0/date", "1999-12-31")
	inboundOneFieldError(t, send(inboundCampaignActuals([2]string{d.String(), "1999-12-31"})),
		"data.rows[0].date", "range", "/data/rows/0/date", "1999-12-31")
	if got := stored(d); got != 0 {
		t.Fatalf("1999-12-31 refused, yet %d rows stored", got)
	}
	inboundProcessed(t, send(inboundReported(d, "2000-01-01")), 1)
	inboundProcessed(t, send(inboundCampaignActuals([2]string{d.String(), "2000-01-02"})), 1)
	if got := stored(d); got != 2 {
		t.Fatalf("2000-01-01 and 2000-01-02 processed, %d rows stored", got)
	}
}

// TestInboundReplaysChargedToTheAddress: "messages that fail … and replays. Each counts
// against the sending address …: 20 at once, then 6 a minute, by default. Past that,
// every message from the address, a correctly signed one included, gets 429
// rate_limited with Retry-After until there is room again; nothing else is done with
// it" (api/docs/pages/webhooks.md; README.md: "every failure or replay: charged to the
// address's bucket"). A replay is either kind: a message id already processed, or the
// same signed content under a new id; each is answered 200 ignored and charged one.
func TestInboundReplaysChargedToTheAddress(t *testing.T) {
	ie := newInboundWith(t, func(c *httpserver.Config) { c.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")} })
	reg := prometheus.NewRegistry()
	ie.in.Metrics = NewMetrics(reg)
	sec := ie.secret(t)
	if ie.cfg.InboundFailureBurst != 20 || ie.cfg.InboundFailuresPerMinute != 6 {
		t.Fatalf("defaults %d at once, %d a minute; the page says 20 and 6", ie.cfg.InboundFailureBurst, ie.cfg.InboundFailuresPerMinute)
	}
	cmp := uuid.New()
	putCampaigns(t, ie.conn, ie.ws, cmp)
	day := func(back int) string { return ie.clock.Now().AddDate(0, 0, -back).Format("2006-01-02") }

	// The original, processed: it charges nothing.
	t0 := ie.clock.Now()
	orig := reported(cmp, day(1), 100, "10")
	origSig := signature.Value(t0.Unix(), []byte(orig), []byte(sec))
	if r := ie.send(t, orig, "orig", t0, sec); r.Status != 200 || r.JSON(t)["outcome"] != Processed {
		t.Fatalf("original: %d %s", r.Status, r.Body)
	}
	// Replays, by id (a new body, signed) and by content (the captured message under a
	// new id), alternately.
	k := 0
	replay := func() apitest.Response {
		t.Helper()
		k++
		if k%2 == 1 {
			return ie.send(t, reported(cmp, day(1), 999, "99"), "orig", ie.clock.Now(), sec)
		}
		return ie.srv.Do(t, "POST", ie.path, "", orig, signature.Header, origSig, signature.MessageIDHeader, "copy-"+strconv.Itoa(k))
	}
	for i := range 20 {
		r := replay()
		if r.Status != 200 {
			t.Fatalf("replay %d of the 20 the bucket holds: %d %s", i+1, r.Status, r.Body)
		}
		want := "replay: signed content already processed"
		if k%2 == 1 {
			want = "replay: message id already processed"
		}
		if m := r.JSON(t); m["outcome"] != Ignored || m["reason"] != want {
			t.Fatalf("replay %d: %s, want ignored, %q", i+1, r.Body, want)
		}
	}
	// The 21st and 22nd replays (one of each kind) find the bucket empty.
	for range 2 {
		r := replay()
		apitest.Problem(t, r, 429, "rate_limited")
		if ra, _ := strconv.Atoi(r.Header.Get("Retry-After")); ra < 1 {
			t.Fatalf("429 with Retry-After %q", r.Header.Get("Retry-After"))
		}
	}
	// Every message from the address, a new correctly signed one included, gets 429 and
	// nothing else is done with it; from another address the same message is processed.
	fresh := reported(cmp, day(2), 200, "20")
	freshSig := signature.Value(ie.clock.Now().Unix(), []byte(fresh), []byte(sec))
	apitest.Problem(t, ie.srv.Do(t, "POST", ie.path, "", fresh, signature.Header, freshSig, signature.MessageIDHeader, "fresh"), 429, "rate_limited")
	if got := inboundStoredActuals(t, ie.conn, ie.ws, cmp); got != 1 {
		t.Fatalf("the throttled message was applied: %d days stored, want 1", got)
	}
	if r := ie.srv.Do(t, "POST", ie.path, "", fresh, signature.Header, freshSig, signature.MessageIDHeader, "fresh",
		"X-Forwarded-For", "198.51.100.9"); r.Status != 200 || r.JSON(t)["outcome"] != Processed {
		t.Fatalf("the same message from another address: %d %s", r.Status, r.Body)
	}
	// Then 6 a minute: one refill interval later, one more replay is answered, and the
	// next is throttled again.
	ie.clock.Add(time.Minute / 6)
	if r := replay(); r.Status != 200 || r.JSON(t)["outcome"] != Ignored {
		t.Fatalf("replay after one refill interval: %d %s", r.Status, r.Body)
	}
	apitest.Problem(t, replay(), 429, "rate_limited")
	// Answered: 21 replays ignored, 2 messages processed; throttled: 3 replays past the
	// bound and the fresh message.
	if got := counterValues(t, reg, "svc_webhooks_inbound_total", "outcome"); got[Ignored] != 21 || got[Processed] != 2 {
		t.Fatalf("svc_webhooks_inbound_total %v, want 21 ignored, 2 processed", got)
	}
	if got := counterValues(t, reg, "svc_webhooks_inbound_failures_total", "reason"); got[reasonThrottled] != 4 {
		t.Fatalf("svc_webhooks_inbound_failures_total %v, want 4 throttled", got)
	}
}

// TestInboundOversizeNeitherCountedNorLogged: "A body over 256 KiB is refused (413)
// before any of it is read and before the receiver sees the message: it costs nothing,
// so it is neither counted against the address nor kept in the inbound log"
// (api/docs/pages/webhooks.md); README.md: 413 payload_too_large, recorded "—", the
// metric's payload_too_large "0 in practice", a chunked body refused "once it passes
// 256 KiB", and the connection closed. A correctly signed actuals message over the
// limit, its whole body sent more times than the bucket holds (by Content-Length, as
// curl sends it, and chunked), then its head alone: every answer is 413 and the
// connection closed, the address's bucket is untouched, no metric, no inbound log row,
// no actuals, and no log line of the server or the receiver carries any of its content.
func TestInboundOversizeNeitherCountedNorLogged(t *testing.T) {
	ie, lines := newInboundLogged(t)
	reg := prometheus.NewRegistry()
	ie.in.Metrics = NewMetrics(reg)
	sec := ie.secret(t)
	limit := ie.cfg.InboundMaxBody
	if limit != 256*1024 {
		t.Fatalf("inbound limit %d, the page says 256 KiB", limit)
	}
	cmp := uuid.New()
	putCampaigns(t, ie.conn, ie.ws, cmp)
	day := ie.clock.Now().AddDate(0, 0, -1).Format("2006-01-02")
	marker := "OVERSIZE-CONTENT-" + uuid.NewString()
	data := fmt.Sprintf(`"type":"actuals.reported","data":{"campaign_id":"%s","currency":"EUR","days":[{"date":"%s","impressions":5}]}`,
		ids.Format(ids.Campaign, cmp), day)
	head := `{"note":"` + marker + `",` + data + `,"pad":"`
	big := head + strings.Repeat(marker[:16], (limit+1000-len(head))/16) + `"}`
	if len(big) <= limit {
		t.Fatalf("the message is %d bytes", len(big))
	}
	const id = "oversize-1"

	post := func(what string, headers []string, body string) {
		t.Helper()
		hdr := append([]string{signature.Header, signature.Value(ie.clock.Now().Unix(), []byte(big), []byte(sec)),
			signature.MessageIDHeader, id}, headers...)
		r, closed := inboundRawPost(t, ie.srv, ie.path, hdr, body)
		apitest.Problem(t, r, 413, "payload_too_large")
		if !closed {
			t.Fatalf("%s: the connection stayed open after the 413", what)
		}
	}
	nothingCounted := func(after string) {
		t.Helper()
		// Not counted against the address: no bucket at all in Redis.
		if n, err := ie.rdb.Exists(context.Background(), ie.in.Store.failKey("127.0.0.1")).Result(); err != nil || n != 0 {
			t.Fatalf("after %s: the address's failure bucket exists (%d, %v)", after, n, err)
		}
		// Not counted by the receiver's metrics (payload_too_large stays 0).
		for name, label := range map[string]string{"svc_webhooks_inbound_total": "outcome", "svc_webhooks_inbound_failures_total": "reason"} {
			for k, v := range counterValues(t, reg, name, label) {
				if v != 0 {
					t.Fatalf("after %s: %s{%s=%q} = %v", after, name, label, k, v)
				}
			}
		}
		// Not kept in the inbound log, nothing stored.
		ie.flush(t)
		if n := inboundLogRows(t, ie.conn); n != 0 {
			t.Fatalf("after %s: %d webhook_inbound rows", after, n)
		}
		if n := inboundStoredActuals(t, ie.conn, ie.ws, cmp); n != 0 {
			t.Fatalf("after %s: %d actuals stored", after, n)
		}
		// No log line carries its content.
		if out := lines.String(); strings.Contains(out, marker[:16]) {
			t.Fatalf("after %s: a log line carries the oversize body's content:\n%s", after, inboundLinesWith(out, marker[:16]))
		}
	}

	// More posts with the whole body than the bucket holds (were they charged, the last
	// would be 429): by Content-Length (as curl --data-binary sends) and chunked.
	cl := []string{"Content-Length", strconv.Itoa(len(big))}
	for i := range ie.cfg.InboundFailureBurst + 1 {
		if i%2 == 0 {
			post(fmt.Sprintf("post %d (Content-Length)", i+1), cl, big)
		} else {
			post(fmt.Sprintf("post %d (chunked)", i+1), []string{"Transfer-Encoding", "chunked"}, big)
		}
	}
	nothingCounted("oversize bodies")
	// The head alone: the server answers before any body byte is sent.
	post("the head alone", cl, "")
	nothingCounted("an oversize head")

	// The control: the same message within the limit, same id (not burnt), from the same
	// address, is processed, counted and logged, so the checks above look where rows go.
	small := `{"note":"` + marker + `",` + data + `}`
	if r := ie.send(t, small, id, ie.clock.Now(), sec); r.Status != 200 || r.JSON(t)["outcome"] != Processed {
		t.Fatalf("the message within the limit: %d %s", r.Status, r.Body)
	}
	ie.flush(t)
	if n := inboundLogRows(t, ie.conn); n != 1 {
		t.Fatalf("%d webhook_inbound rows after the message within the limit, want 1", n)
	}
	if n := inboundStoredActuals(t, ie.conn, ie.ws, cmp); n != 1 {
		t.Fatalf("%d actuals stored after the message within the limit, want 1", n)
	}
	if got := counterValues(t, reg, "svc_webhooks_inbound_total", "outcome"); got[Processed] != 1 || got[Failed] != 0 {
		t.Fatalf("svc_webhooks_inbound_total %v, want 1 processed only", got)
	}
}

// ---- helpers (prefixed inbound: shared package) ----

// inboundReported is an actuals.reported message of campaign cmp with one entry per date.
func inboundReported(cmp uuid.UUID, dates ...string) string {
	days := make([]string, len(dates))
	for i, d := range dates {
		days[i] = fmt.Sprintf(`{"date":"%s","impressions":%d,"clicks":1,"spend":"1.25","conversions":0}`, d, 100+i)
	}
	return fmt.Sprintf(`{"type":"actuals.reported","data":{"campaign_id":"%s","currency":"EUR","days":[%s]}}`,
		ids.Format(ids.Campaign, cmp), strings.Join(days, ","))
}

// inboundCampaignActuals is a campaign.actuals message of rows (campaign id as sent, date).
func inboundCampaignActuals(rows ...[2]string) string {
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = fmt.Sprintf(`{"campaign_id":"%s","date":"%s","currency":"USD","impressions":%d,"spend":2}`, r[0], r[1], 10+i)
	}
	return `{"type":"campaign.actuals","data":{"rows":[` + strings.Join(out, ",") + `]}}`
}

// inboundProcessed asserts r is 200 processed with rows rows written.
func inboundProcessed(t *testing.T, r apitest.Response, rows int) {
	t.Helper()
	if r.Status != 200 {
		t.Fatalf("status %d, want 200 processed: %.300s", r.Status, r.Body)
	}
	if m := r.JSON(t); m["outcome"] != Processed || m["rows_written"] != float64(rows) {
		t.Fatalf("%.300s, want processed, rows_written %d", r.Body, rows)
	}
}

// inboundOneFieldError asserts r is a 422 invalid_request problem document (RFC 9457:
// type naming the code's page, status 422) whose errors[] is exactly one entry with
// field, rule and pointer, and value when value is not nil (a nil value is only
// required to be present).
func inboundOneFieldError(t *testing.T, r apitest.Response, field, rule, pointer string, value any) {
	t.Helper()
	p := apitest.Problem(t, r, 422, "invalid_request")
	if p["status"] != float64(422) {
		t.Fatalf("problem status %v, want 422: %s", p["status"], r.Body)
	}
	errs, _ := p["errors"].([]any)
	if len(errs) != 1 {
		t.Fatalf("errors[] has %d entries, want 1 (%s %s): %s", len(errs), field, rule, r.Body)
	}
	e, _ := errs[0].(map[string]any)
	v, hasValue := e["value"]
	if e["field"] != field || e["rule"] != rule || e["pointer"] != pointer || !hasValue || value != nil && v != value {
		t.Fatalf("errors[0] %v, want field %s, rule %s, pointer %s, value %v", e, field, rule, pointer, value)
	}
}

// inboundStoredActuals counts the stored days of campaign cmp in workspace ws.
func inboundStoredActuals(t *testing.T, conn driver.Conn, ws, cmp uuid.UUID) uint64 {
	t.Helper()
	var n uint64
	if err := conn.QueryRow(context.Background(), `SELECT count() FROM campaign_actuals FINAL
		WHERE workspace_id = toUUID(?) AND campaign_id = toUUID(?)`, ws.String(), cmp.String()).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// inboundLogRows counts every row of webhook_inbound (the test's database: any workspace).
func inboundLogRows(t *testing.T, conn driver.Conn) uint64 {
	t.Helper()
	var n uint64
	if err := conn.QueryRow(context.Background(), `SELECT count() FROM webhook_inbound`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// inboundLogBuffer holds every log line written to it (from any goroutine).
type inboundLogBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *inboundLogBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *inboundLogBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// inboundLinesWith returns the lines of out containing s, each cut to 300 bytes.
func inboundLinesWith(out, s string) string {
	var keep []string
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, s) {
			keep = append(keep, l[:min(len(l), 300)])
		}
	}
	return strings.Join(keep, "\n")
}

// newInboundLogged is newInbound with every log line of the HTTP server (its Deps.Log,
// which also takes fasthttp's) and of the receiver written, at debug level, to the
// returned buffer. (apitest.Start logs to stderr; this starts the server the same way.)
func newInboundLogged(t *testing.T) (*inboundEnv, *inboundLogBuffer) {
	t.Helper()
	e := newEnv(t)
	lines := &inboundLogBuffer{}
	log := logs.NewTo(lines, slog.LevelDebug)
	in := &Inbound{Config: e.cfg, Store: e.store(), Logs: e.logs, Actuals: NewActualsStore(e.conn),
		Metrics: NewMetrics(nil), Log: log, Now: e.clock.Now}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := httpserver.ConfigFromEnv(settings.Defaults())
	c.HTTPAddr = ln.Addr().String()
	c.ReadTimeout, c.WriteTimeout, c.IdleTimeout, c.ShutdownTimeout = 5*time.Second, 5*time.Second, 30*time.Second, 5*time.Second
	c.RedisAutoPipeline = false
	c.PublicURL = "http://" + c.HTTPAddr
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	ks := workspace.NewStore(e.rdb)
	ks.CacheTTL = c.KeyCacheTTL
	deps := httpserver.NewDeps(c, e.rdb, ks, reg, log)
	api := httpserver.NewServer(c, deps, []httpserver.Route{in.Route()})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = api.Serve(ctx, ln); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	in.Keys = ks
	srv := &apitest.Server{URL: "http://" + c.HTTPAddr, API: api, Deps: deps, Redis: e.rdb, Keys: ks,
		Registry: reg, Client: &http.Client{Timeout: 30 * time.Second}}
	ws := srv.Workspace(t, false)
	return &inboundEnv{testEnv: e, srv: srv, in: in, ws: ws.ID, path: "/v1/webhooks/inbound/" + ids.Format(ids.Org, ws.ID)}, lines
}

// inboundRawPost sends a POST to path on a connection of its own: the head with
// headers (name, value, …), then body, written while the answer is read (as chunks of
// at most 64 KiB and the last chunk when headers say Transfer-Encoding: chunked). It
// returns the answer the server gives, and whether the server then closed the
// connection (said Connection: close, and nothing follows the answer but the end of
// the stream or a reset).
func inboundRawPost(t *testing.T, srv *apitest.Server, path string, headers []string, body string) (apitest.Response, bool) {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var b strings.Builder
	chunked := false
	b.WriteString("POST " + path + " HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\n")
	for i := 0; i+1 < len(headers); i += 2 {
		b.WriteString(headers[i] + ": " + headers[i+1] + "\r\n")
		chunked = chunked || strings.EqualFold(headers[i], "Transfer-Encoding")
	}
	b.WriteString("\r\n")
	if _, err := conn.Write([]byte(b.String())); err != nil {
		t.Fatal(err)
	}
	wrote := make(chan struct{})
	go func() { // write errors are expected: the server answers and closes without reading
		defer close(wrote)
		if !chunked {
			_, _ = io.WriteString(conn, body)
			return
		}
		for rest := body; len(rest) > 0; {
			n := min(len(rest), 64<<10)
			if _, err := io.WriteString(conn, strconv.FormatInt(int64(n), 16)+"\r\n"+rest[:n]+"\r\n"); err != nil {
				return
			}
			rest = rest[n:]
		}
		_, _ = io.WriteString(conn, "0\r\n\r\n")
	}()
	_ = conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("no answer to POST %s: %v", path, err)
	}
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("answer to POST %s: %v", path, err)
	}
	_, err = br.ReadByte() // nothing follows the answer: the end of the stream, or a reset
	var ne net.Error
	closed := resp.Close && err != nil && !(errors.As(err, &ne) && ne.Timeout())
	conn.Close()
	<-wrote
	return apitest.Response{Status: resp.StatusCode, Header: resp.Header, Body: out}, closed
}

// TestInboundInFlightCopyGets409RetryAfter1NotCharged: "While a message with the same
// id or the same content is being processed, another copy gets 409
// idempotency_key_in_use with Retry-After: 1" (api/docs/pages/webhooks.md, "Replays
// and retries"); README.md: "same message id, or same signed content, in flight | 409
// idempotency_key_in_use (Retry-After 1) | problem | failed" and "Every failure (4xx
// but 409) and every replay is charged to the client address". Message A is held in
// its actuals upsert; meanwhile A's id (the partner's retry, signed again) and A's
// signed content under a new id each get that 409, are recorded failed, and leave the
// address's failure bucket as it was. Released, A is processed; copies sent afterwards
// are replays (200 ignored), and the id the 409 content copy came with is not burnt ("A
// message that failed (4xx, or 503) is not remembered").
func TestInboundInFlightCopyGets409RetryAfter1NotCharged(t *testing.T) {
	ie := newInbound(t)
	ctx := context.Background()
	reg := prometheus.NewRegistry()
	ie.in.Metrics = NewMetrics(reg)
	held := &inboundHeldWriter{next: ie.in.Actuals, held: make(chan struct{}), release: make(chan struct{})}
	ie.in.Actuals = held
	var releaseOnce sync.Once
	release := func() { releaseOnce.Do(func() { close(held.release) }) }
	t.Cleanup(release) // runs before the server's cleanup: never leave A's handler blocked
	sec := ie.secret(t)
	cmp := uuid.New()
	putCampaigns(t, ie.conn, ie.ws, cmp)
	day := func(back int) string { return ie.clock.Now().AddDate(0, 0, -back).Format("2006-01-02") }
	bucket := func() string {
		t.Helper()
		v, err := ie.rdb.Get(ctx, ie.in.Store.failKey("127.0.0.1")).Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			t.Fatal(err)
		}
		return v
	}

	// A, sent in the background, is held inside its upsert (reserved, not yet done).
	t0 := ie.clock.Now()
	body := reported(cmp, day(1), 100, "10")
	sig := signature.Value(t0.Unix(), []byte(body), []byte(sec))
	answerA := make(chan inboundAnswer, 1)
	go func() {
		answerA <- inboundPost(ie.srv, ie.path, body, signature.Header, sig, signature.MessageIDHeader, "held-a")
	}()
	select {
	case <-held.held:
	case a := <-answerA:
		t.Fatalf("A was answered without reaching its upsert: %d %s (%v)", a.r.Status, a.r.Body, a.err)
	case <-time.After(30 * time.Second):
		t.Fatal("A did not reach its upsert within 30 s")
	}
	before := bucket()

	// While A is processed: its id (the same body signed again, a second later: a new
	// content, so only the id matches), and its signed content under a new id.
	copies := []struct{ what, id, sig string }{
		{"A's id, signed again", "held-a", signature.Value(t0.Unix()+1, []byte(body), []byte(sec))},
		{"A's t and body under a new id", "held-copy", sig},
	}
	for _, c := range copies {
		r := ie.srv.Do(t, "POST", ie.path, "", body, signature.Header, c.sig, signature.MessageIDHeader, c.id)
		if r.Status != 409 {
			t.Fatalf("%s while A is processed: %d %s, want 409 idempotency_key_in_use", c.what, r.Status, r.Body)
		}
		apitest.Problem(t, r, 409, "idempotency_key_in_use")
		if ra := r.Header.Get("Retry-After"); ra != "1" {
			t.Fatalf("%s: 409 with Retry-After %q, want \"1\"", c.what, ra)
		}
	}
	// Not charged: the address's bucket is as it was (a charge would move it).
	if after := bucket(); after != before {
		t.Fatalf("the 409s were charged to the address: its bucket %q, was %q", after, before)
	}
	// Counted as failed, reason in_flight (and nothing else failed or was throttled).
	if got := counterValues(t, reg, "svc_webhooks_inbound_failures_total", "reason"); got[reasonInFlight] != 2 || got[reasonThrottled] != 0 {
		t.Fatalf("svc_webhooks_inbound_failures_total %v, want 2 in_flight", got)
	}
	// Recorded failed, status 409, under the id each came with.
	ie.flush(t)
	rows, err := ie.logs.Inbound(ctx, ie.ws, "", 100)
	if err != nil {
		t.Fatal(err)
	}
	ids409 := map[string]bool{}
	for _, row := range rows {
		if row.Outcome != Failed || row.Status != 409 {
			t.Fatalf("row %+v while A is held, want failed 409 rows only", row)
		}
		ids409[row.MessageID] = true
	}
	if len(rows) != 2 || !ids409["held-a"] || !ids409["held-copy"] {
		t.Fatalf("webhook_inbound while A is held: %+v, want failed rows of held-a and held-copy", rows)
	}

	// Released, A is processed: its one day stored as sent.
	release()
	select {
	case a := <-answerA:
		if a.err != nil {
			t.Fatalf("A: %v", a.err)
		}
		inboundProcessed(t, a.r, 1)
	case <-time.After(30 * time.Second):
		t.Fatal("A was not answered within 30 s of its release")
	}
	if n := inboundStoredActuals(t, ie.conn, ie.ws, cmp); n != 1 {
		t.Fatalf("%d days stored after A, want 1", n)
	}
	// Afterwards the same copies are replays: 200 ignored.
	for i, c := range copies {
		reason := "replay: message id already processed"
		if i == 1 {
			reason = "replay: signed content already processed"
		}
		r := ie.srv.Do(t, "POST", ie.path, "", body, signature.Header, c.sig, signature.MessageIDHeader, c.id)
		if r.Status != 200 || r.JSON(t)["outcome"] != Ignored || r.JSON(t)["reason"] != reason {
			t.Fatalf("%s after A was processed: %d %s, want 200 ignored, %q", c.what, r.Status, r.Body, reason)
		}
	}
	// The id the 409 content copy came with was not burnt.
	inboundProcessed(t, ie.send(t, reported(cmp, day(2), 200, "20"), "held-copy", ie.clock.Now(), sec), 1)
}

// TestInboundMessageIDBoundsAndProcessedAnswer: "no or bad SVC-Webhook-Id (1–200
// printable ASCII) | 422 invalid_request | problem, errors[] | failed" and "processed |
// 200 | {"outcome":"processed","message_id","type","rows_written"} | processed"
// (webhooks/README.md, "Answers and outcomes"). A 200-character id of printable ASCII
// (every character from ' ' to '~') is processed and answered with exactly those four
// members. A 201-character id, an empty one, one holding a tab (non-printable, yet a
// legal header byte) and one holding a non-ASCII character are each 422
// invalid_request with one errors[] entry naming the header (rule format, or required
// when empty), recorded failed, nothing stored. An id holding \x01 or \x7f cannot be
// sent by net/http (it refuses a control character in a header); sent on a raw
// connection it is not well-formed HTTP/1.1, and the server answers as errors.md
// says: "invalid_request too: its one errors[] entry names the part (… headers …) with
// rule http_syntax" (the receiver never sees it).
func TestInboundMessageIDBoundsAndProcessedAnswer(t *testing.T) {
	ie := newInbound(t)
	ctx := context.Background()
	sec := ie.secret(t)
	cmp := uuid.New()
	putCampaigns(t, ie.conn, ie.ws, cmp)
	day := func(back int) string { return ie.clock.Now().AddDate(0, 0, -back).Format("2006-01-02") }

	// 200 characters: '!'…'~' twice over (188), a space inside, then "0123456789a".
	var b strings.Builder
	for c := byte('!'); c <= '~'; c++ {
		b.WriteByte(c)
	}
	id200 := b.String() + " " + b.String() + "0123456789a"
	if len(id200) != 200 {
		t.Fatalf("the id is %d characters", len(id200))
	}
	r := ie.send(t, inboundReported(cmp, day(1), day(2)), id200, ie.clock.Now(), sec)
	if r.Status != 200 {
		t.Fatalf("200-character id: %d %.400s, want 200 processed", r.Status, r.Body)
	}
	m := r.JSON(t)
	want := map[string]any{"outcome": Processed, "message_id": id200, "type": TypeActualsReported, "rows_written": float64(2)}
	if len(m) != len(want) {
		t.Fatalf("processed answer %s, want exactly outcome, message_id, type, rows_written", r.Body)
	}
	for k, v := range want {
		if m[k] != v {
			t.Fatalf("processed answer %s: %s is %#v, want %#v", r.Body, k, m[k], v)
		}
	}
	if n := inboundStoredActuals(t, ie.conn, ie.ws, cmp); n != 2 {
		t.Fatalf("%d days stored, want 2", n)
	}

	// Refused ids, each with its own content (a new day), so that only the id decides.
	// logged: the message id the failed row of a refusal by the receiver (field
	// SVC-Webhook-Id) carries: the id cut to 200 characters, every character that is not
	// printable ASCII shown as '?'.
	bad := []struct {
		what, id, field, rule, logged string
		raw                           bool // sent on a raw connection
	}{
		{"of 201 characters", id200 + "b", signature.MessageIDHeader, "format", id200, false},
		{"empty", "", signature.MessageIDHeader, "required", "", false},
		{"with a tab", "tab\tid", signature.MessageIDHeader, "format", "tab?id", false},
		{"with a non-ASCII character", "caf\u00e9-id", signature.MessageIDHeader, "format", "caf?-id", false},
		{`with \x01`, "ctl\x01id", "headers", "http_syntax", "", true},
		{`with \x7f`, "del\x7fid", "headers", "http_syntax", "", true},
	}
	for i, c := range bad {
		msg := inboundReported(cmp, day(3+i))
		hdr := []string{signature.Header, signature.Value(ie.clock.Now().Unix(), []byte(msg), []byte(sec)), signature.MessageIDHeader, c.id}
		var r apitest.Response
		if c.raw {
			r, _ = inboundRawPost(t, ie.srv, ie.path, append(hdr, "Content-Length", strconv.Itoa(len(msg)), "Connection", "close"), msg)
		} else {
			r = ie.srv.Do(t, "POST", ie.path, "", msg, hdr...)
		}
		if r.Status != 422 {
			t.Fatalf("id %s: %d %.400s, want 422 invalid_request", c.what, r.Status, r.Body)
		}
		p := apitest.Problem(t, r, 422, "invalid_request")
		errs, _ := p["errors"].([]any)
		if len(errs) != 1 {
			t.Fatalf("id %s: errors[] has %d entries, want 1: %s", c.what, len(errs), r.Body)
		}
		e, _ := errs[0].(map[string]any)
		if _, hasValue := e["value"]; e["field"] != c.field || e["rule"] != c.rule || !hasValue {
			t.Fatalf("id %s: errors[0] %v, want field %s, rule %s, a value", c.what, e, c.field, c.rule)
		}
	}
	if n := inboundStoredActuals(t, ie.conn, ie.ws, cmp); n != 2 {
		t.Fatalf("%d days stored after the refused ids, want still 2", n)
	}
	// The processed message recorded processed; each id the receiver refused recorded
	// failed, status 422.
	ie.flush(t)
	rows, err := ie.logs.Inbound(ctx, ie.ws, "", 100)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, row := range rows {
		got[fmt.Sprintf("%s %d %q", row.Outcome, row.Status, row.MessageID)]++
		if row.Outcome == Processed && row.Rows != 2 {
			t.Fatalf("processed row %+v, want 2 rows written", row)
		}
	}
	wantRows := map[string]int{fmt.Sprintf("%s 200 %q", Processed, id200): 1}
	for _, c := range bad {
		if c.field == signature.MessageIDHeader {
			wantRows[fmt.Sprintf("%s 422 %q", Failed, c.logged)]++
		}
	}
	for k, n := range wantRows {
		if got[k] != n {
			t.Fatalf("webhook_inbound rows %v, want %d of (outcome status message_id) %s", got, n, k)
		}
	}
}

// inboundHeldWriter holds the first upsert until release is closed (closing held when
// it starts), then writes through; later upserts write through at once.
type inboundHeldWriter struct {
	next    ActualsWriter
	once    sync.Once
	held    chan struct{}
	release chan struct{}
}

func (w *inboundHeldWriter) UpsertActuals(ctx context.Context, ws uuid.UUID, rows []ActualsRow) error {
	first := false
	w.once.Do(func() { first = true })
	if first {
		close(w.held)
		select {
		case <-w.release:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return w.next.UpsertActuals(ctx, ws, rows)
}

// inboundAnswer is an answer received off the test's goroutine.
type inboundAnswer struct {
	r   apitest.Response
	err error
}

// inboundPost is srv.Do for another goroutine (it reports errors instead of failing
// the test): POST body to path with headers (name, value, …).
func inboundPost(srv *apitest.Server, path, body string, headers ...string) inboundAnswer {
	req, err := http.NewRequest("POST", srv.URL+path, strings.NewReader(body))
	if err != nil {
		return inboundAnswer{err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := srv.Client.Do(req)
	if err != nil {
		return inboundAnswer{err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return inboundAnswer{r: apitest.Response{Status: resp.StatusCode, Header: resp.Header, Body: b}, err: err}
}
