package privacy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"svc/lib/settings"
	"svc/schema"
)

// Config of the privacy worker (SVC_PRIVACY_*).
type Config struct {
	// Poll is how often the worker looks for erasures to run (SVC_PRIVACY_POLL, 2s).
	Poll time.Duration
	// Batch is the most erasures run together, with one mutation of events and one
	// rebuild per rollup table (SVC_PRIVACY_BATCH, 100).
	Batch int
	// MutationTimeout bounds the wait for one mutation; past it the run fails and the
	// next one resumes (SVC_PRIVACY_MUTATION_TIMEOUT, 1h).
	MutationTimeout time.Duration
	// HoldLease is how long pixels stay held while their rollups are rebuilt; the
	// worker extends it before inserting (SVC_PRIVACY_HOLD_LEASE, 5m).
	HoldLease time.Duration
	// RetentionInterval is how often raw events past their workspace's retention are
	// removed (SVC_PRIVACY_RETENTION_INTERVAL, 1h).
	RetentionInterval time.Duration
	// KeepIdentities is how long an identity erased without suppression stays in the
	// pipeline's list (events received before the request may still be in Kafka, which
	// keeps records 7 days) (SVC_PRIVACY_KEEP_IDENTITIES, 192h).
	KeepIdentities time.Duration
}

// ConfigFromEnv reads the SVC_PRIVACY_* variables.
func ConfigFromEnv(r *settings.Reader) Config {
	return Config{
		Poll:              r.Duration("SVC_PRIVACY_POLL"),
		Batch:             r.Int("SVC_PRIVACY_BATCH"),
		MutationTimeout:   r.Duration("SVC_PRIVACY_MUTATION_TIMEOUT"),
		HoldLease:         r.Duration("SVC_PRIVACY_HOLD_LEASE"),
		RetentionInterval: r.Duration("SVC_PRIVACY_RETENTION_INTERVAL"),
		KeepIdentities:    r.Duration("SVC_PRIVACY_KEEP_IDENTITIES"),
	}
}

// Validate reports a configuration that cannot work.
func (c Config) Validate() error {
	var errs []error
	if c.Poll < 10*time.Millisecond || c.Poll > time.Hour {
		errs = append(errs, fmt.Errorf("SVC_PRIVACY_POLL %v: want 10ms..1h", c.Poll))
	}
	if c.Batch < 1 || c.Batch > 1000 {
		errs = append(errs, fmt.Errorf("SVC_PRIVACY_BATCH %d: want 1..1000", c.Batch))
	}
	if c.MutationTimeout < time.Second {
		errs = append(errs, fmt.Errorf("SVC_PRIVACY_MUTATION_TIMEOUT %v: want at least 1s", c.MutationTimeout))
	}
	if c.HoldLease < 10*time.Second {
		errs = append(errs, fmt.Errorf("SVC_PRIVACY_HOLD_LEASE %v: want at least 10s", c.HoldLease))
	}
	if c.RetentionInterval < time.Second {
		errs = append(errs, fmt.Errorf("SVC_PRIVACY_RETENTION_INTERVAL %v: want at least 1s", c.RetentionInterval))
	}
	if c.KeepIdentities < 7*24*time.Hour {
		errs = append(errs, fmt.Errorf("SVC_PRIVACY_KEEP_IDENTITIES %v: want at least 168h (Kafka's retention)", c.KeepIdentities))
	}
	return errors.Join(errs...)
}

// Worker runs erasures and raw-event retention for one database. Any number of
// processes may run one: a lease in Redis lets one of them work at a time, which also
// keeps an erasure's rebuild and a retention delete from overlapping.
type Worker struct {
	Config   Config
	Conn     driver.Conn
	Redis    redis.UniversalClient
	Fence    *Fence
	Registry *Registry
	// Tables are the rollup tables rebuilt for each erased day (schema.RollupTables).
	Tables []schema.RollupTable
	// Completed is called once per erasure when it is done, before it is recorded
	// completed (the webhooks role emits erasure.completed); an error retries it later.
	Completed func(ctx context.Context, e *Erasure) error
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
}

// NewWorker returns the worker for database cfg.Database (clustered when cfg.Cluster
// is set), registering its metrics on reg (nil: none).
func NewWorker(c Config, conn driver.Conn, rdb redis.UniversalClient, cfg schema.Config, reg prometheus.Registerer, log *slog.Logger) *Worker {
	m := &workerMetrics{
		erasures: prometheus.NewCounter(prometheus.CounterOpts{Name: "svc_privacy_erasures_completed_total",
			Help: "Erasures completed (stored events erased, rollups rebuilt, erasure.completed emitted)."}),
		failures: prometheus.NewCounter(prometheus.CounterOpts{Name: "svc_privacy_run_failures_total",
			Help: "Failed runs of the privacy worker (each resumed at the next poll)."}),
		retention: prometheus.NewCounter(prometheus.CounterOpts{Name: "svc_privacy_retention_rows_deleted_total",
			Help: "Raw events removed because they were past their workspace's retention."}),
	}
	if reg != nil {
		reg.MustRegister(m.erasures, m.failures, m.retention)
	}
	p := "svc:privacy:{" + cfg.Database + "}:"
	return &Worker{Config: c, Conn: conn, Redis: rdb, Fence: NewFence(rdb, cfg.Database), Registry: NewRegistry(rdb),
		Tables: schema.RollupTables, Log: log, Now: time.Now, m: m, tgt: target{db: cfg.Database, cluster: cfg.Cluster},
		lockKey: p + "lock", retainKey: p + "retention:due"}
}

// Run works every Config.Poll until ctx is done.
func (w *Worker) Run(ctx context.Context) error {
	t := time.NewTicker(w.Config.Poll)
	defer t.Stop()
	for {
		if err := w.RunOnce(ctx); err != nil && ctx.Err() == nil {
			w.m.failures.Inc()
			w.Log.Warn("privacy worker", "err", err.Error())
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
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
	return errors.Join(w.runErasures(ctx), w.retentionIfDue(ctx))
}

// runErasures runs the oldest unfinished erasures (up to Config.Batch) to completion.
func (w *Worker) runErasures(ctx context.Context) error {
	batch, err := Unfinished(ctx, w.Conn, w.Config.Batch)
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
func (w *Worker) noteError(ctx context.Context, batch []*Erasure, err error) {
	msg := err.Error()
	if len(msg) > 500 {
		msg = msg[:500]
	}
	open := pick(batch, StageCompleted)
	for _, e := range open {
		e.LastError = msg
	}
	if len(open) > 0 {
		_ = Write(context.WithoutCancel(ctx), w.Conn, w.Now(), open...)
	}
}

// process runs a batch through every stage it has not reached. Each stage is recorded
// before the next begins; each is idempotent, so a run that dies resumes where the
// records say.
func (w *Worker) process(ctx context.Context, batch []*Erasure) error {
	if err := w.eraseEvents(ctx, pick(batch, StageErased)); err != nil {
		return err
	}
	if err := w.rebuildRollups(ctx, pick(batch, StageRecomputed)); err != nil {
		return err
	}
	return w.complete(ctx, pick(batch, StageCompleted))
}

// pick returns the erasures of batch that have not reached stage.
func pick(batch []*Erasure, stage string) []*Erasure {
	var out []*Erasure
	for _, e := range batch {
		if stageRank[e.Stage] < stageRank[stage] {
			out = append(out, e)
		}
	}
	return out
}

// eraseEvents registers the identities with the pipeline, waits until every consumer
// INSERT that may not have seen them has finished, records the affected events and
// days (planned), then clears the identity from the stored events with one mutation
// and verifies that none is left (erased).
func (w *Worker) eraseEvents(ctx context.Context, es []*Erasure) error {
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
		e.Stage, e.EventsRemaining = StageErased, 0
	}
	return Write(ctx, w.Conn, w.Now(), es...)
}

// plan counts the stored events in scope and records them and their days on each
// erasure (stage planned), before anything changes: a run that dies later resumes
// with the days to rebuild. first is the first plan of this run; later ones (rows that
// arrived after a mutation) add to the counts.
func (w *Worker) plan(ctx context.Context, es []*Erasure, sc scope, first bool) (uint64, error) {
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
		case e.Stage == StagePending:
			e.StartedAt, e.EventsAffected = now.UTC().Truncate(time.Second), f.events
		case first:
			e.EventsAffected = max(e.EventsAffected, f.events) // resumed: part may be erased already
		default:
			e.EventsAffected += f.events
		}
		e.addDays(f.days...)
		e.Stage, e.LastError = StagePlanned, ""
	}
	return total, Write(ctx, w.Conn, now, es...)
}

func (w *Worker) pollEvery() time.Duration { return min(w.Config.Poll, 200*time.Millisecond) }

type affectedRows struct {
	events uint64
	days   []PixelDay
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
		a.days = append(a.days, PixelDay{Pixel: pixel, Date: time.Date(day.Year(), day.Month(), day.Day(), 0, 0, 0, 0, time.UTC)})
	}
	return out, total, rows.Err()
}

// rebuildRollups rebuilds every rollup table's rows of the erasures' recorded days
// from the (erased) events, then records them recomputed.
func (w *Worker) rebuildRollups(ctx context.Context, es []*Erasure) error {
	if len(es) == 0 {
		return nil
	}
	seen := map[slice]bool{}
	var ss []slice
	for _, e := range es {
		for _, d := range e.Days {
			s := slice{e.Workspace, e.Sandbox, d.Pixel, d.Date}
			if !seen[s] {
				seen[s] = true
				ss = append(ss, s)
			}
		}
	}
	if len(ss) > 0 {
		if err := w.rebuild(ctx, ss); err != nil {
			return err
		}
	}
	for _, e := range es {
		e.Stage, e.LastError = StageRecomputed, ""
	}
	return Write(ctx, w.Conn, w.Now(), es...)
}

// rebuild replaces the rows of slices in every rollup table with rows aggregated
// afresh from events.
//
// The race with the consumer: a rollup row of a slice comes from the materialized
// view of the INSERT that carried its events. Deleting a slice's rows and inserting
// them again from events is exact only if no INSERT of that pixel lands in between
// (its rows would be counted twice, or lost if it landed before the delete but after
// the read). So the pixels are held first (Fence.Hold): a consumer INSERT that
// registers after the hold sees it and waits; the ones registered before are drained.
// With no INSERT of these pixels possible, the delete and the re-insert are exact. The
// hold is a lease: before inserting, the worker extends it, and if it had lapsed (a
// stalled delete) it starts over, since rows may have arrived meanwhile.
func (w *Worker) rebuild(ctx context.Context, ss []slice) error {
	pixels := distinctPixels(ss)
	start := time.Now()
	defer func() {
		_ = w.Fence.Release(context.WithoutCancel(ctx), pixels)
		w.Log.Info("rollups rebuilt", "pixel_days", len(ss), "pixels", len(pixels), "held_ms", time.Since(start).Milliseconds())
	}()
	for {
		active, err := w.Fence.Hold(ctx, pixels, w.Config.HoldLease)
		if err != nil {
			return err
		}
		if err := w.Fence.Drain(ctx, w.Conn, active); err != nil {
			return err
		}
		if err := w.deleteSlices(ctx, ss); err != nil {
			return err
		}
		held, err := w.Fence.Extend(ctx, pixels, w.Config.HoldLease)
		if err != nil {
			return err
		}
		if !held {
			w.Log.Warn("privacy: a hold lapsed while deleting rollup rows; deleting again", "pixels", len(pixels))
			continue
		}
		return w.insertSlices(ctx, ss)
	}
}

func (w *Worker) deleteSlices(ctx context.Context, ss []slice) error {
	mctx, cancel := context.WithTimeout(ctx, w.Config.MutationTimeout)
	defer cancel()
	for _, t := range w.Tables {
		cond := slicesCond(ss, t.Day)
		if err := w.tgt.mutate(mctx, w.Conn, mutation{table: t.Name, alter: w.tgt.alter(t.Name) + " DELETE WHERE " + cond,
			remaining: "SELECT count() FROM " + w.tgt.table(t.Name) + " WHERE " + cond}, w.pollEvery(), true); err != nil {
			return err
		}
	}
	return nil
}

func (w *Worker) insertSlices(ctx context.Context, ss []slice) error {
	ictx := clickhouse.Context(ctx, clickhouse.WithSettings(clickhouse.Settings{"insert_distributed_sync": 1}))
	for _, t := range w.Tables {
		q := t.RebuildSQL(w.tgt.db, slicesCond(ss, "event_date"))
		if err := w.Conn.Exec(ictx, q); err != nil {
			return fmt.Errorf("privacy: rebuild %s: %w", t.Name, err)
		}
	}
	return nil
}

func distinctPixels(ss []slice) []uuid.UUID {
	seen := map[uuid.UUID]bool{}
	var out []uuid.UUID
	for _, s := range ss {
		if !seen[s.pixel] {
			seen[s.pixel] = true
			out = append(out, s.pixel)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}

// complete announces each erasure (Completed) and records the announced ones completed
// (one INSERT). An erasure whose announcement failed stays recomputed and is announced
// again by the next run (its event id is stable: receivers see one event).
func (w *Worker) complete(ctx context.Context, es []*Erasure) error {
	var done []*Erasure
	var failed error
	for _, e := range es {
		e.Stage, e.CompletedAt, e.LastError = StageCompleted, w.Now().UTC().Truncate(time.Second), ""
		if w.Completed != nil {
			if err := w.Completed(ctx, e); err != nil {
				e.Stage, e.CompletedAt = StageRecomputed, time.Time{}
				failed = fmt.Errorf("privacy: announce erasure %s: %w", e.ID, err)
				break
			}
		}
		done = append(done, e)
	}
	if len(done) > 0 {
		if err := Write(ctx, w.Conn, w.Now(), done...); err != nil {
			return err
		}
	}
	for _, e := range done {
		w.m.erasures.Inc()
		w.Log.Info("erasure completed", "erasure_id", e.ID.String(), "events_affected", e.EventsAffected, "days", len(e.Days))
	}
	return failed
}

// retentionIfDue removes raw events past their workspace's retention, at most once
// per RetentionInterval across every process of the database, and prunes identities
// no event in flight can carry any more.
func (w *Worker) retentionIfDue(ctx context.Context) error {
	ok, err := w.Redis.SetNX(ctx, w.retainKey, "1", w.Config.RetentionInterval).Result()
	if err != nil || !ok {
		return err
	}
	_, perr := w.Registry.Prune(ctx, w.Now(), w.Config.KeepIdentities)
	_, rerr := w.ApplyRetention(ctx)
	if err := errors.Join(perr, rerr); err != nil {
		_ = w.Redis.Del(context.WithoutCancel(ctx), w.retainKey).Err() // due again at the next poll
		return err
	}
	return nil
}

// ApplyRetention removes every workspace's raw events older than its retention (whole
// UTC days before Cutoff) with one mutation and returns how many it removed. Rollups
// are not touched: they keep every day.
func (w *Worker) ApplyRetention(ctx context.Context) (uint64, error) {
	settings, err := NewRetention(w.Redis).All(ctx)
	if err != nil || len(settings) == 0 {
		return 0, err
	}
	cond := retentionCond(settings, w.Now())
	n, err := count(ctx, w.Conn, "SELECT count() FROM "+w.tgt.table("events")+" WHERE "+cond)
	if err != nil || n == 0 {
		return 0, err
	}
	mctx, cancel := context.WithTimeout(ctx, w.Config.MutationTimeout)
	defer cancel()
	if err := w.tgt.mutate(mctx, w.Conn, mutation{table: "events", alter: w.tgt.alter("events") + " DELETE WHERE " + cond,
		remaining: "SELECT count() FROM " + w.tgt.table("events") + " WHERE " + cond}, w.pollEvery(), true); err != nil {
		return 0, err
	}
	w.m.retention.Add(float64(n))
	w.Log.Info("raw-event retention applied", "rows_deleted", n, "workspaces", len(settings))
	return n, nil
}

// lockScripts renew and release the worker lease only for its holder.
var (
	renewScript  = redis.NewScript(`if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end return 0`)
	unlockScript = redis.NewScript(`if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`)
)

// lockLease is the worker lease; it is renewed every third of it while the worker runs.
const lockLease = 30 * time.Second

// lock takes the worker lease. The returned context ends when the lease is lost.
func (w *Worker) lock(ctx context.Context) (context.Context, func(), bool) {
	token := uuid.NewString()
	ok, err := w.Redis.SetNX(ctx, w.lockKey, token, lockLease).Result()
	if err != nil || !ok {
		return ctx, nil, false
	}
	lctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(lockLease / 3)
		defer t.Stop()
		for {
			select {
			case <-lctx.Done():
				return
			case <-t.C:
				n, err := renewScript.Run(lctx, w.Redis, []string{w.lockKey}, token, lockLease.Milliseconds()).Int()
				if err == nil && n == 0 {
					w.Log.Warn("privacy: worker lease lost; stopping this run")
					cancel()
					return
				}
			}
		}
	}()
	return lctx, func() {
		cancel()
		<-done
		_ = unlockScript.Run(context.WithoutCancel(ctx), w.Redis, []string{w.lockKey}, token).Err()
	}, true
}
