package privacy

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"svc/lib/chpool"
	"svc/lib/process"
)

// New builds the privacy role (run by `svc webhooks` and `svc dev`; main.go sets
// Completed to the webhooks role's erasure.completed emitter): it connects to
// ClickHouse per cfg.ClickHouse (closed by the role's Close), keeps its lease, fence and
// registry in rdb, and registers its metrics on reg. cfg must be valid.
func New(ctx context.Context, cfg Config, rdb redis.UniversalClient, reg prometheus.Registerer, log *slog.Logger) (*Worker, error) {
	conn, err := chpool.Open(ctx, cfg.ClickHouse)
	if err != nil {
		return nil, fmt.Errorf("privacy: %w", err)
	}
	return NewWorker(cfg, conn, rdb, cfg.ClickHouse, reg, log), nil
}

// Role returns the process role: the worker's loop, and its ClickHouse pool closed on
// Close.
func (w *Worker) Role() process.Role {
	return process.Role{
		Name:  "privacy",
		Run:   w.Run,
		Close: func(context.Context) error { return w.Conn.Close() },
	}
}
