package webhooks

import (
	"context"

	"svc/privacy"
	"svc/schema/erasure"
)

// The webhooks role runs the privacy worker (privacy/README.md: erasures and raw-event
// retention). It is the role with background jobs on a schedule already, and the one
// that emits outbound events: an erasure ends with erasure.completed, whose data is the
// erasure record (GET /erasures/{id}), so a customer's compliance system can file the
// proof. The rollup role stays a pure consumer: its loop is the pipeline's latency,
// and a mutation wait of minutes has no place in it.

// UsePrivacy runs w in this role and announces each completed erasure.
func (r *Role) UsePrivacy(w *privacy.Worker) {
	w.Completed = r.Emitter.EmitErasureCompleted
	r.Privacy = w
}

func (r *Role) runPrivacy(ctx context.Context) error {
	if r.Privacy == nil {
		return nil
	}
	return r.Privacy.Run(ctx)
}

// EmitErasureCompleted schedules erasure.completed for e to every endpoint of its
// workspace that takes the kind. The event id derives from the erasure's id, so a
// worker that announces twice (it died before recording completion) emits one event.
func (em *Emitter) EmitErasureCompleted(ctx context.Context, e *erasure.Erasure) error {
	_, err := em.Emit(ctx, Event{ID: EventID(KindErasureCompleted, e.ID.String()), Kind: KindErasureCompleted,
		WorkspaceID: e.Workspace, CreatedAt: e.CompletedAt, Data: e.View()})
	return err
}
