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

	"svc/api"
	"svc/api/keys"
	"svc/lib/process"
	"svc/privacy"
	"svc/schema"
)

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

// Open builds the role (`svc webhooks` and `svc dev`): it connects to ClickHouse per
// cfg.ClickHouse (the role owns that pool and closes it on Close), keeps its schedule in
// rdb, reads keys from ks, runs the privacy worker (erasure.go), and registers its
// metrics on reg. cfg must be valid.
func Open(ctx context.Context, cfg Config, rdb redis.UniversalClient, ks *keys.Store, reg prometheus.Registerer, log *slog.Logger) (*Role, error) {
	conn, err := schema.Open(ctx, cfg.ClickHouse)
	if err != nil {
		return nil, fmt.Errorf("webhooks: %w", err)
	}
	role := New(cfg, rdb, ks, conn, NewMetrics(reg), log)
	role.UsePrivacy(privacy.NewWorker(cfg.Privacy, conn, rdb, cfg.ClickHouse, reg, log))
	return role, nil
}

// New wires the role over Redis, the key store and the ClickHouse conn (which the role
// closes on Close).
func New(cfg Config, rdb redis.UniversalClient, ks *keys.Store, conn driver.Conn, m *Metrics, log *slog.Logger) *Role {
	st := NewStore(rdb, cfg.Prefix)
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
func (r *Role) Routes() []api.Route { return []api.Route{r.Inbound.Route()} }

// Role returns the process role: a ClickHouse readiness check, and the worker, the
// triggers and the inbound log's flushes as its work.
func (r *Role) Role() process.Role {
	return process.Role{
		Name:   "webhooks",
		Checks: []process.Check{{Name: "clickhouse", Fn: func(ctx context.Context) error { return r.conn.Ping(ctx) }}},
		Run: func(ctx context.Context) error {
			errc := make(chan error, 3)
			go func() { errc <- r.Triggers.Run(ctx) }()
			go func() { errc <- r.runPrivacy(ctx) }()
			go func() { errc <- r.Inbound.RunLog(ctx) }()
			err := r.Worker.Run(ctx)
			for range 3 {
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
