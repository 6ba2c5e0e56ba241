package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"svc/lib/chpool"
	"svc/lib/settings"
	"svc/schema/workspace"
)

// Config is the read API role's configuration (`svc api`, and in `svc dev`).
type Config struct {
	// QueryTimeout bounds each ClickHouse query of a request (SVC_API_QUERY_TIMEOUT).
	QueryTimeout time.Duration
	// QueryThreads is ClickHouse's max_threads for the API's queries
	// (SVC_API_QUERY_THREADS, 1..64).
	QueryThreads int
	// CacheTTL is how long a list page stays fresh in the page cache
	// (SVC_API_CACHE_TTL; 0 turns the cache off, at most 10s).
	CacheTTL time.Duration
	// ClickHouse is where the catalog and the rollups are (SVC_CLICKHOUSE_*).
	ClickHouse chpool.Config
}

// ConfigFromEnv reads the SVC_* variables named on each field.
func ConfigFromEnv(r *settings.Reader) Config {
	return Config{QueryTimeout: r.Duration("SVC_API_QUERY_TIMEOUT"), QueryThreads: r.Int("SVC_API_QUERY_THREADS"),
		CacheTTL: r.Duration("SVC_API_CACHE_TTL"), ClickHouse: chpool.ConfigFromEnv(r)}
}

// Validate reports every field that cannot work, all at once.
func (c Config) Validate() error {
	var errs []error
	if c.QueryTimeout <= 0 {
		errs = append(errs, fmt.Errorf("SVC_API_QUERY_TIMEOUT %s: must be positive", c.QueryTimeout))
	}
	if c.QueryThreads < 1 || c.QueryThreads > 64 {
		errs = append(errs, fmt.Errorf("SVC_API_QUERY_THREADS %d: want 1..64", c.QueryThreads))
	}
	if c.CacheTTL < 0 || c.CacheTTL > 10*time.Second {
		errs = append(errs, fmt.Errorf("SVC_API_CACHE_TTL %s: want 0 (off) to 10s", c.CacheTTL))
	}
	return errors.Join(append(errs, c.ClickHouse.Validate())...)
}

// New connects to ClickHouse and returns the read API over it and the key store ks
// (the API owns the pool: its Role closes it). cfg must be valid.
func New(ctx context.Context, cfg Config, ks *workspace.Store, log *slog.Logger) (*API, error) {
	conn, err := chpool.Open(ctx, cfg.ClickHouse)
	if err != nil {
		return nil, fmt.Errorf("api: %w", err)
	}
	a := &API{Conn: conn, Keys: ks, Log: log, QueryTimeout: cfg.QueryTimeout, QueryThreads: cfg.QueryThreads,
		Database: cfg.ClickHouse.Database}
	if cfg.CacheTTL > 0 {
		a.Cache = NewCache(cfg.CacheTTL, 64<<20)
	}
	return a, nil
}
