package privacy_test

import (
	"context"
	"crypto/sha256"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"svc/lib/chpool"
	"svc/lib/paging"
	"svc/privacy"
	"svc/schema"
	"svc/schema/apitest"
	"svc/schema/chtest"
	"svc/schema/erasure"
	"svc/schema/rollups"
	"svc/schema/sink"
)

// world is one test's stores: a private ClickHouse database, the shared Redis (the
// test's keys are scoped by its database and random workspaces), and a worker.
type world struct {
	t      *testing.T
	cfg    chpool.Config
	conn   driver.Conn
	rdb    redis.UniversalClient
	worker *privacy.Worker
	done   []*erasure.Erasure // announced by the worker
	offset int64
}

func newWorld(t *testing.T) *world {
	t.Helper()
	return newWorldLogging(t, slog.New(slog.NewTextHandler(io.Discard, nil)))
}

// newWorldLogging is newWorld with the worker logging to log.
func newWorldLogging(t *testing.T, log *slog.Logger) *world {
	t.Helper()
	rdb := apitest.Redis(t)
	cfg, conn := chtest.NewDB(t)
	w := &world{t: t, cfg: cfg, conn: conn, rdb: rdb}
	pc := privacy.Config{Poll: 20 * time.Millisecond, Batch: 100, MutationTimeout: time.Minute, HoldLease: time.Minute,
		RetentionInterval: time.Hour, KeepIdentities: 192 * time.Hour}
	w.worker = privacy.NewWorker(pc, conn, rdb, cfg, nil, log)
	w.worker.Completed = func(_ context.Context, e *erasure.Erasure) error {
		w.done = append(w.done, e)
		return nil
	}
	return w
}

func email(s string) [32]byte { return sha256.Sum256([]byte(s)) }

// ev is one event to store.
type ev struct {
	ws, pixel uuid.UUID
	sandbox   bool
	day       time.Time // occurred at noon of it
	name      string
	value     int64 // × 10^4
	consent   bool
	email     string // "" for none
	received  time.Time
}

// store writes events through the consumer's own sink (one INSERT, the view fills the
// rollups), each as its own record at the next offset.
func (w *world) store(evs ...ev) {
	w.t.Helper()
	s := sink.New(w.conn, "events", schema.TopicEvents)
	for _, e := range evs {
		b := schema.Batch{Sandbox: e.sandbox, Workspace: schema.UUID(e.ws), Pixel: schema.UUID(e.pixel),
			ReceivedAt: e.received.UnixMilli(), RequestID: "req_test"}
		se := schema.Event{ID: schema.UUID(uuid.New()), Name: e.name, OccurredAt: e.day.Add(12 * time.Hour).UnixMilli(),
			HasValue: true, Value: e.value, Currency: [3]byte{'E', 'U', 'R'}, Consent: e.consent}
		if e.email != "" && e.consent {
			se.HasEmail, se.EmailSHA = true, email(e.email)
		}
		b.Events = []schema.Event{se}
		s.Add(&b, 0, w.offset)
		w.offset++
	}
	if err := s.Flush(context.Background(), time.Now()); err != nil {
		w.t.Fatal(err)
	}
}

// request records an erasure as POST /erasures does (without the HTTP part).
func (w *world) request(ws uuid.UUID, sandbox bool, address string, suppress bool, at time.Time) *erasure.Erasure {
	w.t.Helper()
	e := &erasure.Erasure{ID: uuid.New(), Workspace: ws, Sandbox: sandbox, Email: email(address), Suppress: suppress,
		Stage: erasure.StagePending, RequestedAt: at.UTC().Truncate(time.Second), RequestID: "req_test"}
	if err := erasure.Write(context.Background(), w.conn, at, e); err != nil {
		w.t.Fatal(err)
	}
	w.t.Cleanup(func() {
		_ = w.rdb.HDel(context.Background(), "svc:privacy:{ids}", ws.String()+":"+hexOf(e.Email)).Err()
	})
	return e
}

func hexOf(b [32]byte) string {
	const digits = "0123456789abcdef"
	out := make([]byte, 64)
	for i, c := range b {
		out[2*i], out[2*i+1] = digits[c>>4], digits[c&15]
	}
	return string(out)
}

// day is one rollup day's totals of a pixel, from the API's query.
type day struct {
	events, consented, people uint64
	value                     string
}

func (w *world) rollups(ws, pixel uuid.UUID, sandbox bool) map[string]day {
	w.t.Helper()
	rows, err := rollups.QueryDaily(context.Background(), w.conn, rollups.DailyQuery{Workspace: schema.UUID(ws), Sandbox: sandbox,
		Pixel: schema.UUID(pixel), Limit: paging.MaxLimit})
	if err != nil {
		w.t.Fatal(err)
	}
	out := map[string]day{}
	for _, r := range rows {
		k := r.Date.Format("2006-01-02") + "|" + r.EventName
		out[k] = day{r.Events, r.ConsentedEvents, r.UniquePeople, r.Value}
	}
	return out
}

func (w *world) count(q string, args ...any) uint64 {
	w.t.Helper()
	var n uint64
	if err := w.conn.QueryRow(context.Background(), q, args...).Scan(&n); err != nil {
		w.t.Fatalf("%v\n%s", err, q)
	}
	return n
}

// withHash counts the events of ws still carrying address's hash.
func (w *world) withHash(ws uuid.UUID, address string) uint64 {
	e := email(address)
	return w.count("SELECT count() FROM events WHERE workspace_id = toUUID(?) AND email_sha256 = unhex(?)", ws.String(), hexOf(e))
}

func (w *world) runOnce() {
	w.t.Helper()
	if err := w.worker.RunOnce(context.Background()); err != nil {
		w.t.Fatal(err)
	}
}

func (w *world) get(e *erasure.Erasure) *erasure.Erasure {
	w.t.Helper()
	got, err := erasure.Get(context.Background(), w.conn, e.Workspace, e.ID)
	if err != nil {
		w.t.Fatal(err)
	}
	return got
}
