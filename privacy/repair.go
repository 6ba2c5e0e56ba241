package privacy

import (
	"context"
	"sort"

	"svc/schema/erasure"
)

// repairInserts rebuilds the rollups of every consumer INSERT left unsure
// (erasure.Fence.Unsure): one that failed, or whose consumer died, may have stored its
// events without some of its views' rows, and the consumer's read-back, finding the
// events, does not send them again. Rebuilding the INSERT's slices from the events
// makes their rollups exact whatever part of it landed; it runs under the same holds
// as an erasure's rebuild, and the same lease keeps the two from overlapping.
func (w *Worker) repairInserts(ctx context.Context) error {
	unsure, err := w.Fence.Unsure(ctx)
	if err != nil || len(unsure) == 0 {
		return err
	}
	ids := make([]string, 0, len(unsure))
	for id := range unsure {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	var ss []erasure.Slice
	for _, id := range ids {
		ss = append(ss, unsure[id]...)
	}
	if err := w.rebuild(ctx, ss); err != nil {
		return err
	}
	w.m.repairs.Add(float64(len(ids)))
	w.Log.Info("rollups repaired after unsure inserts", "inserts", len(ids), "pixel_days", len(distinct(ss)))
	return w.Fence.Repaired(ctx, ids...)
}
