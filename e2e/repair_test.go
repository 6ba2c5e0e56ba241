package e2e

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	json "github.com/goccy/go-json"

	"svc/schema/apitest"
)

// TestRollupsRepairedAfterAnInsertFailedMidway: an INSERT that stores its events part
// and then fails in a materialized view (as one cut by a ClickHouse server killed
// between its parts does) leaves events without rollup rows, and the consumer's
// read-back, finding the events stored, does not send them again. The privacy worker
// rebuilds that INSERT's pixel-days from the events: GET /pixel-rollups then counts
// every accepted event exactly once, and the raw table agrees with the rollups.
//
// The failing view: 18.16 pushes a block to the table, then to its views in the order
// of their names, so a view named aaa_* that throws on one value runs before every
// rollup view and fails the INSERT after its events part is written.
func TestRollupsRepairedAfterAnInsertFailedMidway(t *testing.T) {
	in := newInstance(t)
	// The worker polls every 2 s: a window in which the rollups lack the failed INSERT's
	// events, which the reads below look into.
	in.env = append(append(in.env, privacyEnv...), "SVC_PRIVACY_POLL=2s")
	in.run("migrate")
	ws := field(t, in.run("admin", "workspace", "create", "--name", "Repair"), "id")
	px := field(t, in.run("admin", "pixel", "create", "--workspace", ws), "id")
	secret := field(t, in.run("admin", "key", "create", "--workspace", ws, "--env", "live", "--scopes", "events:write,pixels:read", "--burst", "1000"), "secret")
	db := in.getenv("SVC_CLICKHOUSE_DB")
	rdb := apitest.Redis(t)
	t.Cleanup(func() {
		rdb.Del(context.Background(), "svc:privacy:{"+db+"}:inserts", "svc:privacy:{"+db+"}:flushes", "svc:privacy:{"+db+"}:holds")
	})
	in.ch("CREATE MATERIALIZED VIEW aaa_fail_mv ENGINE = Memory AS SELECT throwIf(value = 666) AS failed FROM events")
	in.start()

	at := time.Now().UTC().Add(-time.Minute).Format(time.RFC3339)
	send := func(values ...int) {
		var evs []string
		for _, v := range values {
			evs = append(evs, fmt.Sprintf(`{"event_name":"purchase","occurred_at":%q,"value":%d,"currency":"EUR","consent":{"measurement":true}}`, at, v))
		}
		if st, b := in.post(secret, "/v1/events", fmt.Sprintf(`{"pixel_id":%q,"events":[%s]}`, px, strings.Join(evs, ","))); st != 202 {
			t.Fatalf("POST /events: %d %s", st, b)
		}
	}
	send(1, 2, 3)
	in.waitFor("the first batch in the rollups", 30*time.Second, func() bool { return eventsCounted(in.rollups(secret, px)) == 3 })
	sent := time.Now()
	send(666, 4)
	accepted := time.Now()
	// Until the repair, the rollups lack the failed INSERT's events: no answer may claim
	// them complete (meta.ingested_through past the 202) while it shows fewer.
	claims := 0
	in.waitFor("the rollups repaired", 60*time.Second, func() bool {
		st, b := in.get(secret, "/v1/pixel-rollups?pixel_id="+px)
		var page struct {
			Data []rollupRow `json:"data"`
			Meta struct {
				IngestedThrough *time.Time `json:"ingested_through"`
			} `json:"meta"`
		}
		if st != 200 || json.Unmarshal(b, &page) != nil {
			t.Fatalf("GET /pixel-rollups: %d %s", st, b)
		}
		n, v := 0, 0.0
		for _, r := range page.Data {
			f, _ := strconv.ParseFloat(r.Value, 64)
			n, v = n+r.Events, v+f
		}
		if w := page.Meta.IngestedThrough; w != nil && w.After(accepted) {
			claims++
			if n != 5 {
				t.Fatalf("ingested_through %v (the batch was accepted by %v) with %d events of 5 shown", w, accepted, n)
			}
		}
		return n == 5 && v == 676
	})
	if got := in.chInt("SELECT count() FROM events"); got != 5 {
		t.Fatalf("events table: %d rows, want 5", got)
	}
	in.ch("DROP TABLE aaa_fail_mv")
	t.Logf("repaired %.1fs after the batch was sent; %d answers claimed it complete, the last read included", time.Since(sent).Seconds(), claims)
	for _, table := range []string{"pixel_rollups_daily", "pixel_rollups_15m"} {
		if got := in.ch("SELECT countMerge(events_state), sumMerge(value_state) = 676 FROM " + table); got != "5\t1" {
			t.Fatalf("%s: %q, want 5 events worth 676", table, got)
		}
	}
	if got := in.ch("SELECT countMerge(events_state) FROM pixel_accepted_minutes"); got != "5" {
		t.Fatalf("pixel_accepted_minutes: %q events, want 5", got)
	}
	if got := in.ch("SELECT count(), sum(value) = 676 FROM events"); got != "5\t1" {
		t.Fatalf("events table: %q, want 5 events worth 676", got)
	}
	if !strings.Contains(in.log.String(), "rollups repaired after unsure inserts") {
		t.Fatalf("no repair in the log:\n%s", in.log.String())
	}
	if n, err := rdb.HLen(context.Background(), "svc:privacy:{"+db+"}:inserts").Result(); err != nil || n != 0 {
		t.Fatalf("%d INSERTs still registered for a repair (%v)", n, err)
	}
}
