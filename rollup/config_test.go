package rollup

import (
	"strings"
	"testing"
	"time"

	"svc/lib/settings"
)

func TestConfigFromEnvAndValidate(t *testing.T) {
	vars := map[string]string{}
	r := &settings.Reader{Lookup: func(k string) (string, bool) { v, ok := vars[k]; return v, ok }}
	cfg := ConfigFromEnv(r)
	if err := r.Err(); err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("defaults invalid: %v", err)
	}
	if cfg.Group != "svc-rollup" || cfg.BatchRows != 200000 || cfg.BatchInterval != time.Second ||
		cfg.EventIDWindow != DefaultEventIDWindow || (Config{}).eventIDWindow() != DefaultEventIDWindow {
		t.Fatalf("defaults: %+v", cfg)
	}
	for name, c := range map[string]struct{ k, v, want string }{
		"rows low":  {"SVC_ROLLUP_BATCH_ROWS", "999", "SVC_ROLLUP_BATCH_ROWS"},
		"rows high": {"SVC_ROLLUP_BATCH_ROWS", "1000001", "SVC_ROLLUP_BATCH_ROWS"},
		"interval":  {"SVC_ROLLUP_BATCH_INTERVAL", "5ms", "SVC_ROLLUP_BATCH_INTERVAL"},
		"retry":     {"SVC_ROLLUP_RETRY_MAX", "1ms", "SVC_ROLLUP_RETRY_MIN"},
		"group":     {"SVC_ROLLUP_GROUP", " ", ""},
		"db":        {"SVC_CLICKHOUSE_DB", "bad-name", "SVC_CLICKHOUSE_DB"},
		"addr":      {"SVC_CLICKHOUSE_ADDR", "nohostport", "SVC_CLICKHOUSE_ADDR"},
		"window":    {"SVC_EVENT_ID_WINDOW", "169h", "SVC_EVENT_ID_WINDOW"},
		"window ms": {"SVC_EVENT_ID_WINDOW", "1500ms", "SVC_EVENT_ID_WINDOW"},
		"window 3s": {"SVC_EVENT_ID_WINDOW", "3s", ""},
	} {
		vars = map[string]string{c.k: c.v}
		cfg := ConfigFromEnv(r)
		err := cfg.Validate()
		if c.want == "" {
			if err != nil {
				t.Errorf("%s: %v", name, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error naming %s", name, err, c.want)
		}
	}
}
