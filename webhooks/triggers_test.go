package webhooks

import (
	"context"
	"net/http"
	"testing"
	"time"

	json "github.com/goccy/go-json"
	"github.com/google/uuid"
	"github.com/shopspring/decimal"

	"svc/lib/apikey"
	"svc/lib/ids"
	"svc/schema"
	"svc/schema/rollups"
	"svc/schema/workspace"
)

func TestTriggers(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	rcv := newReceiver(t, e.clock, func(w http.ResponseWriter, n int) { w.WriteHeader(200) })
	ks := workspace.NewStore(e.rdb)
	w, err := ks.CreateWorkspace(ctx, "triggers", false)
	if err != nil {
		t.Fatal(err)
	}
	st := e.store()
	ep, err := st.CreateEndpoint(ctx, w.ID, rcv.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	rcv.secret = ep.Secrets[0].Secret

	now := e.clock.Now()
	today := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC)
	// A day is final MaxEventAge (7 days) and an hour after it ends (rollups.Status).
	final, open := today.AddDate(0, 0, -9), today.AddDate(0, 0, -1)
	otherWS := uuid.New()
	px, err := ks.CreatePixel(ctx, w.ID, "triggers")
	if err != nil {
		t.Fatal(err)
	}
	pixel := px.ID
	insert := func(ws uuid.UUID, day time.Time, name string, value string) {
		t.Helper()
		b, err := e.conn.PrepareBatch(ctx, `INSERT INTO events (workspace_id, pixel_id, sandbox, event_id, event_name,
			occurred_at, event_date, value, has_value, currency, consent, inserted_at)`)
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Append(ws, pixel, uint8(0), uuid.New(), name, day.Add(time.Hour), day,
			decimal.RequireFromString(value), uint8(1), "EUR", uint8(1), now); err != nil {
			t.Fatal(err)
		}
		if err := b.Send(); err != nil {
			t.Fatal(err)
		}
	}
	insert(w.ID, final, "purchase", "10.5")
	insert(w.ID, final, "purchase", "2")
	insert(w.ID, final, "view", "0")
	insert(w.ID, open, "purchase", "1")     // not final yet
	insert(otherWS, final, "purchase", "1") // a workspace without endpoints

	// Keys: one expiring in three days, one in thirty, one revoked.
	soon, later := now.Add(72*time.Hour), now.Add(30*24*time.Hour)
	k1, _, _ := ks.CreateKey(ctx, workspace.KeySpec{WorkspaceID: w.ID, Env: apikey.Live, Scopes: []string{"events:write"}, ExpiresAt: &soon})
	ks.CreateKey(ctx, workspace.KeySpec{WorkspaceID: w.ID, Env: apikey.Live, Scopes: []string{"events:write"}, ExpiresAt: &later})
	k3, _, _ := ks.CreateKey(ctx, workspace.KeySpec{WorkspaceID: w.ID, Env: apikey.Live, Scopes: []string{"events:write"}, ExpiresAt: &soon})
	ks.Revoke(ctx, k3.ID)

	tr := &Triggers{Config: e.cfg, Emitter: e.emitter(), Keys: ks, Conn: e.conn, Log: e.log, Now: e.clock.Now}
	// Pretend the last scan (in the state's form before zones) announced the UTC day of
	// eleven days ago, so this one covers the final day.
	if err := st.setState(ctx, oldClosedState, today.AddDate(0, 0, -11).Format("2006-01-02")); err != nil {
		t.Fatal(err)
	}
	for range 2 { // the second scan finds nothing new
		if err := tr.ScanOnce(ctx); err != nil {
			t.Fatal(err)
		}
	}
	wk := e.worker("w")
	for {
		if n, err := wk.RunOnce(ctx); err != nil {
			t.Fatal(err)
		} else if n == 0 {
			break
		}
	}
	hits := rcv.Hits()
	if len(hits) != 2 {
		t.Fatalf("%d deliveries, want 2 (one day closed, one key expiring)", len(hits))
	}
	byType := map[string]map[string]any{}
	for _, h := range hits {
		if !h.Valid {
			t.Fatal("bad signature")
		}
		var m map[string]any
		if err := json.Unmarshal(h.Body, &m); err != nil {
			t.Fatal(err)
		}
		byType[m["type"].(string)] = m
	}
	dc := byType[KindDayClosed]["data"].(map[string]any)
	if dc["pixel_id"] != ids.Format(ids.Pixel, pixel) || dc["date"] != final.Format("2006-01-02") ||
		dc["events"] != float64(3) || len(dc["rows"].([]any)) != 2 {
		t.Fatalf("day_closed data %v", dc)
	}
	row := dc["rows"].([]any)[0].(map[string]any)
	if row["event_name"] != "purchase" || row["value"] != "12.5000" || row["events"] != float64(2) {
		t.Fatalf("day_closed row %v", row)
	}
	ke := byType[KindKeyExpiring]["data"].(map[string]any)
	if ke["key_id"] != ids.Format(ids.Key, k1.ID) || ke["expires_in_seconds"] != float64(72*3600) {
		t.Fatalf("key.expiring data %v", ke)
	}
	if byType[KindDayClosed]["id"] != ids.Format(ids.Event, EventID(KindDayClosed, pixel.String(), final.Format("2006-01-02"), "false")) {
		t.Fatalf("day_closed id is not the stable one: %v", byType[KindDayClosed]["id"])
	}
	if dc["time_zone"] != "UTC" {
		t.Fatalf("day_closed of a pixel without a zone: %v", dc)
	}
	if s, _ := st.getState(ctx, closedScanState); s != now.Format(time.RFC3339Nano) {
		t.Fatalf("scan state %s, want the scan's instant %s", s, now.Format(time.RFC3339Nano))
	}
}

// TestTriggersLocalDays: a +05:45 pixel's day is announced when its local day (not the
// UTC one) has turned final, with the events of that local day only.
func TestTriggersLocalDays(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	rcv := newReceiver(t, e.clock, func(w http.ResponseWriter, n int) { w.WriteHeader(200) })
	ks := workspace.NewStore(e.rdb)
	w, err := ks.CreateWorkspace(ctx, "local days", false)
	if err != nil {
		t.Fatal(err)
	}
	px, err := ks.PutPixel(ctx, workspace.Pixel{ID: uuid.New(), WorkspaceID: w.ID, Name: "kathmandu", TimeZone: "Asia/Kathmandu"})
	if err != nil {
		t.Fatal(err)
	}
	st := e.store()
	ep, err := st.CreateEndpoint(ctx, w.ID, rcv.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	rcv.secret = ep.Secrets[0].Secret
	loc, _ := schema.LoadZone("Asia/Kathmandu")
	// The first local day that turns final more than an hour from now.
	day := rollups.LocalDate(e.clock.Now(), time.UTC).AddDate(0, 0, -9)
	for !rollups.DayEnd(day, loc).Add(rollups.Grace).After(e.clock.Now().Add(time.Hour)) {
		day = day.AddDate(0, 0, 1)
	}
	start, end := rollups.DayStart(day, loc), rollups.DayEnd(day, loc)
	final := end.Add(rollups.Grace)
	b, err := e.conn.PrepareBatch(ctx, `INSERT INTO events (workspace_id, pixel_id, sandbox, event_id, event_name,
		occurred_at, event_date, value, has_value, currency, consent, inserted_at)`)
	if err != nil {
		t.Fatal(err)
	}
	for _, at := range []time.Time{start.Add(-time.Second), start, end.Add(-time.Second), end} {
		if err := b.Append(w.ID, px.ID, uint8(0), uuid.New(), "purchase", at, at.Truncate(24*time.Hour),
			decimal.RequireFromString("2.5"), uint8(1), "EUR", uint8(1), e.clock.Now()); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Send(); err != nil {
		t.Fatal(err)
	}
	tr := &Triggers{Config: e.cfg, Emitter: e.emitter(), Keys: ks, Conn: e.conn, Log: e.log, Now: e.clock.Now}
	deliveries := func() []map[string]any {
		t.Helper()
		wk := e.worker("w")
		for {
			if n, err := wk.RunOnce(ctx); err != nil {
				t.Fatal(err)
			} else if n == 0 {
				break
			}
		}
		var out []map[string]any
		for _, h := range rcv.Hits() {
			var m map[string]any
			if err := json.Unmarshal(h.Body, &m); err != nil {
				t.Fatal(err)
			}
			out = append(out, m)
		}
		return out
	}
	if err := st.setState(ctx, closedScanState, final.Add(-2*time.Hour).Format(time.RFC3339Nano)); err != nil {
		t.Fatal(err)
	}
	e.clock.Set(final.Add(-time.Second)) // a second before the local day is final
	if err := tr.ScanOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if got := deliveries(); len(got) != 0 {
		t.Fatalf("announced before the local day was final: %v", got)
	}
	e.clock.Set(final)
	if err := tr.ScanOnce(ctx); err != nil {
		t.Fatal(err)
	}
	got := deliveries()
	if len(got) != 1 {
		t.Fatalf("%d deliveries, want the one local day: %v", len(got), got)
	}
	dc := got[0]["data"].(map[string]any)
	if dc["date"] != day.Format(time.DateOnly) || dc["time_zone"] != "Asia/Kathmandu" || dc["events"] != float64(2) ||
		dc["rows"].([]any)[0].(map[string]any)["value"] != "5.0000" {
		t.Fatalf("day_closed data %v", dc)
	}
	if got[0]["id"] != ids.Format(ids.Event, EventID(KindDayClosed, px.ID.String(), day.Format(time.DateOnly), "false", "Asia/Kathmandu")) {
		t.Fatalf("id %v", got[0]["id"])
	}
	// A day later the next local day, with the event of its first second, is final too.
	e.clock.Set(final.Add(24 * time.Hour))
	if err := tr.ScanOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if got = deliveries(); len(got) != 2 {
		t.Fatalf("%d deliveries, want two local days: %v", len(got), got)
	}
	for _, d := range got {
		dc := d["data"].(map[string]any)
		if dc["date"] == day.AddDate(0, 0, 1).Format(time.DateOnly) && dc["events"] == float64(1) {
			return
		}
	}
	t.Fatalf("the next local day was not announced with its one event: %v", got)
}
