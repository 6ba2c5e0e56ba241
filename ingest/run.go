package ingest

import (
	"context"

	"svc/api"
	"svc/api/env"
	"svc/schema/broker"
)

// Start builds the edge on a process's shared parts, producing to seeds.
func Start(p *api.Process, bc broker.Config, seeds []string, cfg Config) (*Edge, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Log == nil {
		cfg.Log = p.Log
	}
	producer, err := NewProducer(bc, seeds, cfg)
	if err != nil {
		return nil, err
	}
	e := NewEdge(cfg, producer, p.Deps.Keys, p.Registry)
	e.UseLogger(p.Log)
	if p.Redis != nil {
		e.UseSuppression(p.Redis, p.Registry)
	}
	return e, nil
}

// Main runs `svc ingest`: the edge alone (with an embedded broker when
// SVC_KAFKA_BROKERS is empty). On SIGTERM it stops accepting, drains in-flight
// requests, then flushes the producer so every 202 it gave is in Kafka.
func Main(ctx context.Context, _ []string) error {
	return api.Main(ctx, "ingest", func(ctx context.Context, p *api.Process) ([]api.Role, error) {
		r := env.New()
		bcfg, icfg := broker.FromEnv(r), ConfigFromEnv(r)
		if err := r.Err(); err != nil {
			return nil, err
		}
		bcfg.Log = p.RoleLog("broker")
		seeds, brk, err := broker.Role(bcfg)
		if err != nil {
			return nil, err
		}
		edge, err := Start(p, bcfg, seeds, icfg)
		if err != nil {
			return []api.Role{brk}, err
		}
		return []api.Role{brk, edge.Role()}, nil
	})
}

// Role returns the edge as a process role: POST /events, the producer check, and a
// close that flushes the producer.
func (e *Edge) Role() api.Role {
	return api.Role{Name: "ingest", Routes: e.Routes(), Checks: []api.Check{e.Ready()}, Run: e.runSuppression, Close: e.Close}
}
