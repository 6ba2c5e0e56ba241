// Package process is the runtime every svc role command starts through: its settings
// (metrics address, Redis, log level, profiling), the JSON logger naming the role, the
// Prometheus registry and its /metrics listener, Redis, and the lifecycle of the roles
// one process runs (role.go). It knows nothing of HTTP serving: the api package's HTTP
// front is one more Role, which main.go adds; this package imports no fasthttp.
package process

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"svc/lib/logs"
	"svc/lib/settings"
)

// Config is what every role process reads besides its roles' own settings.
type Config struct {
	// MetricsAddr serves Prometheus metrics at /metrics (SVC_METRICS_ADDR; "off"
	// disables it).
	MetricsAddr string
	// Redis locates Redis: one server (SVC_REDIS_URL) or a cluster (SVC_REDIS_CLUSTER).
	Redis RedisConfig
	// LogLevel is debug, info, warn or error (SVC_LOG_LEVEL).
	LogLevel string
	// Pprof serves /debug/pprof/ on the metrics listener too (SVC_PPROF).
	Pprof bool
}

// ConfigFromEnv reads the SVC_* variables named on each field.
func ConfigFromEnv(r *settings.Reader) Config {
	return Config{MetricsAddr: r.String("SVC_METRICS_ADDR"), Redis: RedisFromEnv(r),
		LogLevel: r.String("SVC_LOG_LEVEL"), Pprof: r.Bool("SVC_PPROF")}
}

// Validate reports every field that cannot work.
func (c Config) Validate() error {
	var errs []error
	if c.MetricsAddr != "off" {
		if _, _, err := net.SplitHostPort(c.MetricsAddr); err != nil {
			errs = append(errs, fmt.Errorf("SVC_METRICS_ADDR %q: %v", c.MetricsAddr, err))
		}
	}
	if err := c.Redis.Validate(); err != nil {
		errs = append(errs, err)
	}
	if _, err := ParseLevel(c.LogLevel); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// ParseLevel reads SVC_LOG_LEVEL's value.
func ParseLevel(s string) (slog.Level, error) {
	switch strings.ToLower(s) {
	case "debug":
		return slog.LevelDebug, nil
	case "info", "":
		return slog.LevelInfo, nil
	case "warn":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	}
	return 0, fmt.Errorf("SVC_LOG_LEVEL %q: want debug, info, warn or error", s)
}

// Process is what the roles of one process share: its name, settings, logger, metrics
// registry and Redis.
type Process struct {
	// Name is the svc command (ingest, rollup, api, webhooks, dev).
	Name   string
	Config Config
	// Log names the process (role = Name); RoleLog names one of its roles.
	Log      *slog.Logger
	Registry *prometheus.Registry
	// Redis is nil until OpenRedis: a *redis.Client, or a *redis.ClusterClient.
	Redis   redis.UniversalClient
	logBase *slog.Logger // Log without the role
}

// New installs the process's logger naming name (logs.Install) and creates its metrics
// registry. cfg must be valid (Validate).
func New(name string, cfg Config) *Process {
	level, _ := ParseLevel(cfg.LogLevel)
	base := logs.New(level)
	log := base.With(logs.RoleKey, name)
	logs.Install(log)
	return &Process{Name: name, Config: cfg, Log: log, Registry: NewRegistry(), logBase: base}
}

// OpenRedis connects the process to Redis (Config.Redis); Close closes it.
func (p *Process) OpenRedis(ctx context.Context) error {
	rdb, err := OpenRedis(ctx, p.Config.Redis)
	if err != nil {
		return err
	}
	p.Redis = rdb
	return nil
}

// Close releases what the process opened (Redis).
func (p *Process) Close() {
	if p.Redis != nil {
		p.Redis.Close()
	}
}

// RoleLog returns the process's logger naming role instead of the process: `svc dev`
// gives each role its own, so that the lines of its background work say which role
// wrote them.
func (p *Process) RoleLog(role string) *slog.Logger {
	return p.logBase.With(logs.RoleKey, role)
}
