package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"strconv"

	"svc/api"
	"svc/api/docs"
	"svc/api/mcp"
	"svc/app"
	"svc/ingest"
	"svc/lib/httpserver"
	"svc/lib/kafkabroker"
	"svc/lib/logs"
	"svc/lib/process"
	"svc/lib/settings"
	"svc/privacy"
	"svc/rollup"
	"svc/schema"
	"svc/schema/workspace"
	"svc/webhooks"
)

// A roleSet is what one role command reads from the environment (all of it through one
// settings.Reader, so every bad setting is reported at once) and how it assembles its
// roles on a process and its HTTP front.
type roleSet interface {
	base() *processSettings
	validate() error
	build(ctx context.Context, p *process.Process, front *httpserver.Front, ks *workspace.Store) ([]process.Role, error)
}

// roleSets reads each role command's settings.
var roleSets = map[string]func(r *settings.Reader) roleSet{
	"dev": func(r *settings.Reader) roleSet {
		s := &devSet{processSettings: readProcess(r), Broker: kafkabroker.ConfigFromEnv(r), Ingest: ingest.ConfigFromEnv(r),
			Webhooks: webhooks.ConfigFromEnv(r), Privacy: privacy.ConfigFromEnv(r), Read: api.ConfigFromEnv(r),
			Rollup: rollup.ConfigFromEnv(r), App: app.ConfigFromEnv(r)}
		s.App.PublicURL = s.HTTP.PublicURL
		return s
	},
	"ingest": func(r *settings.Reader) roleSet {
		return &ingestSet{processSettings: readProcess(r), Broker: kafkabroker.ConfigFromEnv(r), Ingest: ingest.ConfigFromEnv(r)}
	},
	"rollup": func(r *settings.Reader) roleSet {
		s := &rollupSet{processSettings: readProcess(r), Rollup: rollup.ConfigFromEnv(r)}
		s.bareFront = true
		return s
	},
	"api": func(r *settings.Reader) roleSet {
		return &apiSet{processSettings: readProcess(r), Read: api.ConfigFromEnv(r)}
	},
	"webhooks": func(r *settings.Reader) roleSet {
		return &webhooksSet{processSettings: readProcess(r), Webhooks: webhooks.ConfigFromEnv(r), Privacy: privacy.ConfigFromEnv(r)}
	},
	"app": func(r *settings.Reader) roleSet {
		s := &appSet{processSettings: readProcess(r), App: app.ConfigFromEnv(r)}
		s.App.PublicURL = s.HTTP.PublicURL
		return s
	},
}

// processSettings are what every role command reads: the process's and its HTTP
// front's.
type processSettings struct {
	Process process.Config
	HTTP    httpserver.Config
	// bareFront serves only /healthz and /readyz without API keys or a Redis check (the
	// rollup consumer's front).
	bareFront bool
}

func readProcess(r *settings.Reader) processSettings {
	return processSettings{Process: process.ConfigFromEnv(r), HTTP: httpserver.ConfigFromEnv(r)}
}

func (s *processSettings) base() *processSettings { return s }

func (s *processSettings) validateBase() error {
	return errors.Join(s.Process.Validate(), s.HTTP.Validate())
}

// roleCommand runs role command name: its settings, read and checked at once; the
// process (logger naming name, metrics, Redis); the roles its set builds; and the HTTP
// front serving their routes, /healthz and /readyz over their checks. When building
// fails, the roles built so far are closed.
func roleCommand(name string) func(ctx context.Context, args []string) error {
	return func(ctx context.Context, args []string) error {
		if len(args) > 0 {
			return fmt.Errorf("unexpected arguments %q (svc %s is configured by SVC_* variables only)", args, name)
		}
		r := settings.New()
		set := roleSets[name](r)
		if err := errors.Join(r.Err(), set.validate()); err != nil {
			return err
		}
		b := set.base()
		p := process.New(name, b.Process)
		if err := p.OpenRedis(ctx); err != nil {
			return err
		}
		defer p.Close()
		front, ks, checks := newFront(b, p)
		roles, err := set.build(ctx, p, front, ks)
		if err != nil {
			p.CloseRoles(roles)
			return err
		}
		roles = append(roles, front.Role(append(checks, process.Checks(roles)...)...))
		return p.Run(ctx, roles...)
	}
}

// newFront is the HTTP front of role set b on p, the workspace store its keys are
// authenticated against (the roles share it), and the readiness checks of its own:
// Redis's; a bare front has no keys, no store and no check.
func newFront(b *processSettings, p *process.Process) (*httpserver.Front, *workspace.Store, []process.Check) {
	if b.bareFront {
		return httpserver.NewFront(b.HTTP, httpserver.BareDeps(p.Registry, p.Log)), nil, nil
	}
	ks := workspace.NewStore(p.Redis)
	ks.CacheTTL = b.HTTP.KeyCacheTTL
	deps := httpserver.NewDeps(b.HTTP, p.Redis, ks, p.Registry, p.Log)
	return httpserver.NewFront(b.HTTP, deps), ks, []process.Check{process.RedisCheck(p.Redis)}
}

// ingestSet is `svc ingest`: the edge, with an embedded broker when SVC_KAFKA_BROKERS
// is empty.
type ingestSet struct {
	processSettings
	Broker kafkabroker.Config
	Ingest ingest.Config
}

func (s *ingestSet) validate() error {
	return errors.Join(s.validateBase(), s.Broker.Validate(), s.Ingest.Validate())
}

func (s *ingestSet) build(_ context.Context, p *process.Process, front *httpserver.Front, ks *workspace.Store) ([]process.Role, error) {
	s.Broker.Log = p.RoleLog("broker")
	seeds, brk, err := kafkabroker.Role(s.Broker, schema.Topics...)
	if err != nil {
		return nil, err
	}
	edge, err := ingest.New(s.Ingest, s.Broker, seeds, ks, p.Redis, p.Registry, p.Log)
	if err != nil {
		return []process.Role{brk}, err
	}
	front.Handle(edge.Routes()...)
	return []process.Role{brk, edge.Role()}, nil
}

// rollupSet is `svc rollup`: the consumer, consuming from SVC_KAFKA_BROKERS or the
// embedded broker another process runs.
type rollupSet struct {
	processSettings
	Rollup rollup.Config
}

func (s *rollupSet) validate() error { return errors.Join(s.validateBase(), s.Rollup.Validate()) }

func (s *rollupSet) build(_ context.Context, p *process.Process, _ *httpserver.Front, _ *workspace.Store) ([]process.Role, error) {
	s.Rollup.Log = p.Log
	c, err := rollup.New(s.Rollup, s.Rollup.Kafka.ConnectTo(), p.Registry, p.Redis)
	if err != nil {
		return nil, err
	}
	return []process.Role{c.Role()}, nil
}

// apiSet is `svc api`: the read API with the self-description and the MCP endpoint.
type apiSet struct {
	processSettings
	Read api.Config
}

func (s *apiSet) validate() error { return errors.Join(s.validateBase(), s.Read.Validate()) }

func (s *apiSet) build(ctx context.Context, p *process.Process, front *httpserver.Front, ks *workspace.Store) ([]process.Role, error) {
	rd, err := api.New(ctx, s.Read, ks, p.Log)
	if err != nil {
		return nil, err
	}
	front.Handle(rd.Routes()...)
	front.Handle(docs.Routes()...)
	front.Handle(mcp.New().Routes()...) // its tools answer through the read API's routes
	return []process.Role{rd.Role()}, nil
}

// webhooksSet is `svc webhooks`: the receiver and the delivery worker, and the privacy
// worker (erasures and raw-event retention), whose completed erasures it announces.
type webhooksSet struct {
	processSettings
	Webhooks webhooks.Config
	Privacy  privacy.Config
}

func (s *webhooksSet) validate() error {
	return errors.Join(s.validateBase(), s.Webhooks.Validate(), s.Privacy.Validate())
}

func (s *webhooksSet) build(ctx context.Context, p *process.Process, front *httpserver.Front, ks *workspace.Store) ([]process.Role, error) {
	wh, err := webhooks.New(ctx, s.Webhooks, p.Redis, ks, p.Registry, p.Log)
	if err != nil {
		return nil, err
	}
	front.Handle(wh.Routes()...)
	pw, err := newPrivacy(ctx, s.Privacy, p, wh, p.Log)
	if err != nil {
		return []process.Role{wh.Role()}, err
	}
	return []process.Role{wh.Role(), pw.Role()}, nil
}

// newPrivacy is the privacy role of p, announcing completed erasures through wh.
func newPrivacy(ctx context.Context, c privacy.Config, p *process.Process, wh *webhooks.Role, log *slog.Logger) (*privacy.Worker, error) {
	pw, err := privacy.New(ctx, c, p.Redis, p.Registry, log)
	if err != nil {
		return nil, err
	}
	pw.Completed = wh.Emitter.EmitErasureCompleted
	return pw, nil
}

// appSet is `svc app`: the application's pages under /app.
type appSet struct {
	processSettings
	App app.Config
}

func (s *appSet) validate() error { return errors.Join(s.validateBase(), s.App.Validate()) }

func (s *appSet) build(ctx context.Context, p *process.Process, front *httpserver.Front, ks *workspace.Store) ([]process.Role, error) {
	a, err := app.New(ctx, s.App, ks, p.Redis, p.Log)
	if err != nil {
		return nil, err
	}
	front.Handle(a.Routes()...)
	return []process.Role{a.Role()}, nil
}

// devSet is `svc dev`: every role in one process behind SVC_HTTP_ADDR, routing by path
// as a production load balancer would, with an embedded broker unless SVC_KAFKA_BROKERS
// is set. Each role logs under its own name; the HTTP front's lines say dev.
type devSet struct {
	processSettings
	Broker   kafkabroker.Config
	Ingest   ingest.Config
	Webhooks webhooks.Config
	Privacy  privacy.Config
	Read     api.Config
	Rollup   rollup.Config
	App      app.Config
}

func (s *devSet) validate() error {
	return errors.Join(s.validateBase(), s.Broker.Validate(), s.Ingest.Validate(), s.Webhooks.Validate(),
		s.Privacy.Validate(), s.Read.Validate(), s.Rollup.Validate(), s.App.Validate())
}

// build starts the broker first (it closes last), then the edge, webhooks, the read API
// with docs and MCP, the application, and the rollup consumer.
func (s *devSet) build(ctx context.Context, p *process.Process, front *httpserver.Front, ks *workspace.Store) ([]process.Role, error) {
	runtime.GOMAXPROCS(devProcs(os.Getenv("GOMAXPROCS"), runtime.GOMAXPROCS(0)))
	s.Broker.Log, s.Rollup.Log = p.RoleLog("broker"), p.RoleLog("rollup")
	seeds, brk, err := kafkabroker.Role(s.Broker, schema.Topics...)
	if err != nil {
		return nil, err
	}
	roles := []process.Role{brk}
	edge, err := ingest.New(s.Ingest, s.Broker, seeds, ks, p.Redis, p.Registry, p.RoleLog("ingest"))
	if err != nil {
		return roles, err
	}
	roles = append(roles, edge.Role())
	wh, err := webhooks.New(ctx, s.Webhooks, p.Redis, ks, p.Registry, p.RoleLog("webhooks"))
	if err != nil {
		return roles, err
	}
	roles = append(roles, wh.Role())
	pw, err := newPrivacy(ctx, s.Privacy, p, wh, p.RoleLog("privacy"))
	if err != nil {
		return roles, err
	}
	roles = append(roles, pw.Role())
	rd, err := api.New(ctx, s.Read, ks, p.RoleLog("api"))
	if err != nil {
		return roles, err
	}
	roles = append(roles, rd.Role())
	ap, err := app.New(ctx, s.App, ks, p.Redis, p.RoleLog("app"))
	if err != nil {
		return roles, err
	}
	roles = append(roles, ap.Role())
	for _, routes := range [][]httpserver.Route{edge.Routes(), wh.Routes(), rd.Routes(), docs.Routes(), mcp.New().Routes(), ap.Routes()} {
		front.Handle(routes...)
	}
	c, err := rollup.New(s.Rollup, seeds, p.Registry, p.Redis)
	if err != nil {
		return roles, err
	}
	return append(roles, c.Role()), nil
}

// brokerSettings are what `svc broker` reads.
type brokerSettings struct {
	LogLevel string
	Broker   kafkabroker.Config
}

func readBroker(r *settings.Reader) brokerSettings {
	return brokerSettings{LogLevel: r.String("SVC_LOG_LEVEL"), Broker: kafkabroker.ConfigFromEnv(r)}
}

func (s brokerSettings) validate() error {
	_, err := process.ParseLevel(s.LogLevel)
	return errors.Join(err, s.Broker.Validate())
}

// readBrokerRole reads the broker's settings as `svc broker` runs it: this process is
// the broker, whatever SVC_KAFKA_BROKERS says (its peers' setting), so its own embedded
// address is the one checked.
func readBrokerRole(r *settings.Reader) brokerSettings {
	s := readBroker(r)
	s.Broker.Brokers = nil
	return s
}

// brokerMain runs the embedded broker alone, for several processes to share.
func brokerMain(ctx context.Context, args []string) error {
	if len(args) > 0 {
		return fmt.Errorf("unexpected arguments %q (svc broker is configured by SVC_* variables only)", args)
	}
	r := settings.New()
	s := readBrokerRole(r)
	if err := errors.Join(r.Err(), s.validate()); err != nil {
		return err
	}
	level, _ := process.ParseLevel(s.LogLevel)
	log := logs.New(level).With(logs.RoleKey, "broker")
	logs.Install(log)
	s.Broker.Log = log
	b, err := kafkabroker.StartEmbedded(s.Broker, schema.Topics...)
	if err != nil {
		return err
	}
	log.Info("listening", "addrs", b.Addrs())
	<-ctx.Done()
	b.Close()
	log.Info("stopped")
	return nil
}

// devProcs is svc dev's GOMAXPROCS: env's when set, else twice Go's default (procs). One
// Go scheduler runs the edge's short handlers beside the consumer's and the broker's
// bursts of work (a flush encodes a second's rows at once), and it has no priorities: a
// handler waits for a P up to a 10 ms time slice. With more Ps than cores the operating
// system's scheduler interleaves them, as it does separate processes (an edge and
// `svc rollup`): at 200k events/s with event ids p99 8.2–8.4 ms against 9.4–10.7, at 500k
// 79 against 95–389, for about 3–6% more of svc's CPU (bench/HISTORY.md, stop 46).
func devProcs(env string, procs int) int {
	if n, err := strconv.Atoi(env); err == nil && n > 0 {
		return n
	}
	return 2 * procs
}
