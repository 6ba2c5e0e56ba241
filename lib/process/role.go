package process

import (
	"context"
	"errors"
	"time"
)

// Check is one readiness check: nil when the dependency is fit to serve.
type Check struct {
	Name string
	Fn   func(ctx context.Context) error
}

// Role is one role's part of a process: readiness checks, optional background work and
// an optional close. A role's HTTP routes are not here: main.go gives them to the HTTP
// front (httpserver.Front), itself a Role. `svc dev` runs every role in one process; `svc
// <role>` runs one.
type Role struct {
	Name   string
	Checks []Check
	// Run does its work until ctx is done (consumers, workers, the HTTP front); nil if
	// none.
	Run func(ctx context.Context) error
	// Close releases the role after every Run has returned (flush the producer, close a
	// pool); nil if nothing to do.
	Close func(ctx context.Context) error
}

// Checks returns the readiness checks of every role, in order.
func Checks(roles []Role) []Check {
	var out []Check
	for _, r := range roles {
		out = append(out, r.Checks...)
	}
	return out
}

// Run serves metrics and runs every role's work until ctx is done, or until one of them
// fails (a dead role takes the process down rather than serve half); then it waits for
// every Run to return and closes the roles in reverse order, so a role listed first (an
// embedded broker) outlives those after it. It returns the first failure.
func (p *Process) Run(ctx context.Context, roles ...Role) error {
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if err := ServeMetrics(rctx, p.Config.MetricsAddr, p.Registry, p.Config.Pprof); err != nil {
		p.CloseRoles(roles)
		return err
	}
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
				cancel()
			}
			errc <- err
		}(r)
	}
	var first error
	for ; running > 0; running-- {
		if err := <-errc; err != nil && first == nil && !errors.Is(err, context.Canceled) {
			first = err
		}
	}
	p.CloseRoles(roles)
	return first
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
