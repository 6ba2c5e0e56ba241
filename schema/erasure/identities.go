package erasure

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"svc/lib/process"
)

// Identity is an erased identity as the pipeline applies it: events of Workspace whose
// email hash is Email lose it when they were received at or before RequestedAt (in
// flight when the erasure was requested), and every later one too when Suppress is set.
type Identity struct {
	Workspace   uuid.UUID
	Email       [32]byte
	RequestedAt int64 // unix seconds
	Suppress    bool
}

// Applies reports whether an event received at receivedAt (unix seconds) loses the
// identity. Seconds, as received_at is stored, so the consumer and the mutation on
// stored events draw the same line.
func (i Identity) Applies(receivedAt int64) bool { return i.Suppress || receivedAt <= i.RequestedAt }

// Set is a snapshot of every registered identity, for lookups on hot paths (the edge
// per event, the consumer per row). It is immutable once built.
type Set struct {
	byWS map[uuid.UUID]map[[32]byte]Identity
	n    int
}

// Len is the number of identities in s.
func (s *Set) Len() int {
	if s == nil {
		return 0
	}
	return s.n
}

// Lookup returns the identity registered for (ws, email).
func (s *Set) Lookup(ws uuid.UUID, email [32]byte) (Identity, bool) {
	if s == nil || s.n == 0 {
		return Identity{}, false
	}
	m, ok := s.byWS[ws]
	if !ok {
		return Identity{}, false
	}
	id, ok := m[email]
	return id, ok
}

// Suppressed reports whether events of ws with email must lose it at the edge.
func (s *Set) Suppressed(ws uuid.UUID, email [32]byte) bool {
	id, ok := s.Lookup(ws, email)
	return ok && id.Suppress
}

func (s *Set) add(id Identity) {
	if s.byWS == nil {
		s.byWS = map[uuid.UUID]map[[32]byte]Identity{}
	}
	m := s.byWS[id.Workspace]
	if m == nil {
		m = map[[32]byte]Identity{}
		s.byWS[id.Workspace] = m
	}
	if _, dup := m[id.Email]; !dup {
		s.n++
	}
	m[id.Email] = id
}

// Redis layout of the registry (global: workspaces are global, like svc:ws:<uuid>;
// both keys share a hash tag, so the register script works on Redis Cluster):
//
//	svc:privacy:{ids}       HASH "<workspace uuid>:<email sha256 hex>" → "<requested unix s>:<suppress 0|1>"
//	svc:privacy:{ids}:gen   counter, incremented after every change of the hash
const (
	idsKey = "svc:privacy:{ids}"
	genKey = "svc:privacy:{ids}:gen"
)

// Registry is the set of erased identities in Redis, which the edge (suppression) and
// the consumer (events still in flight) apply. A reader keeps the last Set it loaded and
// reloads only when the generation moved.
type Registry struct {
	rdb redis.UniversalClient
	set atomic.Pointer[Set] // the last Set loaded

	mu  sync.Mutex
	gen int64 // the generation set was loaded at (-1: none yet)
}

// NewRegistry returns the registry over rdb.
func NewRegistry(rdb redis.UniversalClient) *Registry {
	r := &Registry{rdb: rdb, gen: -1}
	r.set.Store(&Set{})
	return r
}

// registerScript merges an identity into the hash (the later request time and
// suppression win: a second erasure of the same person never narrows the first) and
// bumps the generation.
var registerScript = redis.NewScript(`
local cur = redis.call('HGET', KEYS[1], ARGV[1])
local t, s = tonumber(ARGV[2]), tonumber(ARGV[3])
if cur then
  local ct, cs = string.match(cur, '^(%d+):(%d)$')
  if ct then
    t = math.max(t, tonumber(ct))
    s = math.max(s, tonumber(cs))
  end
end
redis.call('HSET', KEYS[1], ARGV[1], string.format('%d:%d', t, s))
return redis.call('INCR', KEYS[2])
`)

func field(ws uuid.UUID, email [32]byte) string {
	return ws.String() + ":" + hex.EncodeToString(email[:])
}

// Register adds (or widens) an identity. It is idempotent.
func (r *Registry) Register(ctx context.Context, id Identity) error {
	s := 0
	if id.Suppress {
		s = 1
	}
	err := registerScript.Run(ctx, r.rdb, []string{idsKey, genKey}, field(id.Workspace, id.Email),
		strconv.FormatInt(id.RequestedAt, 10), s).Err()
	if err != nil {
		return fmt.Errorf("privacy: register identity: %w", err)
	}
	return nil
}

// Generation returns the registry's current generation (0 before any change).
func (r *Registry) Generation(ctx context.Context) (int64, error) {
	g, err := r.rdb.Get(ctx, genKey).Int64()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	return g, err
}

// Current returns the last Set loaded (empty before the first Load).
func (r *Registry) Current() *Set { return r.set.Load() }

// Load returns the registry's Set as of generation gen or later: the cached one when
// it was loaded at gen already, else a fresh read of the hash.
func (r *Registry) Load(ctx context.Context, gen int64) (*Set, error) {
	r.mu.Lock()
	if gen == r.gen {
		defer r.mu.Unlock()
		return r.set.Load(), nil
	}
	r.mu.Unlock()
	all, err := r.rdb.HGetAll(ctx, idsKey).Result()
	if err != nil {
		return nil, fmt.Errorf("privacy: load identities: %w", err)
	}
	s := &Set{}
	for k, v := range all {
		if id, ok := parseEntry(k, v); ok {
			s.add(id)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if gen > r.gen {
		r.gen = gen
		r.set.Store(s)
	}
	return s, nil
}

// Refresh loads the Set if the generation moved since the last load.
func (r *Registry) Refresh(ctx context.Context) (*Set, error) {
	g, err := r.Generation(ctx)
	if err != nil {
		return nil, fmt.Errorf("privacy: identities generation: %w", err)
	}
	return r.Load(ctx, g)
}

// Run refreshes the Set every interval until ctx ends (the edge's suppression list).
// Failures keep the previous Set and are retried at the next tick.
func (r *Registry) Run(ctx context.Context, interval time.Duration, onErr func(error)) {
	process.Every(ctx, interval, func(ctx context.Context) error { _, err := r.Refresh(ctx); return err }, onErr)
}

// Prune removes identities registered without suppression whose request is older
// than keep: by then no event received before the request can still be in flight
// (Kafka keeps records 7 days). Suppressed identities stay: they are the edge's list.
func (r *Registry) Prune(ctx context.Context, now time.Time, keep time.Duration) (int, error) {
	all, err := r.rdb.HGetAll(ctx, idsKey).Result()
	if err != nil {
		return 0, err
	}
	var drop []string
	for k, v := range all {
		if id, ok := parseEntry(k, v); ok && !id.Suppress && now.Unix()-id.RequestedAt > int64(keep/time.Second) {
			drop = append(drop, k)
		}
	}
	if len(drop) == 0 {
		return 0, nil
	}
	return len(drop), r.rdb.HDel(ctx, idsKey, drop...).Err()
}

func parseEntry(k, v string) (Identity, bool) {
	wsRaw, hexEmail, ok := strings.Cut(k, ":")
	ts, sup, ok2 := strings.Cut(v, ":")
	if !ok || !ok2 {
		return Identity{}, false
	}
	ws, err := uuid.Parse(wsRaw)
	if err != nil {
		return Identity{}, false
	}
	b, err := hex.DecodeString(hexEmail)
	if err != nil || len(b) != 32 {
		return Identity{}, false
	}
	t, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return Identity{}, false
	}
	id := Identity{Workspace: ws, RequestedAt: t, Suppress: sup == "1"}
	copy(id.Email[:], b)
	return id, true
}
