package rollup

import (
	"context"
	"errors"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"svc/lib/process"
	"svc/schema/rejection"
)

// runRejections runs the rejections' consumer (rejections.go) and the table's
// retention beside the events consumer of Run, until ctx ends.
func runRejections(ctx context.Context, cfg Config, conn driver.Conn) error {
	c, err := newRejConsumer(cfg, conn, cfg.Kafka.ConnectTo(), cfg.testKgoOpts...)
	if err != nil {
		return err
	}
	defer c.rb.close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		process.Every(ctx, rejectionRetentionScan, func(ctx context.Context) error { return rejectionRetention(ctx, cfg, conn) },
			func(err error) {
				c.log.Warn("rejections retention failed; retried at the next scan", "err", err.Error())
			})
	}()
	err = c.run(ctx)
	<-done
	return err
}

// rejectionRetentionScan is how often a process looks whether the retention is due;
// rejectionRetentionEvery how often it runs across the processes (a claim in Redis).
const (
	rejectionRetentionScan  = 5 * time.Minute
	rejectionRetentionEvery = time.Hour
	rejectionRetentionClaim = "svc:rollup:rejections-retention"
)

// rejectionRetention drops the days of the rejections table whose rows are all older
// than cfg.RejectionRetention (schema/rejection: DROP PARTITION, ClickHouse 18.16 has no
// TTL), at most once an hour across the processes when Redis is configured. A row is
// kept at least the retention and a day (rejection.FirstKeptDay), at most two days longer.
func rejectionRetention(ctx context.Context, cfg Config, conn driver.Conn) error {
	if cfg.RejectionRetention <= 0 {
		return nil
	}
	if cfg.Redis != nil {
		ok, err := cfg.Redis.SetNX(ctx, rejectionRetentionClaim, "1", rejectionRetentionEvery).Result()
		if err != nil || !ok {
			return err
		}
	}
	cut := rejection.FirstKeptDay(time.Now(), cfg.RejectionRetention)
	days, err := rejection.DropBefore(ctx, conn, cfg.ClickHouse, cut)
	if err != nil {
		if cfg.Redis != nil {
			_ = cfg.Redis.Del(context.WithoutCancel(ctx), rejectionRetentionClaim).Err() // due again at the next scan
		}
		return errors.Join(errors.New("rejections retention"), err)
	}
	if len(days) > 0 {
		cfg.log().Info("rejections retention: days dropped", "days", days, "kept_from", cut.Format(time.DateOnly))
	}
	return nil
}
