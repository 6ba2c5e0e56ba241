// Package webhooks is the webhooks role: the signed inbound receiver
// (POST /webhooks/inbound/{workspace}) and the outbound delivery worker with its
// triggers (rollup.day_closed, key.expiring). README.md describes the data flow, the
// payloads and the signature scheme.
package webhooks

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"svc/lib/chpool"
	"svc/lib/httpserver"
	"svc/lib/process"
	"svc/schema/workspace"
)

// Role is the webhooks role's parts, wired together.
type Role struct {
	Inbound  *Inbound
	Worker   *Worker
	Triggers *Triggers
	Emitter  *Emitter
	conn     driver.Conn
}

// New builds the role (`svc webhooks` and `svc dev`): it connects to ClickHouse per
// cfg.ClickHouse (the role owns that pool and closes it on Close), keeps its schedule in
// rdb, reads keys from ks, and registers its
// metrics on reg. cfg must be valid.
func New(ctx context.Context, cfg Config, rdb redis.UniversalClient, ks *workspace.Store, reg prometheus.Registerer, log *slog.Logger) (*Role, error) {
	conn, err := chpool.Open(ctx, cfg.ClickHouse)
	if err != nil {
		return nil, fmt.Errorf("webhooks: %w", err)
	}
	return Assemble(cfg, rdb, ks, conn, NewMetrics(reg), log), nil
}

// Assemble wires the role over Redis, the key store and the ClickHouse conn (which the role
// closes on Close).
func Assemble(cfg Config, rdb redis.UniversalClient, ks *workspace.Store, conn driver.Conn, m *Metrics, log *slog.Logger) *Role {
	st := NewStore(rdb, cfg.Prefix)
	st.Egress = cfg.Egress()
	logs := NewLogs(conn)
	em := &Emitter{Store: st, Logs: logs, Log: log, Delay: cfg.Schedule[0]}
	return &Role{
		Inbound: &Inbound{Config: cfg, Store: st, Logs: logs, Keys: ks, Actuals: NewActualsStore(conn),
			Metrics: m, Log: log, Now: time.Now},
		Worker:   NewWorker(cfg, st, logs, m, log),
		Triggers: &Triggers{Config: cfg, Emitter: em, Keys: ks, Conn: conn, Log: log, Now: time.Now},
		Emitter:  em,
		conn:     conn,
	}
}

// Routes returns the receiver's route.
func (r *Role) Routes() []httpserver.Route { return []httpserver.Route{r.Inbound.Route()} }

// Role returns the process role: a ClickHouse readiness check, and the worker, the
// triggers and the inbound log's flushes as its work.
func (r *Role) Role() process.Role {
	return process.Role{
		Name:   "webhooks",
		Checks: []process.Check{{Name: "clickhouse", Fn: func(ctx context.Context) error { return r.conn.Ping(ctx) }}},
		Run: func(ctx context.Context) error {
			errc := make(chan error, 2)
			go func() { errc <- r.Triggers.Run(ctx) }()
			go func() { errc <- r.Inbound.RunLog(ctx) }()
			err := r.Worker.Run(ctx)
			for range 2 {
				if terr := <-errc; err == nil {
					err = terr
				}
			}
			return err
		},
		Close: func(ctx context.Context) error {
			// After the HTTP front drained: the last requests' queued log rows.
			return errors.Join(r.Inbound.FlushLog(ctx), r.conn.Close())
		},
	}
}
