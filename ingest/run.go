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
	producer, err := NewProducer(bc, seeds, cfg)
	if err != nil {
		return nil, err
	}
	return NewEdge(cfg, producer, p.Deps.Keys, p.Registry), nil
}

// Main runs `svc ingest`: the edge alone (with an embedded broker when
// SVC_KAFKA_BROKERS is empty). On SIGTERM it stops accepting, drains in-flight
// requests, then flushes the producer so every 202 it gave is in Kafka.
func Main(ctx context.Context, _ []string) error {
	r := env.New()
	acfg, bcfg, icfg := api.ConfigFromEnv(r), broker.FromEnv(r), ConfigFromEnv(r)
	if err := r.Err(); err != nil {
		return err
	}
	p, err := api.OpenProcess(ctx, acfg)
	if err != nil {
		return err
	}
	defer p.Redis.Close()
	seeds, stopBroker, err := broker.Seeds(bcfg)
	if err != nil {
		return err
	}
	defer stopBroker()
	edge, err := Start(p, bcfg, seeds, icfg)
	if err != nil {
		return err
	}
	return p.RunRoles(ctx, edge.Role())
}

// Role returns the edge as a process role: POST /events, the producer check, and a
// close that flushes the producer.
func (e *Edge) Role() api.Role {
	return api.Role{Name: "ingest", Routes: e.Routes(), Checks: []api.Check{e.Ready()}, Close: e.Close}
}
