package webhooks

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	json "github.com/goccy/go-json"
	"github.com/google/uuid"

	"svc/lib/ids"
)

// eventNamespace derives stable event ids (UUID v5) from what an event is about.
var eventNamespace = uuid.MustParse("8f0c8a52-4f4e-4d0a-9b7e-3c7f1f0f5e21")

// EventID returns the stable id of the event of kind about parts: the same occurrence
// always gets the same id, so a receiver can deduplicate on it and the worker emits it
// once however often a trigger sees it.
func EventID(kind string, parts ...string) uuid.UUID {
	return uuid.NewSHA1(eventNamespace, []byte(kind+"\x00"+strings.Join(parts, "\x00")))
}

// Event is one outbound event.
type Event struct {
	ID          uuid.UUID
	Kind        string
	WorkspaceID uuid.UUID
	CreatedAt   time.Time
	// Data is the kind's payload (DayClosed, KeyExpiring, RejectionsRising, PixelSilent…),
	// the envelope's data member.
	Data any
}

// Body returns the event's delivery body.
func (e Event) Body() ([]byte, error) {
	return json.Marshal(Envelope{ID: ids.Format(ids.Event, e.ID), IDUUID: e.ID.String(), Type: e.Kind,
		CreatedAt: e.CreatedAt.UTC().Truncate(time.Second), WorkspaceID: ids.Format(ids.Org, e.WorkspaceID),
		WorkspaceIDUUID: e.WorkspaceID.String(), Data: e.Data})
}

// DayClosed is the data of rollup.day_closed: a pixel's day became final; its totals
// will not change any more.
type DayClosed struct {
	PixelID     string `json:"pixel_id"`
	PixelIDUUID string `json:"pixel_id_uuid"`
	Date        string `json:"date"`      // YYYY-MM-DD, a calendar day of TimeZone
	TimeZone    string `json:"time_zone"` // the pixel's IANA zone (its own, its workspace's, or UTC)
	Sandbox     bool   `json:"sandbox"`
	// Events and ConsentedEvents are the day's totals over every event name.
	Events          uint64 `json:"events"`
	ConsentedEvents uint64 `json:"consented_events"`
	// Rows are the day's rollup rows, one per event name and currency.
	Rows []DayClosedRow `json:"rows"`
}

// DayClosedRow is one (event name, currency) row of a closed day.
type DayClosedRow struct {
	EventName       string `json:"event_name"`
	Currency        string `json:"currency"`
	Events          uint64 `json:"events"`
	ConsentedEvents uint64 `json:"consented_events"`
	Value           string `json:"value"` // decimal, 4 places
	UniquePeople    uint64 `json:"unique_people"`
}

// KeyExpiring is the data of key.expiring: an API key expires within seven days.
type KeyExpiring struct {
	KeyID     string    `json:"key_id"`
	KeyIDUUID string    `json:"key_id_uuid"`
	Env       string    `json:"env"`
	Scopes    []string  `json:"scopes"`
	ExpiresAt time.Time `json:"expires_at"`
	// ExpiresInSeconds is counted from the event's created_at.
	ExpiresInSeconds int64 `json:"expires_in_seconds"`
}

// Emitter turns events into scheduled deliveries.
type Emitter struct {
	Store *Store
	Logs  *Logs
	Log   *slog.Logger
	// Delay is when the first attempt is due after emission (Config.Schedule[0]).
	Delay time.Duration
}

// Emit schedules ev for immediate delivery to every enabled endpoint of its workspace
// that takes its kind, once per endpoint: emitting the same event id again schedules
// nothing new except for endpoints created since. The first body stored for an id is
// the one every delivery sends. It returns the number of deliveries scheduled.
func (em *Emitter) Emit(ctx context.Context, ev Event) (int, error) {
	eps, err := em.Store.Endpoints(ctx, ev.WorkspaceID)
	if err != nil {
		return 0, err
	}
	var targets []Endpoint
	for _, e := range eps {
		if e.Enabled() && e.Wants(ev.Kind) {
			targets = append(targets, e)
		}
	}
	if len(targets) == 0 {
		return 0, nil
	}
	if ev.CreatedAt.IsZero() {
		ev.CreatedAt = em.Store.Now()
	}
	body, err := ev.Body()
	if err != nil {
		return 0, fmt.Errorf("event %s: %w", ev.Kind, err)
	}
	fresh, _, err := em.Store.PutEvent(ctx, ev.ID, body)
	if err != nil {
		return 0, err
	}
	if fresh && em.Logs != nil {
		if err := em.Logs.InsertEvent(ctx, ev.ID, ev.WorkspaceID, ev.Kind, ev.CreatedAt, body); err != nil {
			// Redis holds the body for EventTTL; the ClickHouse copy is for a redelivery
			// after that, so the row waits in Redis (eventq) for the worker's next RunOnce.
			em.Log.Warn("webhook event not recorded in ClickHouse; queued in Redis", "event_id", ev.ID.String(), "err", err.Error())
			em.queue(ctx, queuedEvent{ev.ID.String(), ev.WorkspaceID.String(), ev.Kind, ev.CreatedAt, body})
		}
	}
	n := 0
	due := em.Store.Now().Add(em.Delay)
	for _, e := range targets {
		ok, err := em.Store.Enqueue(ctx, e.ID, ev.ID, ev.WorkspaceID, ev.Kind, due)
		if err != nil {
			return n, err
		}
		if ok {
			n++
		}
	}
	return n, nil
}

// queuedEvent is an emitted event's ClickHouse row waiting in Redis (Store's eventq).
type queuedEvent struct {
	ID   string    `json:"id"`
	WS   string    `json:"ws"`
	Kind string    `json:"kind"`
	At   time.Time `json:"at"`
	Body []byte    `json:"body"`
}

// queue keeps q for a later flushQueuedEvents.
func (em *Emitter) queue(ctx context.Context, q queuedEvent) {
	b, _ := json.Marshal(q)
	if err := em.Store.push(ctx, eventQueue, b); err != nil {
		em.Log.Error("webhook event's row lost: a redelivery after the event's time in Redis will find no body",
			"event_id", q.ID, "err", err.Error())
	}
}

// flushQueuedEvents writes the event rows Emit queued while ClickHouse did not take
// them, up to 100 a call; a row ClickHouse still refuses goes back to the queue with
// those after it.
func (w *Worker) flushQueuedEvents(ctx context.Context) {
	if w.Logs == nil {
		return
	}
	raw, err := w.Store.pop(ctx, eventQueue, 100)
	if err != nil {
		return
	}
	for i, s := range raw {
		var q queuedEvent
		if json.Unmarshal([]byte(s), &q) != nil {
			continue
		}
		id, _ := uuid.Parse(q.ID)
		ws, _ := uuid.Parse(q.WS)
		if err := w.Logs.InsertEvent(ctx, id, ws, q.Kind, q.At, q.Body); err != nil {
			for _, back := range raw[i:] {
				_ = w.Store.push(ctx, eventQueue, []byte(back))
			}
			return
		}
	}
}
