package httpserver

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics of the HTTP side, shared by every role in a process.
type Metrics struct {
	Requests *prometheus.CounterVec   // svc_http_requests_total{route,code}
	Duration *prometheus.HistogramVec // svc_http_request_duration_seconds{route}
	// Redis times the hot path's Redis round trips (svc_http_redis_duration_seconds{op}):
	// "gate" (rate limit and Idempotency-Key reservation) and "store" (the idempotent answer).
	Redis *prometheus.HistogramVec
	// RedisGate and RedisStore are Redis's two children, resolved once (hot path).
	RedisGate, RedisStore prometheus.Observer
	// GateBatch is the requests of each gate call (svc_http_gate_batch_requests): how
	// many requests share a reserve_gate call (gatebatch.go).
	GateBatch prometheus.Histogram
	// Conns counts open client connections (svc_http_open_connections). fasthttp serves
	// each connection on a goroutine of its own, so go_goroutines follows it.
	Conns prometheus.Gauge
}

// NewMetrics registers the HTTP metrics on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "svc_http_requests_total",
			Help: "HTTP requests by route (method and path pattern) and response code (problem code, or the status for successes).",
		}, []string{"route", "code"}),
		Duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "svc_http_request_duration_seconds",
			Help:    "Time from reading a request to writing its response, by route.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
		}, []string{"route"}),
		Redis: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "svc_http_redis_duration_seconds",
			Help:    "Time of the Redis round trips a request waits for: gate (rate limit and Idempotency-Key reservation) and store (the idempotent answer).",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1},
		}, []string{"op"}),
		GateBatch: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "svc_http_gate_batch_requests",
			Help:    "Requests gated by one Redis call (rate limits, and on one Redis server the Idempotency-Key reservation): concurrent requests share a call.",
			Buckets: []float64{1, 2, 4, 8, 16, 32},
		}),
		Conns: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "svc_http_open_connections",
			Help: "Open client connections; each holds one serving goroutine.",
		}),
	}
	m.RedisGate, m.RedisStore = m.Redis.WithLabelValues("gate"), m.Redis.WithLabelValues("store")
	reg.MustRegister(m.Requests, m.Duration, m.Redis, m.GateBatch, m.Conns)
	return m
}
