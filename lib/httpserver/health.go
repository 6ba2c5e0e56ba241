package httpserver

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"svc/lib/logs"
	"svc/lib/process"
)

// A check's state in /readyz, the route's whole vocabulary about a dependency.
const (
	CheckOK      = "ok"
	CheckFailing = "failing"
)

// readinessRelog is how often a check that stays failing is logged again.
const readinessRelog = time.Minute

// readiness is GET /readyz over checks (run in order, 2 s for all): 200 {"status":
// "ready", "checks": {name: "ok", …}} when every check passes, else 503 {"status":
// "unavailable", "checks": {…}, "failed": {name: "failing", …}}. The route takes no
// key, so the body names checks and states only; a failing check's error (addresses, a
// server's own words) goes to the process's log, credentials redacted, when the check
// starts failing, then at most once a minute while it stays so, and its recovery once.
func readiness(checks []process.Check) func(*Request) error {
	var noted readinessLog
	return func(r *Request) error {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		states, failed := map[string]string{}, map[string]string{}
		for _, c := range checks {
			err := c.Fn(ctx)
			noted.note(r.srv.log(), c.Name, err)
			states[c.Name] = CheckOK
			if err != nil {
				states[c.Name], failed[c.Name] = CheckFailing, CheckFailing
			}
		}
		if len(failed) > 0 {
			return r.JSON(503, map[string]any{"status": "unavailable", "checks": states, "failed": failed})
		}
		return r.JSON(200, map[string]any{"status": "ready", "checks": states})
	}
}

// readinessLog remembers when each failing check was last logged.
type readinessLog struct {
	mu     sync.Mutex
	failed map[string]time.Time
}

func (l *readinessLog) note(log *slog.Logger, name string, err error) {
	now := time.Now()
	l.mu.Lock()
	last, was := l.failed[name]
	switch {
	case err == nil && was:
		delete(l.failed, name)
	case err != nil && (!was || now.Sub(last) >= readinessRelog):
		if l.failed == nil {
			l.failed = map[string]time.Time{}
		}
		l.failed[name] = now
	default:
		l.mu.Unlock()
		return
	}
	l.mu.Unlock()
	if err != nil {
		log.Warn("readiness check failing", "check", name, "err", logs.RedactCredentials(err.Error()))
	} else {
		log.Info("readiness check passes again", "check", name)
	}
}
