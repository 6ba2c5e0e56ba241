package webhook

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/google/uuid"
)

// Logs writes and reads the three webhook tables in ClickHouse (schema/migrations/
// 0030_webhooks.sql): the inbound log, the emitted events, the delivery log.
type Logs struct {
	conn driver.Conn
}

// NewLogs returns Logs over conn (its database holds the tables).
func NewLogs(conn driver.Conn) *Logs { return &Logs{conn: conn} }

// Outcomes of an inbound message.
const (
	Processed = "processed"
	Ignored   = "ignored"
	Failed    = "failed"
)

// InboundRow is one inbound message as recorded.
type InboundRow struct {
	WorkspaceID uuid.UUID `json:"-"`
	MessageID   string    `json:"message_id"`
	ReceivedAt  time.Time `json:"received_at"`
	Type        string    `json:"type"`
	Outcome     string    `json:"outcome"`
	Reason      string    `json:"reason"`
	Status      int       `json:"status"`
	Rows        int       `json:"rows_written"`
	BodyBytes   int       `json:"body_bytes"`
	BodySHA256  string    `json:"body_sha256"`
	RequestID   string    `json:"request_id"`
}

// InsertInbound records one inbound message.
func (l *Logs) InsertInbound(ctx context.Context, r InboundRow) error {
	return l.InsertInbounds(ctx, []InboundRow{r})
}

// InsertInbounds records inbound messages in one INSERT.
func (l *Logs) InsertInbounds(ctx context.Context, rows []InboundRow) error {
	if len(rows) == 0 {
		return nil
	}
	b, err := l.conn.PrepareBatch(ctx, `INSERT INTO webhook_inbound (workspace_id, message_id, received_at,
		message_type, outcome, reason, status, rows_written, body_bytes, body_sha256, request_id)`)
	if err != nil {
		return err
	}
	defer b.Abort()
	for _, r := range rows {
		if err := b.Append(r.WorkspaceID, r.MessageID, r.ReceivedAt.UTC(), r.Type, r.Outcome, r.Reason,
			uint16(r.Status), uint32(r.Rows), uint32(r.BodyBytes), r.BodySHA256, r.RequestID); err != nil {
			return err
		}
	}
	return b.Send()
}

// Inbound lists ws's inbound messages, newest first; outcome "" means any.
func (l *Logs) Inbound(ctx context.Context, ws uuid.UUID, outcome string, limit int) ([]InboundRow, error) {
	q := `SELECT message_id, received_at, message_type, outcome, reason, status, rows_written, body_bytes,
		body_sha256, request_id FROM webhook_inbound WHERE workspace_id = toUUID(?)`
	args := []any{ws.String()}
	if outcome != "" {
		q += " AND outcome = ?"
		args = append(args, outcome)
	}
	q += fmt.Sprintf(" ORDER BY received_at DESC, message_id LIMIT %d", limit)
	rows, err := l.conn.Query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []InboundRow{}
	for rows.Next() {
		r := InboundRow{WorkspaceID: ws}
		var st uint16
		var n, bb uint32
		if err := rows.Scan(&r.MessageID, &r.ReceivedAt, &r.Type, &r.Outcome, &r.Reason, &st, &n, &bb,
			&r.BodySHA256, &r.RequestID); err != nil {
			return nil, err
		}
		r.Status, r.Rows, r.BodyBytes = int(st), int(n), int(bb)
		out = append(out, r)
	}
	return out, rows.Err()
}

// InsertEvent records an emitted event and its body.
func (l *Logs) InsertEvent(ctx context.Context, id, ws uuid.UUID, kind string, at time.Time, body []byte) error {
	b, err := l.conn.PrepareBatch(ctx, `INSERT INTO webhook_events (event_id, workspace_id, kind, created_at, payload)`)
	if err != nil {
		return err
	}
	defer b.Abort()
	if err := b.Append(id, ws, kind, at.UTC(), string(body)); err != nil {
		return err
	}
	return b.Send()
}

// StoredEvent is an event as recorded in ClickHouse.
type StoredEvent struct {
	ID          uuid.UUID
	WorkspaceID uuid.UUID
	Kind        string
	CreatedAt   time.Time
	Body        []byte
}

// Event reads an emitted event; ErrNotFound if it was never recorded.
func (l *Logs) Event(ctx context.Context, id uuid.UUID) (StoredEvent, error) {
	rows, err := l.conn.Query(ctx, `SELECT workspace_id, kind, created_at, payload FROM webhook_events
		WHERE event_id = toUUID(?) LIMIT 1`, id.String())
	if err != nil {
		return StoredEvent{}, err
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return StoredEvent{}, err
		}
		return StoredEvent{}, ErrNotFound
	}
	e := StoredEvent{ID: id}
	var body string
	if err := rows.Scan(&e.WorkspaceID, &e.Kind, &e.CreatedAt, &body); err != nil {
		return StoredEvent{}, err
	}
	e.Body = []byte(body)
	return e, nil
}

// Outcomes of a delivery attempt.
const (
	Delivered = "delivered" // 2xx
	Retry     = "retry"     // failed, another attempt is scheduled
	GaveUp    = "failed"    // failed, the schedule is exhausted
	Disabled  = "disabled"  // 410 Gone, or failures over DisableAfter: endpoint disabled
	Dropped   = "dropped"   // not sent: the endpoint is disabled or gone, or the event expired
)

// DeliveryRow is one row of the delivery log: one attempt.
type DeliveryRow struct {
	WorkspaceID   uuid.UUID  `json:"-"`
	EndpointID    uuid.UUID  `json:"-"`
	EventID       uuid.UUID  `json:"-"`
	Kind          string     `json:"kind"`
	Attempt       int        `json:"attempt"`
	AttemptedAt   time.Time  `json:"attempted_at"`
	StatusCode    int        `json:"status_code"`
	LatencyMS     int        `json:"latency_ms"`
	Outcome       string     `json:"outcome"`
	Error         string     `json:"error"`
	NextAttemptAt *time.Time `json:"next_attempt_at"`
	Worker        string     `json:"worker"`
}

// InsertDeliveries appends rows to the delivery log in one insert.
func (l *Logs) InsertDeliveries(ctx context.Context, rows []DeliveryRow) error {
	if len(rows) == 0 {
		return nil
	}
	b, err := l.conn.PrepareBatch(ctx, `INSERT INTO webhook_deliveries (workspace_id, endpoint_id, event_id, kind,
		attempt, attempted_at, status_code, latency_ms, outcome, error, next_attempt_at, worker)`)
	if err != nil {
		return err
	}
	defer b.Abort()
	for _, r := range rows {
		next := time.Unix(0, 0).UTC()
		if r.NextAttemptAt != nil {
			next = r.NextAttemptAt.UTC()
		}
		if err := b.Append(r.WorkspaceID, r.EndpointID, r.EventID, r.Kind, uint16(r.Attempt), r.AttemptedAt.UTC(),
			uint16(r.StatusCode), uint32(r.LatencyMS), r.Outcome, r.Error, next, r.Worker); err != nil {
			return err
		}
	}
	return b.Send()
}

// DeliveryFilter narrows a delivery-log listing; zero fields match everything.
type DeliveryFilter struct {
	Workspace uuid.UUID
	Endpoint  uuid.UUID
	Event     uuid.UUID
	Limit     int
}

// Deliveries lists the delivery log, newest attempt first.
func (l *Logs) Deliveries(ctx context.Context, f DeliveryFilter) ([]DeliveryRow, error) {
	if f.Workspace == uuid.Nil && f.Event == uuid.Nil && f.Endpoint == uuid.Nil {
		return nil, errors.New("a workspace, endpoint or event is required")
	}
	q := `SELECT workspace_id, endpoint_id, event_id, kind, attempt, attempted_at, status_code, latency_ms,
		outcome, error, next_attempt_at, worker FROM webhook_deliveries WHERE 1`
	var args []any
	for _, c := range []struct {
		col string
		v   uuid.UUID
	}{{"workspace_id", f.Workspace}, {"endpoint_id", f.Endpoint}, {"event_id", f.Event}} {
		if c.v != uuid.Nil {
			q += " AND " + c.col + " = toUUID(?)"
			args = append(args, c.v.String())
		}
	}
	limit := f.Limit
	if limit <= 0 {
		limit = 100
	}
	q += fmt.Sprintf(" ORDER BY attempted_at DESC, attempt DESC LIMIT %d", limit)
	rows, err := l.conn.Query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []DeliveryRow{}
	for rows.Next() {
		var r DeliveryRow
		var att, st uint16
		var lat uint32
		var next time.Time
		if err := rows.Scan(&r.WorkspaceID, &r.EndpointID, &r.EventID, &r.Kind, &att, &r.AttemptedAt, &st, &lat,
			&r.Outcome, &r.Error, &next, &r.Worker); err != nil {
			return nil, err
		}
		r.Attempt, r.StatusCode, r.LatencyMS = int(att), int(st), int(lat)
		if next.Unix() > 0 {
			n := next.UTC()
			r.NextAttemptAt = &n
		}
		r.AttemptedAt = r.AttemptedAt.UTC()
		out = append(out, r)
	}
	return out, rows.Err()
}
