package ingest

import (
	"context"
	"time"

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
	serveErr := p.Serve(ctx, edge.Routes(), edge.Ready())
	fctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := edge.Close(fctx); err != nil {
		p.Log.Error("producer flush incomplete", "err", err.Error())
	}
	return serveErr
}
