package app

import (
	"context"
	"strings"
	"testing"
	"time"

	json "github.com/goccy/go-json"
	"github.com/google/uuid"
	"github.com/shopspring/decimal"

	"svc/lib/ids"
	"svc/schema/rejection"
	"svc/schema/trace"
)

// storeEvents writes n accepted events of pixel at Kafka partition 0 from offset, as
// the consumer stores them (an email digest on each: the view must never show it).
func (rg *rig) storeEvents(t *testing.T, ws, pixel uuid.UUID, offset int64, n int) {
	t.Helper()
	b, err := rg.app.conn.PrepareBatch(context.Background(), `INSERT INTO events (workspace_id, pixel_id, sandbox, event_id, event_name,
		occurred_at, event_date, value, has_value, currency, consent, has_email, email_sha256, request_id, received_at, inserted_at,
		kafka_partition, kafka_offset, batch_index)`)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC().Truncate(time.Second)
	for i := range n {
		if err := b.Append(ws, pixel, uint8(0), uuid.New(), "purchase", now.Add(-time.Minute), now.Truncate(24*time.Hour),
			decimal.RequireFromString("49.90"), uint8(1), "EUR", uint8(1), uint8(1), digestMark, "req_live", now.Add(-3*time.Second), now,
			int32(0), offset+int64(i), uint8(0)); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Send(); err != nil {
		t.Fatal(err)
	}
}

// digestMark is the stored email digest of storeEvents' events.
const digestMark = "DIGEST-MUST-NOT-SHOW-0123456789a"

// The live view: what was stored for the pixel, accepted and rejected with the rule and
// field, identity only as "email digest present"; the feed resumes after its cursor;
// sampling past the limit is counted; a bad cursor is a 422 problem (invalid_request,
// as the API's query parameters); another workspace's pixel 404s.
func TestLiveView(t *testing.T) {
	rg := newRig(t, false)
	ctx := context.Background()
	ws, other := rg.Workspace(t, false), rg.Workspace(t, false)
	px := rg.Pixel(t, ws.ID)
	viewer := rg.member(t, ws, uniqueEmail("viewer"), RoleViewer)
	id := ids.Format(ids.Pixel, px.ID)
	rg.storeEvents(t, ws.ID, px.ID, 10, 2)
	now := time.Now().UTC().Truncate(time.Second)
	if err := rejection.Insert(ctx, rg.app.conn, "rejections.v1", now, []rejection.Row{
		{Workspace: ws.ID, Pixel: px.ID, Key: uuid.New(), ReceivedAt: now.Add(-time.Second), RequestID: "req_bad", Status: 202,
			BatchEvents: 2, Index: 1, Field: "events[1].currency", Rule: "iso4217", Value: `"EURO"`, Sample: true, Rejections: 1, Offset: 5},
		{Workspace: ws.ID, Pixel: px.ID, ReceivedAt: now.Add(-time.Second), Status: 202, Field: "events[1].currency", Rule: "iso4217",
			Rejections: 7, Offset: 6},
	}); err != nil {
		t.Fatal(err)
	}
	p := viewer.get("/app/pixels/" + id + "/live")
	for _, want := range []string{"email digest present", "rule iso4217 on events[1].currency", "rejected (202)", "purchase (#0)",
		`id="live-accepted">2<`, `id="live-rejected">8<`, `id="live-not-stored">7<`, "100 accepted events and 100 rejections every 2 s"} {
		if !strings.Contains(p.Body, want) {
			t.Fatalf("the live page lacks %q: %d\n%s", want, p.Status, p.Body)
		}
	}
	if strings.Contains(p.Body, digestMark) || strings.Contains(p.Body, "<script>") && !strings.Contains(p.Body, "live.js") {
		t.Fatalf("the live page shows an identity value or an inline script:\n%s", p.Body)
	}
	cursor := strings.Split(strings.Split(p.Body, `data-cursor="`)[1], `"`)[0]
	// The feed: nothing new, then the one stored after.
	var f liveFeed
	feed := func() {
		t.Helper()
		a := viewer.get("/app/pixels/" + id + "/live/feed?cursor=" + cursor)
		if a.Status != 200 || json.Unmarshal([]byte(a.Body), &f) != nil {
			t.Fatalf("feed: %d %s", a.Status, a.Body)
		}
		cursor = f.Cursor
	}
	feed()
	if len(f.Rows) != 0 || f.Accepted != 0 || f.Rejected != 0 {
		t.Fatalf("a feed with nothing new: %+v", f)
	}
	rg.storeEvents(t, ws.ID, px.ID, 12, 1)
	feed()
	// Cells[1]: seconds from its 202 to storage (storeEvents stores it 3 s after).
	if len(f.Rows) != 1 || f.Accepted != 1 || f.Rows[0].Outcome != "accepted" || f.Rows[0].Cells[5] != "email digest present" ||
		f.Rows[0].Cells[1] != "3 s" {
		t.Fatalf("the feed after one more: %+v", f)
	}
	// Past the limit the read samples: the newest, and how many it left out.
	rg.storeEvents(t, ws.ID, px.ID, 13, 5)
	c, err := trace.ParseLiveCursor(cursor)
	if err != nil {
		t.Fatal(err)
	}
	pg, err := trace.Live(ctx, rg.app.conn, trace.LiveQuery{Workspace: ws.ID, Pixel: px.ID, Limit: 2}, c, time.Now())
	if err != nil || len(pg.Rows) != 2 || pg.Accepted != 5 || pg.SkippedAccepted != 3 {
		t.Fatalf("sampling: %v %+v", err, pg)
	}
	// A bad cursor is a problem document; another workspace's pixel is not found.
	if a := viewer.get("/app/pixels/" + id + "/live/feed?cursor=x"); a.Status != 422 || !strings.Contains(a.Body, `"code":"invalid_request"`) ||
		a.Header.Get("Content-Type") != "application/problem+json" {
		t.Fatalf("a bad cursor: %d %s", a.Status, a.Body)
	}
	op := ids.Format(ids.Pixel, rg.Pixel(t, other.ID).ID)
	for _, path := range []string{"/app/pixels/" + op + "/live", "/app/pixels/" + op + "/live/feed?cursor=" + cursor} {
		if a := viewer.get(path); a.Status != 404 {
			t.Fatalf("%s: %d", path, a.Status)
		}
	}
}
