package httpserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"svc/lib/apikey"
	"svc/lib/idempotency"
	"svc/lib/limits"
	"svc/lib/process"
	"svc/lib/redisfn"
)

// NewDeps builds the shared stores over rdb, with keys authenticating bearer secrets,
// and registers HTTP metrics on reg.
func NewDeps(cfg Config, rdb redis.UniversalClient, keys apikey.Authenticator, reg prometheus.Registerer, log *slog.Logger) Deps {
	hot := hotPath(cfg, rdb, log)
	idem := idempotency.New(hot)
	idem.PendingTTL = cfg.IdempotencyPendingTTL
	_, cluster := rdb.(*redis.ClusterClient)
	return Deps{Keys: keys, Limits: limits.New(hot), Idem: idem, Metrics: NewMetrics(reg), Log: log, OneServer: !cluster}
}

// BareDeps are the Deps of a front without keys (the rollup consumer's, which serves
// only /healthz and /readyz): HTTP metrics on reg and the logger.
func BareDeps(reg prometheus.Registerer, log *slog.Logger) Deps {
	return Deps{Metrics: NewMetrics(reg), Log: log}
}

// hotPath is the client for the commands every request runs: rdb's auto-pipeliner
// (shared, closed with rdb; full-duplex when cfg.RedisFullDuplex) when
// cfg.RedisAutoPipeline is on, else rdb itself.
func hotPath(cfg Config, rdb redis.UniversalClient, log *slog.Logger) redis.Cmdable {
	if !cfg.RedisAutoPipeline {
		return rdb
	}
	opt := redis.DefaultBlockingAutoPipelineOptions()
	opt.FullDuplex = cfg.RedisFullDuplex
	ap, err := rdb.AutoPipelineWithOptions(opt)
	if err != nil {
		log.Warn("redis auto-pipelining unavailable; one round trip per command", "err", err.Error())
		return rdb
	}
	return redisfn.Client{Cmdable: ap, Base: rdb} // function libraries load through rdb
}

// Front is the HTTP side of one process: the routes of its roles behind the API's
// conventions (one Server), with /healthz and /readyz, on Config.HTTPAddr. main.go
// builds it, gives it each role's routes, and runs it as one more process role.
type Front struct {
	Config Config
	Deps   Deps
	routes []Route
}

// NewFront returns a front serving with cfg over deps.
func NewFront(cfg Config, deps Deps) *Front { return &Front{Config: cfg, Deps: deps} }

// Handle adds routes.
func (f *Front) Handle(routes ...Route) { f.routes = append(f.routes, routes...) }

// Role is the front as a process role: it serves the routes, /healthz, and /readyz
// over checks, until ctx is done; then it drains in-flight requests and returns.
func (f *Front) Role(checks ...process.Check) process.Role {
	return process.Role{Name: "http", Run: func(ctx context.Context) error { return f.Serve(ctx, checks...) }}
}

// Serve is Role's Run.
func (f *Front) Serve(ctx context.Context, checks ...process.Check) error {
	ln, err := Listen(f.Config.HTTPAddr)
	if err != nil {
		return err
	}
	all := append(HealthRoutes(checks...), f.routes...)
	srv := NewServer(f.Config, f.Deps, all)
	srv.log().Info("serving", "addr", ln.Addr().String(), "routes", len(all))
	return srv.Serve(ctx, ln)
}

// HealthRoutes returns GET /healthz (alive: the process serves) and GET /readyz (every
// check passes; 503 naming the failing checks otherwise: readiness, health.go).
func HealthRoutes(checks ...process.Check) []Route {
	return []Route{
		{Method: "GET", Path: "/healthz", Public: true, Summary: "Liveness: the process serves HTTP.",
			Handle: func(r *Request) error { return r.JSON(200, map[string]string{"status": "ok"}) }},
		{Method: "GET", Path: "/readyz", Public: true, Summary: "Readiness: every dependency answers.",
			Handle: readiness(checks)},
	}
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
