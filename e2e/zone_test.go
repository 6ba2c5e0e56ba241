package e2e

// End-to-end test of local days through the built binary: admin commands set zones,
// POST /events takes events either side of a +05:45 midnight, GET /pixel-rollups
// reads them on two local days.

import (
	"fmt"
	"net/url"
	"testing"
	"time"

	json "github.com/goccy/go-json"
)

func TestLocalDaysThroughTheBinary(t *testing.T) {
	in := newInstance(t)
	in.env = append(in.env, "SVC_ROLLUP_BATCH_INTERVAL=200ms", "SVC_ROLLUP_SESSION_TIMEOUT=6s")
	in.run("migrate")
	ws := field(t, in.run("admin", "workspace", "create", "--name", "Zones", "--time-zone", "America/New_York"), "id")
	pxOut := in.run("admin", "pixel", "create", "--workspace", ws, "--time-zone", "Asia/Kathmandu")
	px := field(t, pxOut, "id")
	if field(t, pxOut, "time_zone") != "Asia/Kathmandu" || field(t, pxOut, "time_zone_source") != "pixel" {
		t.Fatalf("pixel create: %s", pxOut)
	}
	secret := field(t, in.run("admin", "key", "create", "--workspace", ws, "--env", "live", "--scopes", "events:write,pixels:read"), "secret")
	in.start()

	// The latest Kathmandu midnight at least ten minutes ago; events five minutes
	// either side of it, and one more after it from the same person.
	ktm, _ := time.LoadLocation("Asia/Kathmandu")
	now := time.Now().In(ktm).Add(-10 * time.Minute)
	mid := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, ktm)
	before, after := mid.AddDate(0, 0, -1).Format(time.DateOnly), mid.Format(time.DateOnly)
	var evs []string
	for _, at := range []time.Time{mid.Add(-5 * time.Minute), mid.Add(5 * time.Minute), mid.Add(7 * time.Minute)} {
		evs = append(evs, fmt.Sprintf(`{"event_name":"purchase","occurred_at":%q,"value":2.5,"currency":"NPR","consent":{"measurement":true},"identity":{"email":"ram@example.com"}}`,
			at.UTC().Format(time.RFC3339)))
	}
	body := fmt.Sprintf(`{"pixel_id":%q,"events":[%s,%s,%s]}`, px, evs[0], evs[1], evs[2])
	if st, b := in.post(secret, "/v1/events", body); st != 202 {
		t.Fatalf("POST /v1/events: %d %s", st, b)
	}
	type row struct {
		Date         string `json:"date"`
		TimeZone     string `json:"time_zone"`
		Events       int    `json:"events"`
		UniquePeople int    `json:"unique_people"`
		Value        string `json:"value"`
	}
	read := func(query string) []row {
		t.Helper()
		var page struct {
			Data []row `json:"data"`
		}
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
			st, b := in.get(secret, "/v1/pixel-rollups?pixel_id="+px+query)
			if st != 200 {
				t.Fatalf("GET /pixel-rollups%s: %d %s", query, st, b)
			}
			if err := json.Unmarshal(b, &page); err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, r := range page.Data {
				n += r.Events
			}
			if n >= 3 {
				return page.Data
			}
			if time.Now().After(deadline) {
				t.Fatalf("GET /pixel-rollups%s: %d of 3 events after 30 s: %+v", query, n, page.Data)
			}
		}
	}
	got := read("")
	want := []row{{before, "Asia/Kathmandu", 1, 1, "2.5000"}, {after, "Asia/Kathmandu", 2, 1, "5.0000"}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("Kathmandu days: %+v, want %+v\n%s", got, want, in.log)
	}
	// The same events in UTC days: Kathmandu's midnight is 18:15 UTC, one UTC day.
	utcDay := mid.UTC().Format(time.DateOnly)
	if got := read("&time_zone=UTC"); fmt.Sprint(got) != fmt.Sprint([]row{{utcDay, "UTC", 3, 1, "7.5000"}}) {
		t.Fatalf("UTC days: %+v", got)
	}
	if st, b := in.get(secret, "/v1/pixel-rollups?pixel_id="+px+"&time_zone="+url.QueryEscape("Asia/Katmandu'")); st != 422 {
		t.Fatalf("bad time_zone: %d %s", st, b)
	}
	// Without its own zone the pixel follows the workspace's.
	if out := in.run("admin", "pixel", "set-time-zone", px, "inherit"); field(t, out, "time_zone") != "America/New_York" {
		t.Fatalf("pixel set-time-zone inherit: %s", out)
	}
	if out := in.run("admin", "workspace", "set-time-zone", ws, "Asia/Kolkata"); field(t, out, "time_zone") != "Asia/Kolkata" {
		t.Fatalf("workspace set-time-zone: %s", out)
	}
	time.Sleep(1500 * time.Millisecond) // the API process sees zone changes within a second
	rows, n := read(""), 0
	for _, r := range rows {
		if r.TimeZone != "Asia/Kolkata" {
			t.Fatalf("after the changes: %+v", r)
		}
		n += r.Events
	}
	if n != 3 {
		t.Fatalf("after the changes: %d events in %+v, want 3", n, rows)
	}
}
