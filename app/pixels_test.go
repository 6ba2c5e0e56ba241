package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
	"github.com/shopspring/decimal"

	"svc/lib/ids"
	"svc/schema/rejection"
)

// Pixels: create (a hostile name stays text), the list with its ids, the pixel page with
// its rollups in its zone, the time zone; another workspace's pixel is 404.
func TestPixelScreens(t *testing.T) {
	rg := newRig(t, false)
	ctx := context.Background()
	ws, other := rg.Workspace(t, false), rg.Workspace(t, false)
	adm := rg.member(t, ws, uniqueEmail("admin"), RoleAdmin)
	name := `<script>alert(1)</script>`
	p := adm.post("/app/pixels", "/app/pixels", url.Values{"name": {name}, "time_zone": {"Europe/Paris"}})
	loc := p.Header.Get("Location")
	if p.Status != 303 || !strings.HasPrefix(loc, "/app/pixels/pxl_") {
		t.Fatalf("create: %d %s", p.Status, p.Body)
	}
	pid, err := ids.Parse(ids.Pixel, strings.TrimPrefix(loc, "/app/pixels/"))
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/app/pixels", loc} {
		p := adm.get(path)
		if p.Status != 200 || strings.Contains(p.Body, name) || !strings.Contains(p.Body, "&lt;script&gt;alert(1)&lt;/script&gt;") {
			t.Fatalf("%s renders the name unescaped: %d\n%s", path, p.Status, p.Body)
		}
	}
	// A name's bound counts characters; control characters and broken UTF-8 are refused.
	for name, want := range map[string]int{strings.Repeat("é", 200): 303, strings.Repeat("é", 201): 422, "a\x00b": 422, "a\xffb": 422, "a\u0085b": 422} {
		if p := adm.post("/app/pixels", "/app/pixels", url.Values{"name": {name}}); p.Status != want {
			t.Fatalf("name %q (%d characters): %d, want %d", name, utf8.RuneCountInString(name), p.Status, want)
		}
	}
	if p := adm.post("/app/pixels", "/app/pixels", url.Values{"name": {"x"}, "time_zone": {"Mars/Olympus"}}); p.Status != 422 {
		t.Fatalf("a bad zone: %d", p.Status)
	}
	// A day of events in the pixel's zone shows in the table and the chart's data.
	b, err := rg.app.conn.PrepareBatch(ctx, `INSERT INTO events (workspace_id, pixel_id, sandbox, event_id, event_name,
		occurred_at, event_date, value, has_value, currency, consent, has_email, email_sha256, inserted_at)`)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	for i := range 3 {
		if err := b.Append(ws.ID, pid, uint8(0), uuid.New(), "purchase", now.Add(-time.Minute), now.Truncate(24*time.Hour),
			decimal.RequireFromString("10.50"), uint8(1), "EUR", uint8(1), uint8(0), strings.Repeat("x", 32), now); err != nil {
			t.Fatal(err)
		}
		_ = i
	}
	if err := b.Send(); err != nil {
		t.Fatal(err)
	}
	p = adm.get(loc + "?event=purchase")
	if !strings.Contains(p.Body, "<td>purchase</td><td>EUR</td><td class=\"num\">3</td>") || !strings.Contains(p.Body, "Europe/Paris") ||
		!strings.Contains(p.Body, "data-chart=\"{&#34;currency&#34;:&#34;EUR&#34;") {
		t.Fatalf("the pixel page:\n%s", p.Body)
	}
	// The zone can change; another workspace's pixel is not found.
	if p := adm.post(loc, loc+"/time-zone", url.Values{"time_zone": {""}}); p.Status != 303 {
		t.Fatalf("zone: %d", p.Status)
	}
	if p := adm.get(loc); !strings.Contains(p.Body, "<strong>UTC</strong>") {
		t.Fatalf("zone not changed:\n%s", p.Body)
	}
	op := rg.Pixel(t, other.ID)
	for _, id := range []string{ids.Format(ids.Pixel, op.ID), "pxl_x", ids.Format(ids.Key, pid)} {
		if p := adm.get("/app/pixels/" + id); p.Status != 404 {
			t.Fatalf("pixel %s: %d", id, p.Status)
		}
		if p := adm.post("/app/pixels", "/app/pixels/"+id+"/time-zone", url.Values{"time_zone": {"UTC"}}); p.Status != 404 {
			t.Fatalf("pixel %s zone: %d", id, p.Status)
		}
	}
}

// Without ClickHouse the application works but for the rollups: a pixel page says so
// (503), keys still change.
func TestWithoutClickHouse(t *testing.T) {
	rg := newRig(t, false)
	rg.app.conn = nil
	rg.app.Config.ClickHouse.Addr, rg.app.Config.ClickHouse.DialTimeout = "127.0.0.1:1", 200*time.Millisecond
	ws := rg.Workspace(t, false)
	px := rg.Pixel(t, ws.ID)
	adm := rg.member(t, ws, uniqueEmail("admin"), RoleAdmin)
	if p := adm.get("/app/pixels/" + ids.Format(ids.Pixel, px.ID)); p.Status != 503 || !strings.Contains(p.Body, "cannot be read right now") {
		t.Fatalf("pixel page: %d\n%s", p.Status, p.Body)
	}
	if p := adm.post("/app/api-keys", "/app/api-keys", url.Values{"scope": {"events:write"}, "burst": {"10"}, "daily": {"100"}}); p.Status != 201 {
		t.Fatalf("create a key: %d", p.Status)
	}
}

// The pixel page's health: its days (received, accepted, rejected by rule, duplicates),
// the last accepted event, the lag, and the newest rejections, as the API gives them.
func TestPixelHealthOnItsPage(t *testing.T) {
	rg := newRig(t, false)
	ctx := context.Background()
	ws := rg.Workspace(t, false)
	px := rg.Pixel(t, ws.ID)
	adm := rg.member(t, ws, uniqueEmail("admin"), RoleAdmin)
	rg.storeEvents(t, ws.ID, px.ID, 0, 2)
	now := time.Now().UTC().Truncate(time.Second)
	if err := rejection.Insert(ctx, rg.app.conn, "rejections.v1", now, []rejection.Row{
		{Workspace: ws.ID, Pixel: px.ID, Key: uuid.New(), ReceivedAt: now, RequestID: "req_health", Status: 202, BatchEvents: 2,
			Index: 1, Field: "events[1].currency", Rule: "iso4217", Value: `"EURO"`, Sample: true, Rejections: 1, Offset: 1},
		{Workspace: ws.ID, Pixel: px.ID, Key: uuid.New(), ReceivedAt: now, RequestID: "req_dup", Status: 202, BatchEvents: 1,
			Index: 0, Field: "events[0].event_id", Rule: "duplicate_event_id", Value: `null`, Sample: true, Rejections: 1, Offset: 2},
	}); err != nil {
		t.Fatal(err)
	}
	p := adm.get("/app/pixels/" + ids.Format(ids.Pixel, px.ID))
	today := time.Now().UTC().Format("2006-01-02")
	for _, want := range []string{`<td class="when">` + today + `</td><td class="num">4</td><td class="num">2</td><td class="num">1</td><td>iso4217: 1</td><td class="num">1</td>`,
		"2 rejections kept", "req_health", "<code>iso4217</code>", "<code>events[1].currency</code>", "Pipeline lag"} {
		if !strings.Contains(p.Body, want) {
			t.Fatalf("the pixel page lacks %q: %d\n%s", want, p.Status, p.Body)
		}
	}
	if strings.Contains(p.Body, "none in these days") {
		t.Fatal("no last accepted event")
	}
}

// A zone ClickHouse does not know (Go's zone data is newer) makes the pixel page a 422
// that says to choose another zone, not a 503 to wait out; any other failure is 503.
func TestPixelPageZoneUnknownToTheDatabase(t *testing.T) {
	unknown := &clickhouse.Exception{Code: 1000, Message: "Cannot load time zone America/Ciudad_Juarez"}
	if text, st := rollupsUnread(fmt.Errorf("rollups: %w", unknown), "America/Ciudad_Juarez"); st != 422 || !strings.Contains(text, "America/Ciudad_Juarez") {
		t.Fatalf("an unknown zone: %d %q", st, text)
	}
	if _, st := rollupsUnread(errors.New("dial tcp 127.0.0.1:9000: connection refused"), "UTC"); st != 503 {
		t.Fatalf("ClickHouse down: %d", st)
	}
}

// A store not answering is a 503 page to retry, not the 500 of a faulty page.
func TestStoreDownIsNotAFault(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: &os.SyscallError{Syscall: "connect", Err: syscall.ECONNREFUSED}}
	for _, err := range []error{refused, fmt.Errorf("erasure: %w", refused), io.EOF, fmt.Errorf("read: %w", context.DeadlineExceeded)} {
		if !storeDown(err) {
			t.Errorf("%v: not taken for a store down", err)
		}
	}
	for _, err := range []error{errors.New("template: no such field"), fmt.Errorf("decode: %w", strconv.ErrSyntax)} {
		if storeDown(err) {
			t.Errorf("%v: taken for a store down", err)
		}
	}
}

// With the session store down, a signed-in page is a 503 with Retry-After.
func TestPagesWithRedisDown(t *testing.T) {
	rg := newRig(t, false)
	b := rg.member(t, rg.Workspace(t, false), uniqueEmail("ada"), RoleAdmin)
	dead := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	t.Cleanup(func() { dead.Close() })
	rg.app.Sessions = NewSessions(dead, rg.app.Config.SessionTTL)
	p := b.get("/app/api-keys")
	if p.Status != 503 || p.Header.Get("Retry-After") == "" || !strings.Contains(p.Body, "not answering") {
		t.Fatalf("a page with Redis down: %d %v\n%s", p.Status, p.Header, p.Body)
	}
}
