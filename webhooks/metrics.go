package webhooks

import "github.com/prometheus/client_golang/prometheus"

// Metrics of the webhooks role (README.md lists them; deploy/observability uses the
// first two).
type Metrics struct {
	Deliveries *prometheus.CounterVec // svc_webhooks_deliveries_total{outcome}
	Disabled   prometheus.Counter     // svc_webhooks_endpoints_disabled_total
	Inbound    *prometheus.CounterVec // svc_webhooks_inbound_total{outcome}
	// Failures counts the receiver's failed answers by reason (one of failureReasons):
	// the unauthenticated ones are what a flood of forged posts shows up in.
	Failures *prometheus.CounterVec // svc_webhooks_inbound_failures_total{reason}
	// LogDropped counts inbound log rows not written: over the bound of queued rows,
	// or lost with a failed INSERT.
	LogDropped prometheus.Counter   // svc_webhooks_inbound_log_dropped_total
	Latency    prometheus.Histogram // svc_webhooks_delivery_duration_seconds
}

// Reasons of svc_webhooks_inbound_failures_total: a fixed set, so the label's values
// are known in advance (and none carries anything a client sent).
const (
	reasonThrottled   = "throttled"              // 429: the address's failure bucket is empty
	reasonTooLarge    = "payload_too_large"      // 413
	reasonNoWorkspace = "unknown_workspace"      // 404: no such workspace, or not an id
	reasonNoSecret    = "no_secret"              // 401: the workspace has no inbound secret
	reasonSignature   = "invalid_signature"      // 401: missing, malformed or not matching
	reasonStale       = "timestamp_out_of_range" // 401
	reasonMessageID   = "message_id"             // 422: SVC-Webhook-Id missing or malformed
	reasonMalformed   = "malformed"              // 422: the body (signed) fails validation
	reasonInFlight    = "in_flight"              // 409: the same id or content is being processed
	reasonUnavailable = "unavailable"            // 503: Redis or ClickHouse down
)

var failureReasons = []string{reasonThrottled, reasonTooLarge, reasonNoWorkspace, reasonNoSecret, reasonSignature,
	reasonStale, reasonMessageID, reasonMalformed, reasonInFlight, reasonUnavailable}

// NewMetrics registers the metrics on reg (nil: unregistered, for tests).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "svc_webhooks_deliveries_total",
			Help: "Outbound delivery attempts by outcome (delivered, retry, failed, disabled, dropped).",
		}, []string{"outcome"}),
		Disabled: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "svc_webhooks_endpoints_disabled_total",
			Help: "Endpoints disabled by the worker (410 Gone, or failing longer than SVC_WEBHOOKS_DISABLE_AFTER).",
		}),
		Inbound: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "svc_webhooks_inbound_total",
			Help: "Inbound messages answered, by outcome (processed, ignored, failed: every 4xx and 503).",
		}, []string{"outcome"}),
		Failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "svc_webhooks_inbound_failures_total",
			Help: "Inbound messages failed, by reason (throttled, payload_too_large, unknown_workspace, no_secret, invalid_signature, timestamp_out_of_range, message_id, malformed, in_flight, unavailable).",
		}, []string{"reason"}),
		LogDropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "svc_webhooks_inbound_log_dropped_total",
			Help: "Inbound log rows of failed or replayed messages not written (over the queue's bound, or a failed INSERT).",
		}),
		Latency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "svc_webhooks_delivery_duration_seconds",
			Help:    "Time from sending a delivery to its answer's status line (or the failure).",
			Buckets: []float64{.01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 15},
		}),
	}
	for _, r := range failureReasons {
		m.Failures.WithLabelValues(r) // every reason shows, at 0, from the start
	}
	if reg != nil {
		reg.MustRegister(m.Deliveries, m.Disabled, m.Inbound, m.Failures, m.LogDropped, m.Latency)
	}
	return m
}
