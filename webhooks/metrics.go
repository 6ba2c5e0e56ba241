package webhooks

import "github.com/prometheus/client_golang/prometheus"

// Metrics of the webhooks role (README.md lists them; deploy/observability uses the
// first two).
type Metrics struct {
	Deliveries *prometheus.CounterVec // svc_webhooks_deliveries_total{outcome}
	Disabled   prometheus.Counter     // svc_webhooks_endpoints_disabled_total
	Inbound    *prometheus.CounterVec // svc_webhooks_inbound_total{outcome}
	Latency    prometheus.Histogram   // svc_webhooks_delivery_duration_seconds
}

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
			Help: "Inbound messages by outcome (processed, ignored, failed).",
		}, []string{"outcome"}),
		Latency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "svc_webhooks_delivery_duration_seconds",
			Help:    "Time from sending a delivery to its answer's status line (or the failure).",
			Buckets: []float64{.01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 15},
		}),
	}
	if reg != nil {
		reg.MustRegister(m.Deliveries, m.Disabled, m.Inbound, m.Latency)
	}
	return m
}
