package privacy

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/google/uuid"

	"svc/schema/workspace"
)

// retentionCond selects the raw events past their workspace's retention.
func retentionCond(settings map[uuid.UUID]int, now time.Time) string {
	conds := make([]string, 0, len(settings))
	for ws, days := range settings {
		conds = append(conds, "(workspace_id = "+uuidLit(ws)+" AND event_date < "+dateLit(workspace.RetentionCutoff(now, days))+")")
	}
	return strings.Join(conds, " OR ")
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
// UTC days before workspace.RetentionCutoff) with one mutation and returns how many it removed. Rollups
// are not touched: they keep every day.
func (w *Worker) ApplyRetention(ctx context.Context) (uint64, error) {
	settings, err := workspace.NewRetention(w.Redis).All(ctx)
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
