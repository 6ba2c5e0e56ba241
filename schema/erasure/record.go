package erasure

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/google/uuid"

	"svc/lib/apikey"
	"svc/lib/chpool"
	"svc/lib/ids"
)

// Statuses of an erasure (the API's status field).
const (
	StatusPending   = "pending"
	StatusRunning   = "running"
	StatusCompleted = "completed"
)

// Stages of an erasure, in order. Each is recorded when reached; a worker that dies
// resumes from the last one recorded (every step is idempotent).
const (
	StagePending    = "pending"    // accepted, not started
	StagePlanned    = "planned"    // in-flight events fenced; affected events counted, their days recorded
	StageErased     = "erased"     // stored events lost the identity (mutation done, verified)
	StageRecomputed = "recomputed" // the rollups of every recorded day rebuilt
	StageCompleted  = "completed"  // erasure.completed emitted
)

var stageRank = map[string]uint64{StagePending: 0, StagePlanned: 1, StageErased: 2, StageRecomputed: 3, StageCompleted: 4}

// StageRank orders the stages: a later stage has a higher rank.
func StageRank(stage string) uint64 { return stageRank[stage] }

func statusOf(stage string) string {
	switch stage {
	case StagePending:
		return StatusPending
	case StageCompleted:
		return StatusCompleted
	}
	return StatusRunning
}

// PixelDay is one pixel's UTC day whose rollups an erasure rebuilt.
type PixelDay struct {
	Pixel uuid.UUID
	Date  time.Time // 00:00 UTC
}

// Erasure is one erasure request and what was done for it.
type Erasure struct {
	ID          uuid.UUID
	Workspace   uuid.UUID
	Sandbox     bool
	Email       [32]byte // SHA-256 of the normalised address; the address is never kept
	Suppress    bool
	Stage       string
	RequestedAt time.Time // second precision: events received up to it are in scope
	StartedAt   time.Time // zero until planned
	CompletedAt time.Time // zero until completed
	// EventsAffected counts the stored events that lost the identity (known from
	// planned on); EventsRemaining the events still carrying it in scope after the
	// mutation (0 from erased on: the proof).
	EventsAffected  uint64
	EventsRemaining uint64
	// Days are the pixel-days whose rollups are rebuilt (recorded at planned, rebuilt
	// by recomputed).
	Days      []PixelDay
	KeyID     uuid.UUID
	RequestID string
	LastError string
}

// Identity is the erasure as the pipeline applies it.
func (e *Erasure) Identity() Identity {
	return Identity{Workspace: e.Workspace, Email: e.Email, RequestedAt: e.RequestedAt.Unix(), Suppress: e.Suppress}
}

// Status is the API status of e's stage.
func (e *Erasure) Status() string { return statusOf(e.Stage) }

// NewID returns the id of a new erasure: derived from the key and its Idempotency-Key
// when there is one (a retry after a crash writes the same record again, which the
// table collapses), random otherwise.
func NewID(keyID uuid.UUID, idemKey []byte) uuid.UUID {
	if len(idemKey) == 0 {
		return uuid.New()
	}
	h := sha256.New()
	h.Write([]byte("svc:erasure\x00"))
	h.Write(keyID[:])
	h.Write(idemKey)
	var id uuid.UUID
	copy(id[:], h.Sum(nil))
	id[6] = id[6]&0x0f | 0x50 // a version 5 (name-based) UUID
	id[8] = id[8]&0x3f | 0x80
	return id
}

// ParseEmailSHA256 reads a hex SHA-256 (64 hex digits, either case).
func ParseEmailSHA256(s string) ([32]byte, bool) {
	var out [32]byte
	if len(s) != 64 {
		return out, false
	}
	b, err := hex.DecodeString(s)
	if err != nil {
		return out, false
	}
	copy(out[:], b)
	return out, true
}

// Table is the ClickHouse table of erasure records (schema/migrations/0040_privacy.sql).
const Table = "erasures"

var recordColumns = []string{"workspace_id", "erasure_id", "sandbox", "email_sha256", "suppress", "status", "stage",
	"requested_at", "started_at", "completed_at", "events_affected", "events_remaining", "days_pixel", "days_date",
	"key_id", "request_id", "last_error", "updated_at", "version"}

// version orders a record's rows: stage first, write time second, so that the latest
// row of the most advanced stage is the one FINAL keeps.
func version(stage string, at time.Time) uint64 {
	return stageRank[stage]<<56 | uint64(at.UnixMilli())&(1<<56-1)
}

// Write stores the current state of each erasure (one INSERT).
func Write(ctx context.Context, conn driver.Conn, now time.Time, es ...*Erasure) error {
	b, err := conn.PrepareBatch(ctx, "INSERT INTO "+Table+" ("+strings.Join(recordColumns, ", ")+")")
	if err != nil {
		return fmt.Errorf("privacy: write erasures: %w", err)
	}
	for _, e := range es {
		pixels, dates := make([]uuid.UUID, len(e.Days)), make([]time.Time, len(e.Days))
		for i, d := range e.Days {
			pixels[i], dates[i] = d.Pixel, d.Date
		}
		err := b.Append(e.Workspace, e.ID, chpool.UInt8(e.Sandbox), string(e.Email[:]), chpool.UInt8(e.Suppress), e.Status(), e.Stage,
			e.RequestedAt.UTC(), orEpoch(e.StartedAt), orEpoch(e.CompletedAt), e.EventsAffected, e.EventsRemaining,
			pixels, dates, e.KeyID, e.RequestID, e.LastError, now.UTC(), version(e.Stage, now))
		if err != nil {
			_ = b.Abort()
			return fmt.Errorf("privacy: write erasure %s: %w", e.ID, err)
		}
	}
	if err := b.Send(); err != nil {
		return fmt.Errorf("privacy: write erasures: %w", err)
	}
	return nil
}

func orEpoch(t time.Time) time.Time {
	if t.IsZero() {
		return time.Unix(0, 0).UTC()
	}
	return t.UTC()
}

func fromEpoch(t time.Time) time.Time {
	if t.Unix() <= 0 {
		return time.Time{}
	}
	return t.UTC()
}

// ErrNotFound: no such erasure in the workspace.
var ErrNotFound = errors.New("privacy: no such erasure")

const selectRecord = `SELECT erasure_id, workspace_id, sandbox, email_sha256, suppress, stage, requested_at, started_at,
       completed_at, events_affected, events_remaining, days_pixel, days_date, key_id, request_id, last_error
FROM ` + Table + ` FINAL`

// Get returns erasure id of workspace ws.
func Get(ctx context.Context, conn driver.Conn, ws, id uuid.UUID) (*Erasure, error) {
	es, err := query(ctx, conn, selectRecord+" WHERE workspace_id = toUUID(?) AND erasure_id = toUUID(?)", ws.String(), id.String())
	if err != nil {
		return nil, err
	}
	if len(es) == 0 {
		return nil, ErrNotFound
	}
	return es[0], nil
}

// ListQuery selects a page of a workspace's erasures, newest first.
type ListQuery struct {
	Workspace uuid.UUID
	Status    string // "" for every status
	// After resumes strictly after the erasure requested at AfterTime with id AfterID.
	AfterTime time.Time
	AfterID   uuid.UUID
	Offset    int // deprecated offset paging; only without After
	Limit     int
}

// List returns a page of erasures in (requested_at, id) descending order: a key that
// never changes, so keyset paging neither skips nor repeats while requests arrive.
func List(ctx context.Context, conn driver.Conn, q ListQuery) ([]*Erasure, error) {
	var b strings.Builder
	b.WriteString("SELECT * FROM (" + selectRecord + " WHERE workspace_id = toUUID(?))")
	args := []any{q.Workspace.String()}
	var where []string
	if q.Status != "" {
		where = append(where, "multiIf(stage = 'pending', 'pending', stage = 'completed', 'completed', 'running') = ?")
		args = append(args, q.Status)
	}
	if !q.AfterTime.IsZero() {
		where = append(where, "(requested_at, erasure_id) < (toDateTime(?), toUUID(?))")
		args = append(args, q.AfterTime.Unix(), q.AfterID.String())
	}
	if len(where) > 0 {
		b.WriteString(" WHERE " + strings.Join(where, " AND "))
	}
	b.WriteString(" ORDER BY requested_at DESC, erasure_id DESC LIMIT ")
	if q.AfterTime.IsZero() && q.Offset > 0 {
		fmt.Fprintf(&b, "%d, ", q.Offset)
	}
	fmt.Fprintf(&b, "%d", q.Limit)
	return query(ctx, conn, b.String(), args...)
}

// Unfinished returns up to limit erasures of every workspace not completed yet, oldest
// request first (the worker's queue).
func Unfinished(ctx context.Context, conn driver.Conn, limit int) ([]*Erasure, error) {
	return query(ctx, conn, fmt.Sprintf("SELECT * FROM (%s) WHERE stage != 'completed' ORDER BY requested_at, erasure_id LIMIT %d", selectRecord, limit))
}

func query(ctx context.Context, conn driver.Conn, q string, args ...any) ([]*Erasure, error) {
	rows, err := conn.Query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("privacy: read erasures: %w", err)
	}
	defer rows.Close()
	var out []*Erasure
	for rows.Next() {
		e := &Erasure{}
		var sandbox, suppress uint8
		var email string
		var pixels []uuid.UUID
		var dates []time.Time
		if err := rows.Scan(&e.ID, &e.Workspace, &sandbox, &email, &suppress, &e.Stage, &e.RequestedAt, &e.StartedAt,
			&e.CompletedAt, &e.EventsAffected, &e.EventsRemaining, &pixels, &dates, &e.KeyID, &e.RequestID, &e.LastError); err != nil {
			return nil, fmt.Errorf("privacy: scan erasure: %w", err)
		}
		e.Sandbox, e.Suppress = sandbox == 1, suppress == 1
		copy(e.Email[:], email)
		e.RequestedAt, e.StartedAt, e.CompletedAt = e.RequestedAt.UTC(), fromEpoch(e.StartedAt), fromEpoch(e.CompletedAt)
		for i := range pixels {
			if i < len(dates) {
				d := dates[i].UTC()
				e.Days = append(e.Days, PixelDay{Pixel: pixels[i], Date: time.Date(d.Year(), d.Month(), d.Day(), 0, 0, 0, 0, time.UTC)})
			}
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

// AddDays merges ds into e.Days (no duplicates, ordered by day then pixel).
func (e *Erasure) AddDays(ds ...PixelDay) {
	seen := map[PixelDay]bool{}
	for _, d := range e.Days {
		seen[d] = true
	}
	for _, d := range ds {
		if !seen[d] {
			seen[d] = true
			e.Days = append(e.Days, d)
		}
	}
	sort.Slice(e.Days, func(i, j int) bool {
		a, b := e.Days[i], e.Days[j]
		if !a.Date.Equal(b.Date) {
			return a.Date.Before(b.Date)
		}
		return a.Pixel.String() < b.Pixel.String()
	})
}

// View is an erasure as the API and the erasure.completed webhook show it.
type View struct {
	ID              string       `json:"id"`
	IDUUID          string       `json:"id_uuid"`
	Status          string       `json:"status"`
	Identity        IdentityView `json:"identity"`
	Suppress        bool         `json:"suppress"`
	Environment     string       `json:"environment"`
	WorkspaceID     string       `json:"workspace_id"`
	WorkspaceIDUUID string       `json:"workspace_id_uuid"`
	RequestedAt     time.Time    `json:"requested_at"`
	StartedAt       *time.Time   `json:"started_at"`
	CompletedAt     *time.Time   `json:"completed_at"`
	// EventsAffected is null until the affected events are counted.
	EventsAffected *uint64 `json:"events_affected"`
	// EventsRemaining is null until the stored events are erased; then 0 (checked).
	EventsRemaining *uint64   `json:"events_remaining"`
	DaysRecomputed  []DayView `json:"days_recomputed"`
	RequestID       string    `json:"request_id"`
}

// IdentityView is the erased identity: only ever its hash.
type IdentityView struct {
	EmailSHA256 string `json:"email_sha256"`
}

// DayView is one rebuilt pixel-day.
type DayView struct {
	PixelID     string `json:"pixel_id"`
	PixelIDUUID string `json:"pixel_id_uuid"`
	Date        string `json:"date"`
}

// View returns e as shown to clients. Days are listed once they are rebuilt.
func (e *Erasure) View() View {
	v := View{ID: ids.Format(ids.Erasure, e.ID), IDUUID: e.ID.String(), Status: e.Status(),
		Identity: IdentityView{EmailSHA256: hex.EncodeToString(e.Email[:])}, Suppress: e.Suppress,
		Environment: apikey.Live, WorkspaceID: ids.Format(ids.Org, e.Workspace), WorkspaceIDUUID: e.Workspace.String(),
		RequestedAt: e.RequestedAt.UTC(), DaysRecomputed: []DayView{}, RequestID: e.RequestID}
	if e.Sandbox {
		v.Environment = apikey.Sandbox
	}
	if !e.StartedAt.IsZero() {
		t := e.StartedAt.UTC()
		v.StartedAt = &t
	}
	if !e.CompletedAt.IsZero() {
		t := e.CompletedAt.UTC()
		v.CompletedAt = &t
	}
	rank := stageRank[e.Stage]
	if rank >= stageRank[StagePlanned] {
		n := e.EventsAffected
		v.EventsAffected = &n
	}
	if rank >= stageRank[StageErased] {
		n := e.EventsRemaining
		v.EventsRemaining = &n
	}
	if rank >= stageRank[StageRecomputed] {
		for _, d := range e.Days {
			v.DaysRecomputed = append(v.DaysRecomputed, DayView{PixelID: ids.Format(ids.Pixel, d.Pixel),
				PixelIDUUID: d.Pixel.String(), Date: d.Date.Format("2006-01-02")})
		}
	}
	return v
}

// ErrNotRegistered is Submit's failure after the record was written: the pipeline does
// not know the identity yet (Redis); submitting again (the same id) completes it.
var ErrNotRegistered = errors.New("erasure: recorded, but the identity is not registered with the pipeline")

// Submit records e (pending) in ClickHouse, then registers its identity with the
// pipeline (the edge suppresses, the consumer clears in-flight events); the worker (svc
// webhooks) runs it. POST /erasures and the application both request one through it.
func Submit(ctx context.Context, conn driver.Conn, reg *Registry, e *Erasure, now time.Time) error {
	if err := Write(ctx, conn, now, e); err != nil {
		return err
	}
	if err := reg.Register(ctx, e.Identity()); err != nil {
		return fmt.Errorf("%w: %v", ErrNotRegistered, err)
	}
	return nil
}
