package deploy

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestSeriesNames(t *testing.T) {
	cases := map[string][]string{
		`sum by (job) (rate(svc_http_requests_total{code=~"5.."}[5m])) / sum by (job) (rate(svc_http_requests_total[5m])) > 0.01`: {"svc_http_requests_total"},
		`histogram_quantile(0.99, sum by (le) (rate(svc_ingest_produce_duration_seconds_bucket[$__rate_interval])))`:              {"svc_ingest_produce_duration_seconds_bucket"},
		`svc:event_freshness_errors:ratio_rate1h > (14.4 * 0.01) and svc:x:y > 1e3`:                                               {"svc:event_freshness_errors:ratio_rate1h", "svc:x:y"},
		`deriv(sum(svc_rollup_partition_lag)[15m:1m]) > 0`:                                                                        {"svc_rollup_partition_lag"},
		`a / on (instance) group_left(role) b offset 5m`:                                                                          {"a", "b"},
		`up{job=~"svc-.*"} == 0`: {"up"},
	}
	for expr, want := range cases {
		if got := SeriesNames(expr); !reflect.DeepEqual(got, want) {
			t.Errorf("SeriesNames(%q) = %v, want %v", expr, got, want)
		}
	}
}

type ruleFile struct {
	Groups []struct {
		Name     string `yaml:"name"`
		Interval string `yaml:"interval"`
		Rules    []struct {
			Record      string            `yaml:"record"`
			Alert       string            `yaml:"alert"`
			Expr        string            `yaml:"expr"`
			For         string            `yaml:"for"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

// TestAlertRules checks what promtool cannot: the rules name only metrics the roles
// export, every alert issue 8 asks for is there, and each carries a severity and text.
func TestAlertRules(t *testing.T) {
	data, err := os.ReadFile("observability/alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	var rf ruleFile
	if err := DecodeYAMLStrict(data, &rf); err != nil {
		t.Fatalf("alerts.yml: %v", err)
	}
	recorded := map[string]bool{}
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			if r.Record != "" {
				recorded[r.Record] = true
			}
		}
	}
	alerts := map[string]bool{}
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			name := r.Alert + r.Record
			for _, m := range SeriesNames(r.Expr) {
				if !KnownMetric(m) && !recorded[m] {
					t.Errorf("rule %s: unknown metric %q in %q", name, m, r.Expr)
				}
			}
			if r.Alert == "" {
				continue
			}
			alerts[r.Alert] = true
			if s := r.Labels["severity"]; s != "page" && s != "ticket" {
				t.Errorf("alert %s: severity %q, want page or ticket", r.Alert, s)
			}
			if r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
				t.Errorf("alert %s: needs summary and description annotations", r.Alert)
			}
		}
	}
	// One alert at least for each condition issue 8 names.
	for topic, names := range map[string][]string{
		"consumer lag":              {"SvcConsumerLagHigh", "SvcConsumerLagGrowing"},
		"dead letters":              {"SvcDeadLetters"},
		"freshness burn rate":       {"SvcFreshnessBudgetBurnFast", "SvcFreshnessBudgetBurnMedium", "SvcFreshnessBudgetBurnSlow"},
		"5xx rate":                  {"SvcHTTP5xxRateHigh"},
		"producer buffer near full": {"SvcProducerBufferNearFull"},
		"webhook endpoints":         {"SvcWebhookEndpointsDisabled"},
	} {
		for _, n := range names {
			if !alerts[n] {
				t.Errorf("%s: alert %s missing", topic, n)
			}
		}
	}
}

type grafanaPanel struct {
	ID         int                       `json:"id"`
	Type       string                    `json:"type"`
	Title      string                    `json:"title"`
	GridPos    *struct{ H, W, X, Y int } `json:"gridPos"`
	Datasource json.RawMessage           `json:"datasource"`
	Targets    []struct {
		RefID string `json:"refId"`
		Expr  string `json:"expr"`
	} `json:"targets"`
	Panels []grafanaPanel `json:"panels"`
}

// TestDashboard checks the Grafana dashboard: valid JSON, unique panel ids, every panel
// placed and queried, every query naming only exported metrics, and the views issue 8
// lists all present.
func TestDashboard(t *testing.T) {
	files, _ := filepath.Glob("observability/grafana/*.json")
	if len(files) == 0 {
		t.Fatal("no dashboard under observability/grafana")
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var d struct {
			UID    string         `json:"uid"`
			Title  string         `json:"title"`
			Panels []grafanaPanel `json:"panels"`
		}
		if err := json.Unmarshal(data, &d); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if d.UID == "" || d.Title == "" || len(d.Panels) == 0 {
			t.Fatalf("%s: needs uid, title and panels", f)
		}
		ids := map[int]bool{}
		used := map[string]bool{}
		var walk func(ps []grafanaPanel)
		walk = func(ps []grafanaPanel) {
			for _, p := range ps {
				if ids[p.ID] {
					t.Errorf("%s: panel id %d repeated", f, p.ID)
				}
				ids[p.ID] = true
				if p.GridPos == nil || p.GridPos.W == 0 || p.GridPos.H == 0 {
					t.Errorf("%s: panel %q has no size", f, p.Title)
				}
				walk(p.Panels)
				if p.Type == "row" {
					continue
				}
				if len(p.Targets) == 0 {
					t.Errorf("%s: panel %q has no query", f, p.Title)
				}
				for _, tg := range p.Targets {
					if strings.TrimSpace(tg.Expr) == "" {
						t.Errorf("%s: panel %q: empty expression", f, p.Title)
					}
					for _, m := range SeriesNames(tg.Expr) {
						used[strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(m, "_bucket"), "_count"), "_sum")] = true
						if !KnownMetric(m) {
							t.Errorf("%s: panel %q: unknown metric %q in %q", f, p.Title, m, tg.Expr)
						}
					}
				}
			}
		}
		walk(d.Panels)
		if filepath.Base(f) != "svc-pipeline.json" {
			continue
		}
		for view, m := range map[string]string{
			"ingest rate, accepted/rejected": "svc_ingest_events_total",
			"latency p99":                    "svc_http_request_duration_seconds",
			"produce latency":                "svc_ingest_produce_duration_seconds",
			"lag per partition":              "svc_rollup_partition_lag",
			"event age":                      "svc_rollup_event_age_seconds",
			"dead letters":                   "svc_rollup_dead_letters_total",
			"5xx":                            "svc_http_requests_total",
		} {
			if !used[m] {
				t.Errorf("%s: no panel for %s (%s)", f, view, m)
			}
		}
	}
}
