package webhooks

import (
	"context"
	"net/http"
	"testing"
	"time"

	json "github.com/goccy/go-json"
	"github.com/google/uuid"
	"github.com/shopspring/decimal"

	"svc/api/ids"
	"svc/api/keys"
	"svc/rollup"
)

func TestTriggers(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	rcv := newReceiver(t, e.clock, func(w http.ResponseWriter, n int) { w.WriteHeader(200) })
	ks := keys.NewStore(e.rdb)
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
	// A day is final MaxEventAge (7 days) and an hour after it ends (rollup.Status).
	final, open := today.AddDate(0, 0, -9), today.AddDate(0, 0, -1)
	pixel, otherWS := uuid.New(), uuid.New()
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
	k1, _, _ := ks.CreateKey(ctx, keys.KeySpec{WorkspaceID: w.ID, Env: keys.Live, Scopes: []string{"events:write"}, ExpiresAt: &soon})
	ks.CreateKey(ctx, keys.KeySpec{WorkspaceID: w.ID, Env: keys.Live, Scopes: []string{"events:write"}, ExpiresAt: &later})
	k3, _, _ := ks.CreateKey(ctx, keys.KeySpec{WorkspaceID: w.ID, Env: keys.Live, Scopes: []string{"events:write"}, ExpiresAt: &soon})
	ks.Revoke(ctx, k3.ID)

	tr := &Triggers{Config: e.cfg, Emitter: e.emitter(), Keys: ks, Conn: e.conn, Log: e.log, Now: e.clock.Now}
	// Pretend the last scan was eleven days ago, so this one covers the final day.
	if err := st.setState(ctx, "day_closed", today.AddDate(0, 0, -11).Format("2006-01-02")); err != nil {
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
	latestFinal := today
	for rollup.Status(latestFinal, now) != rollup.StatusFinal {
		latestFinal = latestFinal.AddDate(0, 0, -1)
	}
	if s, _ := st.getState(ctx, "day_closed"); s != latestFinal.Format("2006-01-02") {
		t.Fatalf("scan state %s, want the latest final day %s", s, latestFinal.Format("2006-01-02"))
	}
}
