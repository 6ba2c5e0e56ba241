// Package webhooks is the webhooks role: the signed inbound receiver
// (POST /webhooks/inbound/{workspace}) and the outbound delivery worker with its
// triggers (rollup.day_closed, key.expiring). README.md describes the data flow, the
// payloads and the signature scheme.
package webhooks

import (
	"context"
	"fmt"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"svc/api"
	"svc/lib/settings"
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
	r := settings.New()
	cfg, ccfg := ConfigFromEnv(r), schema.FromEnv(r)
	if err := r.Err(); err != nil {
		return api.Role{}, err
	}
	if err := cfg.Validate(); err != nil {
		return api.Role{}, err
	}
	if err := ccfg.Validate(); err != nil {
		return api.Role{}, err
	}
	conn, err := schema.Open(ctx, ccfg)
	if err != nil {
		return api.Role{}, fmt.Errorf("webhooks: %w", err)
	}
	return New(cfg, p, conn, NewMetrics(p.Registry)).Role(), nil
}

// Role is the webhooks role's parts, wired together.
type Role struct {
	Inbound  *Inbound
	Worker   *Worker
	Triggers *Triggers
	Emitter  *Emitter
	conn     driver.Conn
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
			errc := make(chan error, 1)
			go func() { errc <- r.Triggers.Run(ctx) }()
			err := r.Worker.Run(ctx)
			if terr := <-errc; err == nil {
				err = terr
			}
			return err
		},
		Close: func(context.Context) error { return r.conn.Close() },
	}
}
