// Package webhooks is the webhooks role: the signed inbound receiver
// (POST /webhooks/inbound/{workspace}) and the outbound delivery worker with its
// triggers (rollup.day_closed, key.expiring). README.md describes the data flow, the
// payloads and the signature scheme.
package webhooks

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"svc/api"
	"svc/api/env"
	"svc/privacy"
	"svc/schema"
)

// Main runs `svc webhooks`: the receiver on SVC_HTTP_ADDR and the worker.
func Main(ctx context.Context, _ []string) error {
	return api.Main(ctx, "webhooks", func(ctx context.Context, p *api.Process) ([]api.Role, error) {
		role, err := FromEnv(ctx, p)
		return []api.Role{role}, err
	})
}

// FromEnv builds the role from SVC_WEBHOOKS_* and SVC_CLICKHOUSE_* for process p
// (`svc webhooks` and `svc dev`).
func FromEnv(ctx context.Context, p *api.Process) (api.Role, error) {
	r := env.New()
	cfg, ccfg, pcfg := ConfigFromEnv(r), schema.FromEnv(r), privacy.ConfigFromEnv(r)
	if err := r.Err(); err != nil {
		return api.Role{}, err
	}
	if err := errors.Join(cfg.Validate(), pcfg.Validate()); err != nil {
		return api.Role{}, err
	}
	if err := ccfg.Validate(); err != nil {
		return api.Role{}, err
	}
	conn, err := schema.Open(ctx, ccfg)
	if err != nil {
		return api.Role{}, fmt.Errorf("webhooks: %w", err)
	}
	role := New(cfg, p, conn, NewMetrics(p.Registry))
	role.UsePrivacy(privacy.NewWorker(pcfg, conn, p.Redis, ccfg, p.Registry, p.Log))
	return role.Role(), nil
}

// Role is the webhooks role's parts, wired together.
type Role struct {
	Inbound  *Inbound
	Worker   *Worker
	Triggers *Triggers
	Emitter  *Emitter
	// Privacy runs erasures and raw-event retention (erasure.go); nil: not here.
	Privacy *privacy.Worker
	conn    driver.Conn
}

// New wires the role over p's Redis and key store and the ClickHouse conn (which the
// role closes on Close).
func New(cfg Config, p *api.Process, conn driver.Conn, m *Metrics) *Role {
	st := NewStore(p.Redis, cfg.Prefix)
	logs := NewLogs(conn)
	em := &Emitter{Store: st, Logs: logs, Log: p.Log, Delay: cfg.Schedule[0]}
	return &Role{
		Inbound: &Inbound{Config: cfg, Store: st, Logs: logs, Keys: p.Deps.Keys, Actuals: NewActualsStore(conn),
			Metrics: m, Log: p.Log, Now: time.Now},
		Worker:   NewWorker(cfg, st, logs, m, p.Log),
		Triggers: &Triggers{Config: cfg, Emitter: em, Keys: p.Deps.Keys, Conn: conn, Log: p.Log, Now: time.Now},
		Emitter:  em,
		conn:     conn,
	}
}

// Role returns the process role: the receiver route, a ClickHouse readiness check, and
// the worker and triggers as background work.
func (r *Role) Role() api.Role {
	return api.Role{
		Name:   "webhooks",
		Routes: []api.Route{r.Inbound.Route()},
		Checks: []api.Check{{Name: "clickhouse", Fn: func(ctx context.Context) error { return r.conn.Ping(ctx) }}},
		Run: func(ctx context.Context) error {
			errc := make(chan error, 2)
			go func() { errc <- r.Triggers.Run(ctx) }()
			go func() { errc <- r.runPrivacy(ctx) }()
			err := r.Worker.Run(ctx)
			for range 2 {
				if terr := <-errc; err == nil {
					err = terr
				}
			}
			return err
		},
		Close: func(context.Context) error { return r.conn.Close() },
	}
}
