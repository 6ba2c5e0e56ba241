package ingest

import (
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"svc/lib/kafkabroker"
	"svc/lib/process"
	"svc/schema/workspace"
)

// New builds the edge producing to seeds (Kafka per bc), checking keys and pixels in ks,
// dropping suppressed identities listed in rdb (nil: none), with its metrics on reg and
// its lines on log. main.go serves its Routes behind the
// HTTP front and runs its Role: on SIGTERM the front stops accepting and drains
// in-flight requests, then Close flushes the producer so every 202 it gave is in Kafka.
func New(cfg Config, bc kafkabroker.Config, seeds []string, ks *workspace.Store, rdb redis.UniversalClient, reg prometheus.Registerer, log *slog.Logger) (*Edge, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Log == nil {
		cfg.Log = log
	}
	producer, err := NewProducer(bc, seeds, cfg)
	if err != nil {
		return nil, err
	}
	e := NewEdge(cfg, producer, ks, reg)
	if rdb != nil {
		e.UseSuppression(rdb, reg)
	}
	return e, nil
}

// Role returns the edge as a process role: the producer check, the suppression list's
// refresh as its work, and a close that flushes the producer.
func (e *Edge) Role() process.Role {
	return process.Role{Name: "ingest", Checks: []process.Check{e.Ready()}, Run: e.runSuppression, Close: e.Close}
}
