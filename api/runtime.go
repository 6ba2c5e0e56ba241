package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"
	"github.com/valyala/fasthttp"

	"svc/api/env"
	"svc/api/idempotency"
	"svc/api/keys"
	"svc/api/limits"
	"svc/api/logs"
)

// NewLogger returns a JSON logger on stderr without a role (logs.New). Nothing secret is
// ever passed to it (keys are logged by id, emails never).
func NewLogger() *slog.Logger { return logs.New() }

// NewDeps builds the shared stores over rdb and registers HTTP metrics on reg.
func NewDeps(cfg Config, rdb redis.UniversalClient, reg prometheus.Registerer, log *slog.Logger) Deps {
	ks := keys.NewStore(rdb)
	ks.CacheTTL = cfg.KeyCacheTTL
	hot := hotPath(cfg, rdb, log)
	idem := idempotency.New(hot)
	idem.PendingTTL = cfg.IdempotencyPendingTTL
	return Deps{Keys: ks, Limits: limits.New(hot), Idem: idem, Metrics: NewMetrics(reg), Log: log}
}

// hotPath is the client for the commands every request runs: rdb's auto-pipeliner
// (shared, closed with rdb) when cfg.RedisAutoPipeline is on, else rdb itself.
func hotPath(cfg Config, rdb redis.UniversalClient, log *slog.Logger) redis.Cmdable {
	if !cfg.RedisAutoPipeline {
		return rdb
	}
	ap, err := rdb.AutoPipeline()
	if err != nil {
		log.Warn("redis auto-pipelining unavailable; one round trip per command", "err", err.Error())
		return rdb
	}
	return ap
}

// NewRegistry returns a registry with the Go and process collectors.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// ServeMetrics serves reg at addr/metrics until ctx is done ("off" disables it).
func ServeMetrics(ctx context.Context, addr string, reg *prometheus.Registry) error {
	if addr == "off" {
		return nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("metrics listener on %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	if os.Getenv("SVC_PPROF") == "1" { // profiling for svc bench; never on by default
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second,
		ErrorLog: logs.StdLog(slog.Default(), slog.LevelWarn)}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = hs.Shutdown(sctx)
	}()
	go func() { _ = hs.Serve(ln) }()
	return nil
}

// Check is one readiness check: nil when the dependency is fit to serve.
type Check struct {
	Name string
	Fn   func(ctx context.Context) error
}

// HealthRoutes returns GET /healthz (alive: the process serves) and GET /readyz (every
// check passes; 503 with the failures otherwise).
func HealthRoutes(checks ...Check) []Route {
	return []Route{
		{Method: "GET", Path: "/healthz", Public: true, Summary: "Liveness: the process serves HTTP.",
			Handle: func(r *Request) error { return r.JSON(200, map[string]string{"status": "ok"}) }},
		{Method: "GET", Path: "/readyz", Public: true, Summary: "Readiness: every dependency answers.",
			Handle: func(r *Request) error {
				ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
				defer cancel()
				failed := map[string]string{}
				for _, c := range checks {
					if err := c.Fn(ctx); err != nil {
						failed[c.Name] = err.Error()
					}
				}
				if len(failed) > 0 {
					return r.JSON(fasthttp.StatusServiceUnavailable, map[string]any{"status": "unavailable", "failed": failed})
				}
				return r.JSON(200, map[string]string{"status": "ready"})
			}},
	}
}

// RedisCheck is a readiness check that pings Redis.
func RedisCheck(rdb redis.UniversalClient) Check {
	return Check{Name: "redis", Fn: func(ctx context.Context) error { return rdb.Ping(ctx).Err() }}
}

// Listen opens the HTTP listener, with a clear error when the address is taken.
func Listen(addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		var oe *net.OpError
		if errors.As(err, &oe) {
			return nil, fmt.Errorf("cannot listen on %s (SVC_HTTP_ADDR): %v", addr, oe.Err)
		}
		return nil, err
	}
	return ln, nil
}

// Process is what every HTTP role of one process shares: configuration, stores,
// metrics registry and logger.
type Process struct {
	Config   Config
	Deps     Deps
	Redis    redis.UniversalClient
	Registry *prometheus.Registry
	// Log names the process's role (the svc command: ingest, api, webhooks, rollup,
	// dev). `svc dev` builds each role on As(role), whose Log names that role.
	Log     *slog.Logger
	logBase *slog.Logger // Log without the role
}

// OpenProcess validates cfg, installs the process logger for role (logs.Install),
// connects to Redis and builds the shared stores.
func OpenProcess(ctx context.Context, role string, cfg Config) (*Process, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	base := NewLogger()
	log := base.With(logs.RoleKey, role)
	logs.Install(log)
	rdb, err := OpenRedis(ctx, cfg.Redis)
	if err != nil {
		return nil, err
	}
	reg := NewRegistry()
	return &Process{Config: cfg, Deps: NewDeps(cfg, rdb, reg, log), Redis: rdb, Registry: reg, Log: log, logBase: base}, nil
}

// NewBareProcess is a Process without Redis, for roles that serve only health and
// metrics (the rollup consumer). It installs the process logger for role.
func NewBareProcess(role string, cfg Config) (*Process, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	base := NewLogger()
	log := base.With(logs.RoleKey, role)
	logs.Install(log)
	reg := NewRegistry()
	return &Process{Config: cfg, Deps: Deps{Metrics: NewMetrics(reg), Log: log}, Registry: reg, Log: log, logBase: base}, nil
}

// RoleLog returns the process's logger naming role instead of the process's own.
func (p *Process) RoleLog(role string) *slog.Logger {
	if p.logBase == nil {
		return p.Log.With(logs.RoleKey, role)
	}
	return p.logBase.With(logs.RoleKey, role)
}

// As returns a copy of p whose Log names role: `svc dev` builds each role on its own
// copy, so that the lines of its background work say which role wrote them. The copy
// shares everything else (Redis, stores, registry); the HTTP server's own lines keep
// the process's role.
func (p *Process) As(role string) *Process {
	q := *p
	q.Log = p.RoleLog(role)
	return &q
}

// Serve serves routes (plus /healthz and /readyz over checks and Redis) on
// Config.HTTPAddr, and metrics on Config.MetricsAddr, until ctx is done; then it drains
// in-flight requests and returns.
func (p *Process) Serve(ctx context.Context, routes []Route, checks ...Check) error {
	ln, err := Listen(p.Config.HTTPAddr)
	if err != nil {
		return err
	}
	if err := ServeMetrics(ctx, p.Config.MetricsAddr, p.Registry); err != nil {
		ln.Close()
		return err
	}
	if p.Redis != nil {
		checks = append([]Check{RedisCheck(p.Redis)}, checks...)
	}
	all := append(HealthRoutes(checks...), routes...)
	srv := NewServer(p.Config, p.Deps, all)
	p.Log.Info("serving", "addr", ln.Addr().String(), "metrics", p.Config.MetricsAddr, "routes", len(all))
	return srv.Serve(ctx, ln)
}

// Role is one role's part of a process: HTTP routes, readiness checks, optional
// background work and an optional close. `svc dev` runs several in one process;
// `svc <role>` runs one.
type Role struct {
	Name   string
	Routes []Route
	Checks []Check
	// Run does background work until ctx is done (consumers, workers); nil if none.
	Run func(ctx context.Context) error
	// Close releases the role after HTTP has drained and Run has returned (flush the
	// producer, commit offsets); nil if nothing to do.
	Close func(ctx context.Context) error
}

// RunRoles serves every role's routes, runs their background work, and on ctx done
// drains HTTP, waits for background work, then closes roles in reverse order.
func (p *Process) RunRoles(ctx context.Context, roles ...Role) error {
	var routes []Route
	var checks []Check
	for _, r := range roles {
		routes = append(routes, r.Routes...)
		checks = append(checks, r.Checks...)
	}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, len(roles))
	running := 0
	for _, r := range roles {
		if r.Run == nil {
			continue
		}
		running++
		go func(r Role) {
			err := r.Run(rctx)
			if err != nil && rctx.Err() == nil {
				p.Log.Error("role stopped", "role", r.Name, "err", err.Error())
				cancel() // a dead role takes the process down rather than serve half
			}
			errc <- err
		}(r)
	}
	serveErr := p.Serve(rctx, routes, checks...)
	cancel()
	var firstErr error
	for ; running > 0; running-- {
		if err := <-errc; err != nil && firstErr == nil && !errors.Is(err, context.Canceled) {
			firstErr = err
		}
	}
	p.CloseRoles(roles)
	if serveErr != nil {
		return serveErr
	}
	return firstErr
}

// CloseRoles closes roles in reverse order (bounded by 30 s in all), logging failures.
func (p *Process) CloseRoles(roles []Role) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := len(roles) - 1; i >= 0; i-- {
		if roles[i].Close == nil {
			continue
		}
		if err := roles[i].Close(ctx); err != nil {
			p.Log.Error("role close incomplete", "role", roles[i].Name, "err", err.Error())
		}
	}
}

// Main runs one process of roles: the HTTP configuration from SVC_*, the process logger
// naming role, Redis and the shared stores, then the roles build returns, until ctx is
// done (`svc ingest`, `svc api`, `svc webhooks`, `svc dev`). Roles close in reverse
// order, so a role listed first (an embedded broker) outlives those after it. When build
// fails it returns the roles it built so far, and Main closes them.
func Main(ctx context.Context, role string, build func(ctx context.Context, p *Process) ([]Role, error)) error {
	r := env.New()
	cfg := ConfigFromEnv(r)
	if err := r.Err(); err != nil {
		return err
	}
	p, err := OpenProcess(ctx, role, cfg)
	if err != nil {
		return err
	}
	defer p.Redis.Close()
	roles, err := build(ctx, p)
	if err != nil {
		p.CloseRoles(roles) // what was built before the failure
		return err
	}
	return p.RunRoles(ctx, roles...)
}
