package webhooks

import (
	"fmt"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"svc/lib/chpool"
	"svc/lib/settings"
)

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for in, want := range map[string]time.Duration{
		"":     0,
		"120":  2 * time.Minute,
		"0":    0,
		"-5":   0,
		"soon": 0,
		now.Add(90 * time.Second).Format(http.TimeFormat): 90 * time.Second,
		now.Add(-time.Hour).Format(http.TimeFormat):       0,
	} {
		if got := parseRetryAfter(in, now); got != want {
			t.Errorf("parseRetryAfter(%q) = %s, want %s", in, got, want)
		}
	}
}

// TestJitterBounds: a wait is spread uniformly over ±Jitter of itself: the lowest draw
// gives the bottom of the range, the middle the wait itself, the highest its top.
func TestJitterBounds(t *testing.T) {
	w := &Worker{Config: Config{Jitter: 0.1}}
	for r, want := range map[float64]time.Duration{0: 54 * time.Minute, 0.5: time.Hour, 0.999999: 66 * time.Minute} {
		w.Rand = func() float64 { return r }
		if d := w.jitter(time.Hour); d < want-time.Second || d > want+time.Second {
			t.Fatalf("jitter(1h) with rand %v = %s, want %s", r, d, want)
		}
	}
	if w.jitter(0) != 0 {
		t.Fatal("jitter(0) must stay 0 (the first attempt is immediate)")
	}
}

func TestValidateURL(t *testing.T) {
	for u, ok := range map[string]bool{
		"https://example.com/hook":     true,
		"http://127.0.0.1:8080/x?y=1":  true,
		"ftp://example.com":            false,
		"/relative":                    false,
		"https://user:pw@example.com/": false,
		"https://example.com/#frag":    false,
		"https://":                     false,
		"https://example.com:99999/":   false,
		"https://example.com:0/":       false,
		"https://example.com:443/x":    true,
	} {
		if err := ValidateURL(u); (err == nil) != ok {
			t.Errorf("ValidateURL(%q) = %v", u, err)
		}
	}
}

func TestPtrField(t *testing.T) {
	for ptr, want := range map[string]string{"/data/days/0/date": "data.days[0].date", "/type": "type", "/data": "data"} {
		if got := ptrField(ptr); got != want {
			t.Errorf("ptrField(%q) = %q, want %q", ptr, got, want)
		}
	}
}

func TestConfigFromEnv(t *testing.T) {
	vars := map[string]string{"SVC_WEBHOOKS_SCHEDULE": "0s, 1s,1m", "SVC_WEBHOOKS_JITTER_PERMILLE": "0"}
	r := &settings.Reader{Lookup: func(k string) (string, bool) { v, ok := vars[k]; return v, ok }}
	c := ConfigFromEnv(r)
	if err := r.Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if len(c.Schedule) != 3 || c.Schedule[2] != time.Minute || c.Jitter != 0 || c.Timeout != 15*time.Second {
		t.Fatalf("config %+v", c)
	}
	d := DefaultConfig()
	if err := d.Validate(); err != nil || len(d.Schedule) != 10 {
		t.Fatalf("defaults: %v, %d attempts", err, len(d.Schedule))
	}
	if d.ReplayWindow != 30*24*time.Hour { // webhooks.md: a message id is remembered 30 days
		t.Fatalf("default replay window %s, want 720h", d.ReplayWindow)
	}
	if len(d.AllowNets) != 0 {
		t.Fatalf("default SVC_WEBHOOKS_ALLOW_NETS %v, want none", d.AllowNets)
	}
	vars["SVC_WEBHOOKS_ALLOW_NETS"] = "127.0.0.0/8, 10.1.2.3/16,::1"
	if c := ConfigFromEnv(r); c.Validate() != nil || fmt.Sprint(c.AllowNets) != "[127.0.0.0/8 10.1.0.0/16 ::1/128]" {
		t.Fatalf("SVC_WEBHOOKS_ALLOW_NETS read as %v (%v)", c.AllowNets, c.Validate())
	}
	vars["SVC_WEBHOOKS_ALLOW_NETS"] = "127.0.0.0/8,intranet"
	if err := ConfigFromEnv(r).Validate(); err == nil || !strings.Contains(err.Error(), "SVC_WEBHOOKS_ALLOW_NETS") {
		t.Fatalf("an invalid SVC_WEBHOOKS_ALLOW_NETS entry: %v", err)
	}
	delete(vars, "SVC_WEBHOOKS_ALLOW_NETS")
	vars["SVC_WEBHOOKS_SCHEDULE"] = "0s,soon"
	vars["SVC_WEBHOOKS_LEASE"] = "10s"
	if err := ConfigFromEnv(r).Validate(); err == nil {
		t.Fatal("a bad schedule and a lease shorter than the timeout were accepted")
	}
}

// TestInboundRetentionStatements: the first month kept, and the statement for each
// schema variant.
func TestInboundRetentionStatements(t *testing.T) {
	for now, want := range map[string]string{
		"2026-11-27T10:00:00Z": "2026-10-01", // 30 days before: 2026-10-28
		"2026-03-01T00:00:00Z": "2026-01-01", // 30 days before: 2026-01-30
		"2026-03-31T23:59:59Z": "2026-03-01",
	} {
		at, _ := time.Parse(time.RFC3339, now)
		if got := FirstKeptMonth(at, 30*24*time.Hour).Format("2006-01-02"); got != want {
			t.Errorf("FirstKeptMonth(%s) = %s, want %s", now, got, want)
		}
	}
	if got := dropPartitionSQL(chpool.Config{Database: "svc"}, "webhook_inbound", 202609); got != "ALTER TABLE svc.webhook_inbound DROP PARTITION 202609" {
		t.Errorf("single node: %s", got)
	}
	if got := dropPartitionSQL(chpool.Config{Database: "svc", Cluster: "c1"}, "webhook_inbound", 202609); got != "ALTER TABLE svc.webhook_inbound_local ON CLUSTER c1 DROP PARTITION 202609" {
		t.Errorf("clustered: %s", got)
	}
}

// TestFailureAddr: an IPv4 address counts alone, an IPv6 client by its /64, a mapped
// IPv4 as IPv4.
func TestFailureAddr(t *testing.T) {
	for in, want := range map[string]string{
		"203.0.113.7":             "203.0.113.7",
		"::ffff:203.0.113.7":      "203.0.113.7",
		"2001:db8:1:2:3:4:5:6":    "2001:db8:1:2::/64",
		"2001:db8:1:2:ffff::9999": "2001:db8:1:2::/64",
	} {
		if got := failureAddr(netip.MustParseAddr(in)); got != want {
			t.Errorf("failureAddr(%s) = %s, want %s", in, got, want)
		}
	}
}

// A message naming a member twice (its type, or a member of its data) is malformed:
// which copy counts, JSON does not say.
func TestParseMessageRefusesAMemberNamedTwice(t *testing.T) {
	for body, field := range map[string]string{
		`{"type":"partner.ping","type":"actuals.reported","data":{}}`:                                         "type",
		`{"type":"actuals.reported","data":{"campaign_id":"x","campaign_id":"y","currency":"EUR","days":[]}}`: "data.campaign_id",
	} {
		_, p := ParseMessage([]byte(body))
		if p == nil || len(p.Errors) != 1 || p.Errors[0].Field != field || p.Errors[0].Rule != "duplicate_member" {
			t.Errorf("ParseMessage(%s) = %+v, want 422 %s duplicate_member", body, p, field)
		}
	}
}
