package main

import (
	"slices"
	"strings"
	"testing"

	"svc/lib/settings"
)

// The table's "read by" is what each command really reads: every command `svc config`
// can check reads exactly the settings that name it.
func TestSettingsReadByMatchesCommands(t *testing.T) {
	for name, check := range checkers {
		r := settings.Defaults()
		if err := check(r); err != nil {
			t.Errorf("svc %s: the defaults do not validate: %v", name, err)
		}
		if err := r.Err(); err != nil {
			t.Errorf("svc %s: %v", name, err)
		}
		read := r.Read()
		for _, s := range settings.Table {
			if got, want := slices.Contains(read, s.Name), slices.Contains(s.ReadBy, name); got != want {
				t.Errorf("svc %s reads %s: %v; the table says %v", name, s.Name, got, want)
			}
		}
	}
}

// svc config COMMAND prints what the command reads, masked, and reports every bad
// setting at once.
func TestConfigReportsEveryBadSettingAtOnce(t *testing.T) {
	t.Setenv("SVC_HTTP_ADDR", "nowhere")
	t.Setenv("SVC_LOG_LEVEL", "loud")
	t.Setenv("SVC_ROLLUP_BATCH_ROWS", "1")
	t.Setenv("SVC_WEBHOOKS_POLL", "often")
	t.Setenv("SVC_CLICKHOUSE_PASSWORD", "hunter2")
	t.Setenv("SVC_REDIS_URL", "redis://svc:hunter3@127.0.0.1:6379/0")
	var out strings.Builder
	err := printConfig([]string{"dev"}, &out)
	for _, name := range []string{"SVC_HTTP_ADDR", "SVC_LOG_LEVEL", "SVC_ROLLUP_BATCH_ROWS", "SVC_WEBHOOKS_POLL"} {
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("the error does not name %s: %v", name, err)
		}
	}
	if strings.Contains(out.String(), "hunter") || !strings.Contains(out.String(), "SVC_ROLLUP_BATCH_ROWS=1\t# set") {
		t.Fatalf("printed:\n%s", out.String())
	}
}

// A Redis URL that does not parse (a password holding an unencoded '/') is neither
// printed nor quoted in the error with its password.
func TestConfigNeverShowsAPasswordOfABadURL(t *testing.T) {
	// Passwords holding an unencoded '/' or '@': one that does not parse as a URL, one
	// that parses with the password's start as a port, one that parses as another user.
	for _, c := range []struct{ url, secret string }{
		{"redis://svc:hun/ter4@127.0.0.1:6379/0", "ter4"},
		{"redis://svc:1234/ter4@127.0.0.1:6379/0", "ter4"},
		{"redis://u:p@ss/w@127.0.0.1:6379/0", "ss/w"},
	} {
		t.Setenv("SVC_REDIS_URL", c.url)
		var out strings.Builder
		err := printConfig([]string{"dev"}, &out)
		if err == nil || !strings.Contains(err.Error(), "SVC_REDIS_URL") {
			t.Fatalf("%s: the error does not name SVC_REDIS_URL: %v", c.url, err)
		}
		for what, text := range map[string]string{"printed": out.String(), "error": err.Error()} {
			if strings.Contains(text, c.secret) {
				t.Fatalf("%s: %s shows the password:\n%s", c.url, what, text)
			}
		}
	}
}

// svc config broker checks what svc broker checks: the broker's own embedded address,
// also where SVC_KAFKA_BROKERS (its peers' setting) is set.
func TestConfigBrokerChecksAsTheBrokerDoes(t *testing.T) {
	t.Setenv("SVC_KAFKA_BROKERS", "kafka-1:9092")
	t.Setenv("SVC_EMBEDDED_KAFKA_ADDR", "bad")
	var out strings.Builder
	if err := printConfig([]string{"broker"}, &out); err == nil || !strings.Contains(err.Error(), "SVC_EMBEDDED_KAFKA_ADDR") {
		t.Fatalf("svc config broker with a bad embedded address: %v", err)
	}
}

// TestConfigRefusesOutOfRange: each documented bound of a setting is checked where the
// role starts (svc config runs the same checks): one value past it, alone, is an error
// naming the setting. SVC_KEY_CACHE_TTL's bound is what keeps "a revocation applies
// within a second" true.
func TestConfigRefusesOutOfRange(t *testing.T) {
	for name, value := range map[string]string{
		"SVC_KEY_CACHE_TTL":           "2s",
		"SVC_API_CACHE_TTL":           "11s",
		"SVC_API_QUERY_THREADS":       "65",
		"SVC_CLICKHOUSE_MAX_CONNS":    "0",
		"SVC_MAX_BODY_BYTES":          "10",
		"SVC_IDEMPOTENCY_PENDING_TTL": "10ms",
		"SVC_GATE_CALLS_IN_FLIGHT":    "-1",
		"SVC_MAX_CONNS_PER_IP":        "-1",
	} {
		t.Run(name, func(t *testing.T) {
			t.Setenv(name, value)
			var out strings.Builder
			if err := printConfig([]string{"dev"}, &out); err == nil || !strings.Contains(err.Error(), name) {
				t.Fatalf("%s=%s: %v", name, value, err)
			}
		})
	}
}
