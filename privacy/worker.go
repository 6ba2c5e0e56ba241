package privacy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"
	"unicode/utf8"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"svc/lib/chpool"
	"svc/lib/logs"
	"svc/lib/process"
	"svc/schema/erasure"
	"svc/schema/rollups"
)

// Worker runs erasures and raw-event retention for one database. Any number of
// processes may run one: a lease in Redis lets one of them work at a time, which also
// keeps an erasure's rebuild and a retention delete from overlapping.
type Worker struct {
	Config   Config
	Conn     driver.Conn
	Redis    redis.UniversalClient
	Fence    *erasure.Fence
	Registry *erasure.Registry
	// Tables are the rollup tables rebuilt for each erased day (rollups.RollupTables).
	Tables []rollups.RollupTable
	// Completed is called once per erasure when it is done, before it is recorded
	// completed (the webhooks role emits erasure.completed); an error retries it later.
	Completed func(ctx context.Context, e *erasure.Erasure) error
	Log       *slog.Logger
	Now       func() time.Time
	m         *workerMetrics
	tgt       target
	lockKey   string
	retainKey string
}

type workerMetrics struct {
	erasures  prometheus.Counter
	failures  prometheus.Counter
	retention prometheus.Counter
	repairs   prometheus.Counter
}

// NewWorker returns the worker for database cfg.Database (clustered when cfg.Cluster
// is set), registering its metrics on reg (nil: none).
func NewWorker(c Config, conn driver.Conn, rdb redis.UniversalClient, cfg chpool.Config, reg prometheus.Registerer, log *slog.Logger) *Worker {
	m := &workerMetrics{
		erasures: prometheus.NewCounter(prometheus.CounterOpts{Name: "svc_privacy_erasures_completed_total",
			Help: "Erasures completed (stored events erased, rollups rebuilt, erasure.completed emitted)."}),
		failures: prometheus.NewCounter(prometheus.CounterOpts{Name: "svc_privacy_run_failures_total",
			Help: "Failed runs of the privacy worker (each resumed at the next poll)."}),
		retention: prometheus.NewCounter(prometheus.CounterOpts{Name: "svc_privacy_retention_rows_deleted_total",
			Help: "Raw events removed because they were past their workspace's retention."}),
		repairs: prometheus.NewCounter(prometheus.CounterOpts{Name: "svc_privacy_repaired_inserts_total",
			Help: "Consumer INSERTs left unsure (failed, or their consumer died) whose pixel-days' rollups were rebuilt from the events."}),
	}
	if reg != nil {
		reg.MustRegister(m.erasures, m.failures, m.retention, m.repairs)
	}
	p := "svc:privacy:{" + cfg.Database + "}:"
	return &Worker{Config: c, Conn: conn, Redis: rdb, Fence: erasure.NewFence(rdb, cfg.Database), Registry: erasure.NewRegistry(rdb),
		Tables: rollups.RollupTables, Log: log, Now: time.Now, m: m, tgt: target{db: cfg.Database, cluster: cfg.Cluster},
		lockKey: p + "lock", retainKey: p + "retention:due"}
}

// Run works every Config.Poll until ctx is done.
func (w *Worker) Run(ctx context.Context) error {
	process.Every(ctx, w.Config.Poll, w.RunOnce, func(err error) {
		w.m.failures.Inc()
		// The error may hold the server's own text about a statement that carries
		// digests (a syntax error quotes the statement): redacted.
		w.Log.Warn("privacy worker", "err", logs.RedactSQL(err.Error()))
	})
	return nil
}

// RunOnce takes the lease (or returns if another process holds it), runs the oldest
// unfinished erasures (up to Config.Batch) to completion, and removes raw events past
// retention when that is due.
func (w *Worker) RunOnce(ctx context.Context) error {
	ctx, release, ok := w.lock(ctx)
	if !ok {
		return nil
	}
	defer release()
	return errors.Join(w.runErasures(ctx), w.repairInserts(ctx), w.retentionIfDue(ctx))
}

// runErasures runs the oldest unfinished erasures (up to Config.Batch) to completion.
func (w *Worker) runErasures(ctx context.Context) error {
	batch, err := erasure.Unfinished(ctx, w.Conn, w.Config.Batch)
	if err != nil || len(batch) == 0 {
		return err
	}
	if err := w.process(ctx, batch); err != nil {
		w.noteError(ctx, batch, err)
		return err
	}
	return nil
}

// noteError records err on each unfinished erasure of the batch (same stage), so that
// GET /erasures/{id} shows why it is still running; best effort.
func (w *Worker) noteError(ctx context.Context, batch []*erasure.Erasure, err error) {
	msg := lastError(err)
	open := pick(batch, erasure.StageCompleted)
	for _, e := range open {
		e.LastError = msg
	}
	if len(open) > 0 {
		_ = erasure.Write(context.WithoutCancel(ctx), w.Conn, w.Now(), open...)
	}
}

// lastError is what an erasure's record keeps of err (GET /erasures/{id} shows it): the
// server's text may quote a statement, whose literals are the batch's digests, of every
// workspace's erasures in it, so it is redacted as a log line is (logs.RedactSQL), and cut
// to 500 bytes at a character's start.
func lastError(err error) string {
	msg := logs.RedactSQL(err.Error())
	if len(msg) <= 500 {
		return msg
	}
	cut := 500
	for cut > 0 && !utf8.RuneStart(msg[cut]) {
		cut--
	}
	return msg[:cut]
}

// process runs a batch through every stage it has not reached. Each stage is recorded
// before the next begins; each is idempotent, so a run that dies resumes where the
// records say.
func (w *Worker) process(ctx context.Context, batch []*erasure.Erasure) error {
	if err := w.eraseEvents(ctx, pick(batch, erasure.StageErased)); err != nil {
		return err
	}
	if err := w.rebuildRollups(ctx, pick(batch, erasure.StageRecomputed)); err != nil {
		return err
	}
	return w.complete(ctx, pick(batch, erasure.StageCompleted))
}

// pick returns the erasures of batch that have not reached stage.
func pick(batch []*erasure.Erasure, stage string) []*erasure.Erasure {
	var out []*erasure.Erasure
	for _, e := range batch {
		if erasure.StageRank(e.Stage) < erasure.StageRank(stage) {
			out = append(out, e)
		}
	}
	return out
}

// eraseEvents registers the identities with the pipeline, waits until every consumer
// INSERT that may not have seen them has finished, records the affected events and
// days (planned), then clears the identity from the stored events with one mutation
// and verifies that none is left (erased).
func (w *Worker) eraseEvents(ctx context.Context, es []*erasure.Erasure) error {
	if len(es) == 0 {
		return nil
	}
	for _, e := range es {
		if err := w.Registry.Register(ctx, e.Identity()); err != nil {
			return err
		}
	}
	active, err := w.Fence.Active(ctx)
	if err != nil {
		return err
	}
	if err := w.Fence.Drain(ctx, w.Conn, active); err != nil {
		return err
	}
	sc := scope{}
	for _, e := range es {
		sc.add(e)
	}
	mctx, cancel := context.WithTimeout(ctx, w.Config.MutationTimeout)
	defer cancel()
	for first := true; ; first = false {
		total, err := w.plan(mctx, es, sc, first)
		if err != nil {
			return err
		}
		if total == 0 {
			break
		}
		err = w.tgt.mutate(mctx, w.Conn, mutation{table: "events",
			alter:     w.tgt.alter("events") + " UPDATE has_email = 0, email_sha256 = toFixedString('', 32) WHERE " + sc.cond(),
			remaining: "SELECT count() FROM " + w.tgt.table("events") + " WHERE " + sc.cond()}, w.pollEvery(), false)
		if errors.Is(err, errLateRows) {
			w.Log.Warn("privacy: events in scope arrived after the mutation; planning again")
			continue
		}
		if err != nil {
			return err
		}
		break
	}
	for _, e := range es {
		e.Stage, e.EventsRemaining = erasure.StageErased, 0
	}
	return erasure.Write(ctx, w.Conn, w.Now(), es...)
}

// plan counts the stored events in scope and records them and their days on each
// erasure (stage planned), before anything changes: a run that dies later resumes
// with the days to rebuild. first is the first plan of this run; later ones (rows that
// arrived after a mutation) add to the counts.
func (w *Worker) plan(ctx context.Context, es []*erasure.Erasure, sc scope, first bool) (uint64, error) {
	found, total, err := w.affected(ctx, sc)
	if err != nil {
		return 0, err
	}
	now := w.Now()
	for _, e := range es {
		f := found[scopeKey{e.Workspace, e.Sandbox, e.Email}]
		if f == nil {
			f = &affectedRows{}
		}
		switch {
		case e.Stage == erasure.StagePending:
			e.StartedAt, e.EventsAffected = now.UTC().Truncate(time.Second), f.events
		case first:
			e.EventsAffected = max(e.EventsAffected, f.events) // resumed: part may be erased already
		default:
			e.EventsAffected += f.events
		}
		e.AddDays(f.days...)
		e.Stage, e.LastError = erasure.StagePlanned, ""
	}
	return total, erasure.Write(ctx, w.Conn, now, es...)
}

func (w *Worker) pollEvery() time.Duration { return min(w.Config.Poll, 200*time.Millisecond) }

type affectedRows struct {
	events uint64
	days   []erasure.PixelDay
}

// affected counts the stored events in scope per identity and lists their pixel-days.
func (w *Worker) affected(ctx context.Context, sc scope) (map[scopeKey]*affectedRows, uint64, error) {
	q := "SELECT workspace_id, sandbox, email_sha256, pixel_id, event_date, count() FROM " + w.tgt.table("events") +
		" WHERE " + sc.cond() + " GROUP BY workspace_id, sandbox, email_sha256, pixel_id, event_date"
	rows, err := w.Conn.Query(ctx, q)
	if err != nil {
		return nil, 0, fmt.Errorf("privacy: count affected events: %w", err)
	}
	defer rows.Close()
	out := map[scopeKey]*affectedRows{}
	var total uint64
	for rows.Next() {
		var k scopeKey
		var sandbox uint8
		var email string
		var pixel uuid.UUID
		var day time.Time
		var n uint64
		if err := rows.Scan(&k.ws, &sandbox, &email, &pixel, &day, &n); err != nil {
			return nil, 0, err
		}
		k.sandbox = sandbox == 1
		copy(k.email[:], email)
		a := out[k]
		if a == nil {
			a = &affectedRows{}
			out[k] = a
		}
		a.events += n
		total += n
		day = day.UTC()
		a.days = append(a.days, erasure.PixelDay{Pixel: pixel, Date: time.Date(day.Year(), day.Month(), day.Day(), 0, 0, 0, 0, time.UTC)})
	}
	return out, total, rows.Err()
}

// complete announces each erasure (Completed) and records the announced ones completed
// (one INSERT). An erasure whose announcement failed stays recomputed and is announced
// again by the next run (its event id is stable: receivers see one event).
func (w *Worker) complete(ctx context.Context, es []*erasure.Erasure) error {
	var done []*erasure.Erasure
	var failed error
	for _, e := range es {
		e.Stage, e.CompletedAt, e.LastError = erasure.StageCompleted, w.Now().UTC().Truncate(time.Second), ""
		if w.Completed != nil {
			if err := w.Completed(ctx, e); err != nil {
				e.Stage, e.CompletedAt = erasure.StageRecomputed, time.Time{}
				failed = fmt.Errorf("privacy: announce erasure %s: %w", e.ID, err)
				break
			}
		}
		done = append(done, e)
	}
	if len(done) > 0 {
		if err := erasure.Write(ctx, w.Conn, w.Now(), done...); err != nil {
			return err
		}
	}
	for _, e := range done {
		w.m.erasures.Inc()
		w.Log.Info("erasure completed", "erasure_id", e.ID.String(), "events_affected", e.EventsAffected, "days", len(e.Days))
	}
	return failed
}
