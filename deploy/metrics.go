package deploy

// Metrics is the set of metric names the roles export (their Prometheus names, without
// the _bucket/_sum/_count suffixes of histograms). Alert rules and the dashboard may
// name only these; the tests in this package check that they do.
var Metrics = map[string]string{
	"svc_http_requests_total":               "counter{route,code}",
	"svc_http_request_duration_seconds":     "histogram{route}",
	"svc_ingest_events_total":               "counter{outcome=accepted|rejected,reason}",
	"svc_ingest_produce_duration_seconds":   "histogram",
	"svc_ingest_producer_buffered_records":  "gauge",
	"svc_ingest_producer_buffer_capacity":   "gauge",
	"svc_rollup_partition_lag":              "gauge{partition}",
	"svc_rollup_dead_letters_total":         "counter{reason}",
	"svc_rollup_rows_inserted_total":        "counter",
	"svc_rollup_event_age_seconds":          "histogram",
	"svc_rollup_insert_errors_total":        "counter",
	"svc_webhooks_endpoints_disabled_total": "counter",
	"svc_webhooks_deliveries_total":         "counter{outcome}",
}

// Histograms lists the members of Metrics that are histograms: their series carry the
// _bucket, _sum and _count suffixes.
var Histograms = map[string]bool{
	"svc_http_request_duration_seconds":   true,
	"svc_ingest_produce_duration_seconds": true,
	"svc_rollup_event_age_seconds":        true,
}

// KnownMetric reports whether name (a series name as written in a PromQL expression)
// is one of Metrics, or a histogram's _bucket/_sum/_count series, or Prometheus's own
// scrape series "up".
func KnownMetric(name string) bool {
	if name == "up" {
		return true
	}
	if _, ok := Metrics[name]; ok {
		return true
	}
	for _, suf := range []string{"_bucket", "_sum", "_count"} {
		if n := len(name) - len(suf); n > 0 && name[n:] == suf && Histograms[name[:n]] {
			return true
		}
	}
	return false
}
