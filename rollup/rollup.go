// Package rollup is the `svc rollup` role: a Kafka consumer group that writes accepted
// event batches into ClickHouse exactly once, in large batches, and the read side of
// the daily pixel rollups (QueryDaily) that GET /pixel-rollups serves.
package rollup

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"svc/lib/chpool"
	"svc/lib/process"
)

// Run consumes until ctx is cancelled (SIGTERM), then flushes, commits and leaves the
// group. It waits for ClickHouse to answer at start. With no SVC_KAFKA_BROKERS it
// connects to the embedded broker's address (SVC_EMBEDDED_KAFKA_ADDR), which another
// process (svc broker, svc ingest, svc dev) runs.
func Run(ctx context.Context, cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	cfg.Log = cfg.log()
	conn, err := openRetry(ctx, cfg)
	if err != nil {
		return err
	}
	defer conn.Close()
	c, err := newConsumer(cfg, conn, cfg.Kafka.ConnectTo(), cfg.testKgoOpts...)
	if err != nil {
		return err
	}
	defer c.rb.close()
	// The rejections' consumer (rejections.go) runs beside, in a group of its own; it
	// stops with the events consumer.
	rctx, stop := context.WithCancel(ctx)
	rdone := make(chan error, 1)
	go func() { rdone <- runRejections(rctx, cfg, conn) }()
	err = c.run(ctx)
	stop()
	return errors.Join(err, <-rdone)
}

// openRetry opens ClickHouse, retrying with backoff until it answers or ctx ends.
func openRetry(ctx context.Context, cfg Config) (driver.Conn, error) {
	d := cfg.RetryMin
	for {
		conn, err := chpool.Open(ctx, cfg.ClickHouse)
		if err == nil {
			return conn, nil
		}
		cfg.Log.Warn("ClickHouse not reachable yet", "err", err.Error(), "retry_in", d.String())
		if !process.Sleep(ctx, d) {
			return nil, errors.Join(ctx.Err(), err)
		}
		d = min(2*d, cfg.RetryMax)
	}
}

// Consumer is the consumer group member of a process: `svc dev` runs it beside the
// HTTP roles, and `svc rollup` alone (main.go puts /healthz, /readyz and /metrics in
// front).
type Consumer struct {
	cfg   Config
	owned *atomic.Int64
}

// New returns the consumer, consuming from seeds and registering its metrics on reg;
// it connects when its role runs. cfg must be valid.
func New(cfg Config, seeds []string, reg prometheus.Registerer, rdb redis.UniversalClient) (*Consumer, error) {
	cfg.FetchMaxBytes = cfg.fetchMaxBytes()
	cfg.Kafka.Brokers = seeds
	cfg.Registerer = reg
	cfg.Redis = rdb
	c := &Consumer{cfg: cfg, owned: new(atomic.Int64)}
	c.cfg.Owned = c.owned
	return c, nil
}

// Role returns the consumer as a process role. Ready: ClickHouse answers and the member
// owns at least one partition.
func (c *Consumer) Role() process.Role {
	return process.Role{
		Name: "rollup",
		Run:  func(ctx context.Context) error { return run(ctx, c.cfg) },
		Checks: []process.Check{{Name: "rollup_consumer", Fn: func(ctx context.Context) error {
			if n := c.owned.Load(); n <= 0 {
				return errors.New("the consumer owns no partition yet")
			}
			conn, err := chpool.Open(ctx, c.cfg.ClickHouse)
			if err != nil {
				return err
			}
			return conn.Close()
		}}},
	}
}

// run is Run, logging how long the consumer ran and how it stopped.
func run(ctx context.Context, cfg Config) error {
	start := time.Now()
	err := Run(ctx, cfg)
	cfg.log().Info("rollup stopped", "after", time.Since(start).Round(time.Millisecond).String(), "err", errString(err))
	return err
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
