package privacy

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/google/uuid"

	"svc/schema/erasure"
)

// rebuildRollups rebuilds every rollup table's rows of the erasures' recorded days
// from the (erased) events, then records them recomputed.
func (w *Worker) rebuildRollups(ctx context.Context, es []*erasure.Erasure) error {
	if len(es) == 0 {
		return nil
	}
	var ss []erasure.Slice
	for _, e := range es {
		for _, d := range e.Days {
			ss = append(ss, erasure.Slice{Workspace: e.Workspace, Sandbox: e.Sandbox, PixelDay: d})
		}
	}
	if err := w.rebuild(ctx, ss); err != nil {
		return err
	}
	for _, e := range es {
		e.Stage, e.LastError = erasure.StageRecomputed, ""
	}
	return erasure.Write(ctx, w.Conn, w.Now(), es...)
}

// rebuild replaces the rows of slices (repeats allowed) in every rollup table with rows aggregated
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
func (w *Worker) rebuild(ctx context.Context, ss []erasure.Slice) error {
	if ss = distinct(ss); len(ss) == 0 {
		return nil
	}
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

func (w *Worker) deleteSlices(ctx context.Context, ss []erasure.Slice) error {
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

func (w *Worker) insertSlices(ctx context.Context, ss []erasure.Slice) error {
	// The pool's settings (lib/chpool) make the INSERT synchronous (through the
	// Distributed table too), never deduplicated (a resumed rebuild inserts the block it
	// inserted before, after deleting it) and placed by the target's sharding key.
	for _, t := range w.Tables {
		q := t.RebuildSQL(w.tgt.db, slicesCond(ss, "event_date"))
		if err := w.Conn.Exec(ctx, q); err != nil {
			return fmt.Errorf("privacy: rebuild %s: %w", t.Name, err)
		}
	}
	return nil
}

func distinct(ss []erasure.Slice) []erasure.Slice {
	seen := map[erasure.Slice]bool{}
	var out []erasure.Slice
	for _, s := range ss {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

func distinctPixels(ss []erasure.Slice) []uuid.UUID {
	seen := map[uuid.UUID]bool{}
	var out []uuid.UUID
	for _, s := range ss {
		if !seen[s.Pixel] {
			seen[s.Pixel] = true
			out = append(out, s.Pixel)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}
