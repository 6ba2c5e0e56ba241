package erasure

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"svc/lib/chpool"
	"svc/lib/process"
	"svc/schema"
)

// Fence coordinates the consumer's INSERTs into one database with the erasure worker,
// through Redis (per database, so that deployments and tests sharing a Redis do not
// wait on each other):
//
//	svc:privacy:{<db>}:flushes  ZSET query id of a consumer INSERT → lease end (unix ms)
//	svc:privacy:{<db>}:holds    ZSET pixel uuid → hold end (unix ms)
//	svc:privacy:{<db>}:holdgen  counter, raised after every Hold's ZADD (HoldState)
//	svc:privacy:{<db>}:inserts  HASH query id of a consumer INSERT → its rows' slices
//	svc:privacy:{<db>}:repairs  ZSET pixel of an INSERT ended unsure → when (unix ms)
//
// A consumer registers each INSERT before sending it (Begin: ZADD flushes, then read
// holds and the identities generation) and ends it once the INSERT is known to be
// finished (End). The worker changes state first and reads the flushes after (Hold:
// ZADD holds, then read flushes; or register an identity, then Active). Each side
// writes before it reads, so for any INSERT either the worker sees its registration
// and waits for it (Drain), or the INSERT's registration came later and it saw the
// worker's change: the new identity (and clears it from its rows) or the hold (and
// waits). That is the whole argument; no lock is held across an INSERT.
//
// The fence also keeps what an INSERT touches until it is known to have succeeded. An
// INSERT writes its events part, then each materialized view's part on its own: no
// transaction spans them, so an INSERT that fails (the server killed mid-way, a view's
// own error) may leave events whose rollup rows were never written. Begin records the
// INSERT's slices (pixel-days) beside its registration; End (success) removes both;
// EndUnsure (failed, now over) removes only the registration. An INSERT whose slices
// are left without a live registration (ended unsure, or its consumer died) is Unsure:
// the privacy worker rebuilds its slices' rollups from the events (Repaired). Until it
// has, the pixels of an INSERT ended unsure count as held for HoldState: their rollups
// may lack events the consumer has taken for stored.
type Fence struct {
	rdb     redis.UniversalClient
	flushes string
	holds   string
	holdgen string
	inserts string
	repairs string
	// Now is the clock of leases (time.Now when nil); hosts' clocks must agree within
	// a fraction of a lease.
	Now func() time.Time
}

// NewFence returns the fence of database db.
func NewFence(rdb redis.UniversalClient, db string) *Fence {
	p := "svc:privacy:{" + db + "}:"
	return &Fence{rdb: rdb, flushes: p + "flushes", holds: p + "holds", holdgen: p + "holdgen", inserts: p + "inserts", repairs: p + "repairs"}
}

func (f *Fence) now() time.Time {
	if f.Now != nil {
		return f.Now()
	}
	return time.Now()
}

// FenceView is what a consumer learns when it registers an INSERT.
type FenceView struct {
	// Held are the pixels whose rows must not be inserted now (a rebuild of their
	// rollups is under way); the consumer ends its registration and retries shortly.
	Held map[uuid.UUID]bool
	// Generation of the identities registry: load the Set at it (Registry.Load) and
	// clear matching identities from the rows before sending the INSERT.
	Generation int64
}

// Begin registers INSERT id, whose rows are of slices, for lease (it must be ended, or
// its query gone from the server, within it) and returns the current holds and
// identities generation. The registration is acknowledged before the generation is
// read: the two keys are on different hash slots, which a Redis Cluster may serve from
// different masters, and a pipeline sends each master's part on its own, so in one
// pipeline the read could run before the write and the worker's "write, then read"
// would no longer meet ours.
func (f *Fence) Begin(ctx context.Context, id string, slices []Slice, lease time.Duration) (FenceView, error) {
	now := f.now()
	var holds *redis.StringSliceCmd
	_, err := f.rdb.Pipelined(ctx, func(p redis.Pipeliner) error { // one slot: {<db>}
		if len(slices) > 0 {
			p.HSet(ctx, f.inserts, id, encodeSlices(slices))
		}
		p.ZAdd(ctx, f.flushes, redis.Z{Score: float64(now.Add(lease).UnixMilli()), Member: id})
		holds = p.ZRangeByScore(ctx, f.holds, &redis.ZRangeBy{Min: strconv.FormatInt(now.UnixMilli(), 10), Max: "+inf"})
		return nil
	})
	if err != nil {
		return FenceView{}, fmt.Errorf("privacy: register insert: %w", err)
	}
	gen := f.rdb.Get(ctx, genKey)
	if err := gen.Err(); err != nil && !errors.Is(err, redis.Nil) {
		return FenceView{}, fmt.Errorf("privacy: register insert: %w", err)
	}
	v := FenceView{}
	for _, s := range holds.Val() {
		if u, err := uuid.Parse(s); err == nil {
			if v.Held == nil {
				v.Held = map[uuid.UUID]bool{}
			}
			v.Held[u] = true
		}
	}
	if g, err := gen.Int64(); err == nil {
		v.Generation = g
	}
	return v, nil
}

// End ends the registration of INSERTs ids: each has succeeded (or never reached the
// server), so their slices need no repair.
func (f *Fence) End(ctx context.Context, ids ...string) error {
	if len(ids) == 0 {
		return nil
	}
	_, err := f.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.ZRem(ctx, f.flushes, members(ids)...)
		p.HDel(ctx, f.inserts, ids...)
		return nil
	})
	return err
}

// EndUnsure ends the registration of INSERTs ids, each failed and over (the server no
// longer runs it), and keeps their slices for the repair: such an INSERT may have
// stored its events without some of its views' rows. The pixels of their slices stay
// marked for HoldState until the repair. (A registration that lapsed meanwhile may be
// repaired already: its slices are gone, and nothing is marked.)
func (f *Fence) EndUnsure(ctx context.Context, ids ...string) error {
	if len(ids) == 0 {
		return nil
	}
	registered, err := f.rdb.HMGet(ctx, f.inserts, ids...).Result()
	if err != nil {
		return fmt.Errorf("privacy: read unsure inserts: %w", err)
	}
	pixels := map[uuid.UUID]bool{}
	for _, v := range registered {
		if b, ok := v.(string); ok {
			ss, err := decodeSlices([]byte(b))
			if err != nil {
				return err
			}
			for _, s := range ss {
				pixels[s.Pixel] = true
			}
		}
	}
	now := float64(f.now().UnixMilli())
	_, err = f.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.ZRem(ctx, f.flushes, members(ids)...)
		for px := range pixels {
			p.ZAdd(ctx, f.repairs, redis.Z{Score: now, Member: px.String()})
		}
		return nil
	})
	return err
}

// Unsure returns the slices of every INSERT whose rollups need a repair: registered
// with slices, then ended unsure or never ended within its lease (its consumer died).
func (f *Fence) Unsure(ctx context.Context) (map[string][]Slice, error) {
	var all *redis.MapStringStringCmd
	var live *redis.StringSliceCmd
	_, err := f.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error { // one moment: no Begin or End between the reads
		all, live = f.readRegistrations(ctx, p)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("privacy: list unsure inserts: %w", err)
	}
	return unsureOf(all.Val(), live.Val())
}

// readRegistrations queues the reads of every INSERT's slices and of the live
// registrations.
func (f *Fence) readRegistrations(ctx context.Context, p redis.Cmdable) (*redis.MapStringStringCmd, *redis.StringSliceCmd) {
	return p.HGetAll(ctx, f.inserts), f.liveRegistrations(ctx, p, f.now().UnixMilli())
}

// liveRegistrations queues the read of the INSERTs registered within their lease at now
// (Unix ms).
func (f *Fence) liveRegistrations(ctx context.Context, p redis.Cmdable, now int64) *redis.StringSliceCmd {
	return p.ZRangeByScore(ctx, f.flushes, &redis.ZRangeBy{Min: strconv.FormatInt(now, 10), Max: "+inf"})
}

// unsureOf is the slices of the INSERTs of all without a live registration.
func unsureOf(all map[string]string, live []string) (map[string][]Slice, error) {
	for _, id := range live {
		delete(all, id)
	}
	out := map[string][]Slice{}
	for id, v := range all {
		ss, err := decodeSlices([]byte(v))
		if err != nil {
			return nil, err
		}
		out[id] = ss
	}
	return out, nil
}

// Open returns those of INSERTs ids that may still leave the rollups short of events
// their consumer took for stored: registered within their lease, or ended unsure (or
// lapsed) and not yet repaired.
func (f *Fence) Open(ctx context.Context, ids []string) ([]string, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	var scores *redis.FloatSliceCmd
	var slices *redis.SliceCmd
	_, err := f.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		scores = p.ZMScore(ctx, f.flushes, ids...)
		slices = p.HMGet(ctx, f.inserts, ids...)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("privacy: check registered inserts: %w", err)
	}
	now := float64(f.now().UnixMilli())
	var out []string
	for i, id := range ids {
		if scores.Val()[i] >= now || slices.Val()[i] != nil {
			out = append(out, id)
		}
	}
	return out, nil
}

// OpenNow returns every INSERT Open would keep now: registered within its lease, or
// with slices left for a repair. One read (MULTI) of both.
func (f *Fence) OpenNow(ctx context.Context) ([]string, error) {
	var live, unsure *redis.StringSliceCmd
	_, err := f.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		live = f.liveRegistrations(ctx, p, f.now().UnixMilli())
		unsure = p.HKeys(ctx, f.inserts)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("privacy: list open inserts: %w", err)
	}
	ids := append(live.Val(), unsure.Val()...)
	slices.Sort(ids)
	return slices.Compact(ids), nil
}

// Repaired forgets the slices of INSERTs ids, whose rollups were rebuilt, and unmarks
// every pixel no INSERT ended unsure still has a slice of. The unmarking is a
// transaction watching the registrations: an INSERT ended unsure meanwhile restarts it.
func (f *Fence) Repaired(ctx context.Context, ids ...string) error {
	if len(ids) > 0 {
		if err := f.rdb.HDel(ctx, f.inserts, ids...).Err(); err != nil {
			return fmt.Errorf("privacy: forget repaired inserts: %w", err)
		}
	}
	for range 10 {
		err := f.rdb.Watch(ctx, func(tx *redis.Tx) error {
			// Read outside MULTI: the watch fails the transaction if a registration
			// changed since.
			all, live := f.readRegistrations(ctx, tx)
			if err := cmp.Or(all.Err(), live.Err()); err != nil {
				return err
			}
			unsure, err := unsureOf(all.Val(), live.Val())
			if err != nil {
				return err
			}
			marked, err := tx.ZRange(ctx, f.repairs, 0, -1).Result()
			if err != nil {
				return err
			}
			still := map[string]bool{}
			for _, ss := range unsure {
				for _, s := range ss {
					still[s.Pixel.String()] = true
				}
			}
			var gone []any
			for _, px := range marked {
				if !still[px] {
					gone = append(gone, px)
				}
			}
			_, err = tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
				if len(gone) > 0 {
					p.ZRem(ctx, f.repairs, gone...)
				}
				return nil
			})
			return err
		}, f.flushes, f.inserts, f.repairs)
		if !errors.Is(err, redis.TxFailedErr) {
			if err != nil {
				return fmt.Errorf("privacy: unmark repaired pixels: %w", err)
			}
			return nil
		}
	}
	return fmt.Errorf("privacy: unmark repaired pixels: %w", redis.TxFailedErr)
}

func members(ids []string) []any {
	out := make([]any, len(ids))
	for i, id := range ids {
		out[i] = id
	}
	return out
}

// Active returns the INSERTs registered now whose lease has not ended. Call it after
// the change the consumers must see (an identity registered).
func (f *Fence) Active(ctx context.Context) ([]string, error) {
	now := f.now().UnixMilli()
	_ = f.rdb.ZRemRangeByScore(ctx, f.flushes, "-inf", strconv.FormatInt(now-int64(time.Hour/time.Millisecond), 10)).Err()
	ids, err := f.liveRegistrations(ctx, f.rdb, now).Result()
	if err != nil {
		return nil, fmt.Errorf("privacy: list registered inserts: %w", err)
	}
	return ids, nil
}

// Hold marks pixels held until lease from now and returns the INSERTs registered at
// that moment (to Drain before touching the pixels' rollups).
func (f *Fence) Hold(ctx context.Context, pixels []uuid.UUID, lease time.Duration) ([]string, error) {
	if len(pixels) > 0 {
		end := float64(f.now().Add(lease).UnixMilli())
		zs := make([]redis.Z, len(pixels))
		for i, p := range pixels {
			zs[i] = redis.Z{Score: end, Member: p.String()}
		}
		if err := f.rdb.ZAdd(ctx, f.holds, zs...).Err(); err != nil {
			return nil, fmt.Errorf("privacy: hold pixels: %w", err)
		}
		// After the ZADD: a reader that saw neither the hold nor a new generation
		// read before the hold, so before any rollup row of the pixels was deleted.
		if err := f.rdb.Incr(ctx, f.holdgen).Err(); err != nil {
			return nil, fmt.Errorf("privacy: hold pixels: %w", err)
		}
	}
	return f.Active(ctx)
}

// HoldState reports whether pixel is held now (a rebuild of its rollups may have
// deleted rows not yet inserted again, or an INSERT of its rows ended unsure and its
// rollups await the repair) and the holds' generation. A reader that finds
// the pixel not held and the same generation before and after a query read rollups
// that no rebuild had taken rows from (the completeness watermark, schema/rollups).
func (f *Fence) HoldState(ctx context.Context, pixel uuid.UUID) (held bool, gen int64, err error) {
	pipe := f.rdb.Pipeline()
	score := pipe.ZScore(ctx, f.holds, pixel.String())
	repair := pipe.ZScore(ctx, f.repairs, pixel.String())
	g := pipe.Get(ctx, f.holdgen)
	_, err = pipe.Exec(ctx)
	if err != nil && !errors.Is(err, redis.Nil) {
		return false, 0, fmt.Errorf("privacy: read holds: %w", err)
	}
	gen, _ = g.Int64()
	if s, err := score.Result(); err == nil && s >= float64(f.now().UnixMilli()) {
		held = true
	}
	if _, err := repair.Result(); err == nil {
		held = true // an INSERT of the pixel ended unsure: its rollups await a repair
	}
	return held, gen, nil
}

// Extend moves the holds of pixels to lease from now, if every one of them is still
// held; it reports false (and extends nothing) when one had lapsed, since then
// consumers may have inserted rows of that pixel meanwhile.
func (f *Fence) Extend(ctx context.Context, pixels []uuid.UUID, lease time.Duration) (bool, error) {
	now := f.now()
	scores, err := f.rdb.ZMScore(ctx, f.holds, uuidStrings(pixels)...).Result()
	if err != nil {
		return false, fmt.Errorf("privacy: check holds: %w", err)
	}
	for _, s := range scores {
		if s < float64(now.UnixMilli()) {
			return false, nil
		}
	}
	_, err = f.Hold(ctx, pixels, lease)
	return err == nil, err
}

// Release ends the holds of pixels.
func (f *Fence) Release(ctx context.Context, pixels []uuid.UUID) error {
	if len(pixels) == 0 {
		return nil
	}
	members := make([]any, len(pixels))
	for i, p := range pixels {
		members[i] = p.String()
	}
	return f.rdb.ZRem(ctx, f.holds, members...).Err()
}

func uuidStrings(us []uuid.UUID) []string {
	out := make([]string, len(us))
	for i, u := range us {
		out[i] = u.String()
	}
	return out
}

// Drain waits until every INSERT in ids has ended (left the registry, or its lease
// ran out) and ClickHouse no longer runs it, and until every consumer INSERT the
// server runs at the start of the wait has finished (one of a consumer that died after
// ending nothing). From then on, rows of INSERTs registered before the caller's change
// are stored and those of later INSERTs honour the change.
func (f *Fence) Drain(ctx context.Context, conn driver.Conn, ids []string) error {
	running, err := chpool.RunningQueries(ctx, conn, schema.InsertQueryPrefix)
	if err != nil {
		return err
	}
	wait := append(append([]string(nil), ids...), running...)
	for len(wait) > 0 {
		still, err := f.unfinished(ctx, conn, wait)
		if err != nil {
			return err
		}
		if wait = still; len(wait) == 0 {
			break
		}
		if !process.Sleep(ctx, 50*time.Millisecond) {
			return fmt.Errorf("privacy: %d consumer inserts still running: %w", len(wait), ctx.Err())
		}
	}
	return nil
}

// unfinished returns the ids still registered (with a live lease) or still running on
// the server.
func (f *Fence) unfinished(ctx context.Context, conn driver.Conn, ids []string) ([]string, error) {
	scores, err := f.rdb.ZMScore(ctx, f.flushes, ids...).Result()
	if err != nil {
		return nil, fmt.Errorf("privacy: check registered inserts: %w", err)
	}
	running, err := chpool.RunningQueries(ctx, conn, schema.InsertQueryPrefix)
	if err != nil {
		return nil, err
	}
	onServer := map[string]bool{}
	for _, id := range running {
		onServer[id] = true
	}
	now := float64(f.now().UnixMilli())
	var out []string
	for i, id := range ids {
		if onServer[id] || scores[i] >= now {
			out = append(out, id)
		}
	}
	return out, nil
}
