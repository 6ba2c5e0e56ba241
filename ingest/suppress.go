package ingest

import (
	"context"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"svc/schema/erasure"
)

// Suppression (privacy/README.md): an erasure requested with "suppress": true makes
// the edge drop that identity from every later event of the workspace, before the
// batch is encoded, so it never reaches Kafka. The list is held in memory and reloaded
// when the registry's generation moves (checked every suppressionRefresh), so the
// request path makes no Redis call for it. Within that second of staleness the
// consumer catches what the edge let through (rollup/erase.go).

// suppressionRefresh is how often the edge checks for a new suppression list.
const suppressionRefresh = time.Second

// UseSuppression makes the edge drop suppressed identities, from the registry in rdb.
func (e *Edge) UseSuppression(rdb redis.UniversalClient, reg prometheus.Registerer) {
	e.suppress = erasure.NewRegistry(rdb)
	e.suppressed = prometheus.NewCounter(prometheus.CounterOpts{Name: "svc_ingest_suppressed_identities_total",
		Help: "Identities dropped at the edge because an erasure of the workspace suppresses them."})
	reg.MustRegister(e.suppressed)
}

// runSuppression keeps the suppression list fresh until ctx ends.
func (e *Edge) runSuppression(ctx context.Context) error {
	if e.suppress == nil {
		<-ctx.Done()
		return nil
	}
	e.suppress.Run(ctx, suppressionRefresh, func(err error) { slog.Warn("ingest: suppression list not refreshed", "err", err.Error()) })
	return nil
}

// dropSuppressed clears the identity of every event of b that workspace ws suppresses.
func (e *Edge) dropSuppressed(ws uuid.UUID, b *Batch) {
	if e.suppress == nil {
		return
	}
	set := e.suppress.Current()
	if set.Len() == 0 {
		return
	}
	for i := range b.Events {
		ev := &b.Events[i]
		if ev.HasEmail && set.Suppressed(ws, ev.EmailSHA) {
			ev.HasEmail, ev.EmailSHA = false, [32]byte{}
			e.suppressed.Inc()
		}
	}
}
