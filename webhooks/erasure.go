package webhooks

import (
	"context"

	"svc/schema/erasure"
)

// An erasure ends with erasure.completed, whose data is the erasure record (GET
// /erasures/{id}), so a customer's compliance system can file the proof. The privacy
// role runs the erasures; main.go hands it EmitErasureCompleted.

// EmitErasureCompleted schedules erasure.completed for e to every endpoint of its
// workspace that takes the kind. The event id derives from the erasure's id, so a
// worker that announces twice (it died before recording completion) emits one event.
func (em *Emitter) EmitErasureCompleted(ctx context.Context, e *erasure.Erasure) error {
	_, err := em.Emit(ctx, Event{ID: EventID(KindErasureCompleted, e.ID.String()), Kind: KindErasureCompleted,
		WorkspaceID: e.Workspace, CreatedAt: e.CompletedAt, Data: e.View()})
	return err
}
