package bench

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"svc/lib/apikey"
	"svc/lib/idempotency"
	"svc/lib/ids"
	"svc/lib/process"
	"svc/schema"
	"svc/schema/workspace"
)

// Raised limits of the bench's keys: far above any rate the bench sends, so a run
// measures the service and not the default quota (120/min, 10,000/day).
const (
	BenchBurst = 100_000_000
	BenchDaily = 1_000_000_000
)

// Fixture is what a run provisions: one workspace, its pixels and keys. Close revokes
// the keys.
type Fixture struct {
	Workspace uuid.UUID
	Pixels    []uuid.UUID
	PixelIDs  []string // pxl_… forms
	KeyIDs    []uuid.UUID
	Secrets   []string

	rdb   redis.UniversalClient
	store *workspace.Store
}

// Provision creates a workspace named name with npixels pixels and nkeys live keys
// holding scopes, directly in the key store (in the Redis rc names).
func Provision(ctx context.Context, rc process.RedisConfig, name string, npixels, nkeys int, scopes []string) (*Fixture, error) {
	rdb, err := process.OpenRedis(ctx, rc)
	if err != nil {
		return nil, err
	}
	f := &Fixture{rdb: rdb, store: workspace.NewStore(rdb)}
	ws, err := f.store.CreateWorkspace(ctx, name, false)
	if err != nil {
		rdb.Close()
		return nil, fmt.Errorf("create workspace: %w", err)
	}
	f.Workspace = ws.ID
	for i := 0; i < npixels; i++ {
		if err := f.AddPixel(ctx, fmt.Sprintf("%s-%d", name, i)); err != nil {
			f.Close(ctx)
			return nil, err
		}
	}
	for i := 0; i < nkeys; i++ {
		k, secret, err := f.store.CreateKey(ctx, workspace.KeySpec{WorkspaceID: ws.ID, Env: apikey.Live,
			Scopes: scopes, Burst: BenchBurst, Daily: BenchDaily})
		if err != nil {
			f.Close(ctx)
			return nil, fmt.Errorf("create key: %w", err)
		}
		f.KeyIDs = append(f.KeyIDs, k.ID)
		f.Secrets = append(f.Secrets, secret)
	}
	return f, nil
}

// AddPixel creates one more pixel in the fixture's workspace.
func (f *Fixture) AddPixel(ctx context.Context, name string) error {
	p, err := f.store.CreatePixel(ctx, f.Workspace, name)
	if err != nil {
		return fmt.Errorf("create pixel: %w", err)
	}
	f.Pixels = append(f.Pixels, p.ID)
	f.PixelIDs = append(f.PixelIDs, ids.Format(ids.Pixel, p.ID))
	return nil
}

// Redis is the fixture's Redis client (for seeding through other packages).
func (f *Fixture) Redis() redis.UniversalClient { return f.rdb }

// Close revokes every key the fixture created and closes Redis. It uses its own
// context so that it runs even after the run's context was cancelled.
func (f *Fixture) Close(_ context.Context) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var first error
	for _, id := range f.KeyIDs {
		if _, err := f.store.Revoke(ctx, id); err != nil && first == nil {
			first = fmt.Errorf("revoke key %s: %w", id, err)
		}
	}
	// The idempotency records of the run (about 50 B each, kept 24 h to 30 h) are fields
	// of tables every key shares: ForgetRequests deletes them by name (the scenarios that
	// send Idempotency-Keys call it); the emptied buckets stay until their expiry.
	f.rdb.Close()
	return first
}

// ForgetRequests deletes by name what n requests left in Redis: request j's idempotency
// record (its key id and Idempotency-Key are name(j)), a field of a table, 500 requests
// per pipeline. The rollup consumer's claim on each batch (about 20 B) is left to expire
// (25 to 31 h): its tables are the consumer's own.
func (f *Fixture) ForgetRequests(ctx context.Context, n int64, name func(j int64) (uuid.UUID, string)) error {
	const perPipeline = 500
	store := idempotency.New(f.rdb)
	for j := int64(0); j < n; j += perPipeline {
		byKey := map[uuid.UUID][]string{}
		for i := j; i < min(n, j+perPipeline); i++ {
			kid, idem := name(i)
			byKey[kid] = append(byKey[kid], idem)
		}
		for kid, idems := range byKey {
			if err := store.Forget(ctx, kid.String(), idems...); err != nil {
				return fmt.Errorf("forget requests: %w", err)
			}
		}
	}
	return nil
}

// dropEventClaims drops the rollup consumer's claim logs of database db after an
// -event-ids run (the logs of schema.EventClaimLogs), when db is a scratch database of the suite
// (named bench_…): the logs hold every partition's claims of the database, not only the
// run's, so another database's are left to expire (the event-id window). It returns the
// note for the report.
func dropEventClaims(ctx context.Context, fx *Fixture, db string) string {
	if !strings.HasPrefix(db, "bench_") {
		return "event-id claims kept: database " + db + " is not a scratch database (bench_…); they expire with the window"
	}
	n, err := process.UnlinkPattern(ctx, fx.rdb, schema.EventClaimLogs(db)+"*")
	if err != nil {
		return "cleanup of the event-id claims: " + err.Error()
	}
	return fmt.Sprintf("event-id claim logs of scratch database %s dropped (%d keys)", db, n)
}
