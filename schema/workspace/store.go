package workspace

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"sync"
	"time"

	json "github.com/goccy/go-json"
	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"svc/lib/apikey"
	"svc/lib/idset"
	"svc/lib/limits"
)

// ErrNotFound is returned for a workspace, pixel or key that does not exist.
var ErrNotFound = errors.New("not found")

// Store reads and writes the records in Redis. Authenticate caches what it reads for
// CacheTTL, so a revocation or limit change reaches every process within CacheTTL.
//
// Every command touches one key, so the records spread over a Redis Cluster's masters
// by their own names (no hash tags). A change that writes several records writes them
// one after the other, in an order that leaves nothing usable half-made if it stops
// midway: a key's secret record, the one thing that makes a secret work, comes last.
type Store struct {
	rdb redis.UniversalClient
	// CacheTTL bounds how stale an authenticated key record may be (default 500 ms,
	// which keeps revocation under the promised one second).
	CacheTTL time.Duration
	// Now is the clock (tests may replace it).
	Now func() time.Time

	mu     sync.Mutex
	byHash map[string]cachedKey
	pixels sync.Map // uuid.UUID -> Pixel (pixels never change workspace)
	zones  sync.Map // uuid.UUID (pixel) -> cachedZone
}

type cachedKey struct {
	key     *apikey.Key
	secret  apikey.Secret
	digest  string
	fetched time.Time
}

// NewStore returns a Store over rdb.
func NewStore(rdb redis.UniversalClient) *Store {
	return &Store{rdb: rdb, CacheTTL: 500 * time.Millisecond, Now: time.Now,
		byHash: make(map[string]cachedKey)}
}

// Redis returns the client (for stores that share the connection pool).
func (s *Store) Redis() redis.UniversalClient { return s.rdb }

func wsKey(id uuid.UUID) string      { return "svc:ws:" + id.String() }
func pixelKey(id uuid.UUID) string   { return "svc:pixel:" + id.String() }
func keyKey(id uuid.UUID) string     { return "svc:key:" + id.String() }
func secretKey(digest string) string { return "svc:secret:" + digest }

func (s *Store) getJSON(ctx context.Context, k string, v any) error {
	b, err := s.rdb.Get(ctx, k).Bytes()
	if errors.Is(err, redis.Nil) {
		return ErrNotFound
	}
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

func (s *Store) now() time.Time { return s.Now().UTC().Truncate(time.Second) }

// CreateWorkspace records a new workspace.
func (s *Store) CreateWorkspace(ctx context.Context, name string, showroom bool) (Workspace, error) {
	return s.PutWorkspace(ctx, Workspace{ID: uuid.New(), Name: name, Showroom: showroom, CreatedAt: s.now()})
}

// PutWorkspace writes w as it is (deterministic seeds choose their own ids).
func (s *Store) PutWorkspace(ctx context.Context, w Workspace) (Workspace, error) {
	if w.Name == "" {
		return Workspace{}, errors.New("a workspace needs a name")
	}
	if err := checkZone(w.TimeZone); err != nil {
		return Workspace{}, err
	}
	b, _ := json.Marshal(w)
	return w, s.rdb.Set(ctx, wsKey(w.ID), b, 0).Err()
}

// Workspace reads a workspace.
func (s *Store) Workspace(ctx context.Context, id uuid.UUID) (Workspace, error) {
	var w Workspace
	return w, s.getJSON(ctx, wsKey(id), &w)
}

// CreatePixel records a new pixel in workspace ws.
func (s *Store) CreatePixel(ctx context.Context, ws uuid.UUID, name string) (Pixel, error) {
	return s.PutPixel(ctx, Pixel{ID: uuid.New(), WorkspaceID: ws, Name: name})
}

// PutPixel writes p (its workspace must exist); CreatedAt is set when zero.
func (s *Store) PutPixel(ctx context.Context, p Pixel) (Pixel, error) {
	if err := checkZone(p.TimeZone); err != nil {
		return Pixel{}, err
	}
	w, err := s.Workspace(ctx, p.WorkspaceID)
	if err != nil {
		return Pixel{}, fmt.Errorf("workspace %s: %w", p.WorkspaceID, err)
	}
	p.Showroom = w.Showroom
	if p.CreatedAt.IsZero() {
		p.CreatedAt = s.now()
	}
	b, _ := json.Marshal(p)
	if err := s.rdb.Set(ctx, pixelKey(p.ID), b, 0).Err(); err != nil {
		return Pixel{}, err
	}
	return p, s.rdb.SAdd(ctx, wsKey(p.WorkspaceID)+":pixels", p.ID.String()).Err()
}

// Pixel reads a pixel, from a process-wide cache after the first read.
func (s *Store) Pixel(ctx context.Context, id uuid.UUID) (Pixel, error) {
	if v, ok := s.pixels.Load(id); ok {
		return v.(Pixel), nil
	}
	var p Pixel
	if err := s.getJSON(ctx, pixelKey(id), &p); err != nil {
		return Pixel{}, err
	}
	s.pixels.Store(id, p)
	return p, nil
}

// Pixels lists a workspace's pixels.
func (s *Store) Pixels(ctx context.Context, ws uuid.UUID) ([]Pixel, error) {
	return idset.Load(ctx, s.rdb, wsKey(ws)+":pixels", ErrNotFound, s.Pixel)
}

// KeySpec is what an administrator chooses when creating a key.
type KeySpec struct {
	WorkspaceID uuid.UUID
	Env         string
	Scopes      []string
	ExpiresAt   *time.Time
	Allow       []string
	Version     string
	Burst       int // 0 means apikey.DefaultBurst
	Daily       int // 0 means apikey.DefaultDaily
}

// CreateKey creates a key and returns its record and its secret (shown only here).
// A sandbox key is only for a showroom workspace; a live key never for one.
func (s *Store) CreateKey(ctx context.Context, spec KeySpec) (apikey.Key, string, error) {
	w, err := s.Workspace(ctx, spec.WorkspaceID)
	if err != nil {
		return apikey.Key{}, "", fmt.Errorf("workspace %s: %w", spec.WorkspaceID, err)
	}
	switch {
	case spec.Env != apikey.Live && spec.Env != apikey.Sandbox:
		return apikey.Key{}, "", fmt.Errorf("env must be live or sandbox, not %q", spec.Env)
	case spec.Env == apikey.Sandbox && !w.Showroom:
		return apikey.Key{}, "", errors.New("a sandbox key can only be created for a showroom workspace")
	case spec.Env == apikey.Live && w.Showroom:
		return apikey.Key{}, "", errors.New("a live key cannot be created for a showroom workspace")
	}
	if err := apikey.ValidateScopes(spec.Scopes); err != nil {
		return apikey.Key{}, "", err
	}
	allow, err := apikey.ParseAllow(spec.Allow)
	if err != nil {
		return apikey.Key{}, "", err
	}
	if err := checkQuotas(spec.Burst, spec.Daily); err != nil {
		return apikey.Key{}, "", err
	}
	k := apikey.Key{ID: uuid.New(), WorkspaceID: w.ID, Env: spec.Env, Scopes: spec.Scopes,
		ExpiresAt: spec.ExpiresAt, Allow: allow, Version: spec.Version,
		Burst: orDefault(spec.Burst, apikey.DefaultBurst), Daily: orDefault(spec.Daily, apikey.DefaultDaily),
		CreatedAt: s.now()}
	secret := apikey.NewSecret(k.Env)
	kb, _ := json.Marshal(k)
	sb, _ := json.Marshal(apikey.Secret{KeyID: k.ID})
	err = inOrder(
		func() error { return s.rdb.Set(ctx, keyKey(k.ID), kb, 0).Err() },
		func() error { return s.rdb.SAdd(ctx, keyKey(k.ID)+":secrets", apikey.Digest(secret)).Err() },
		func() error { return s.rdb.SAdd(ctx, wsKey(w.ID)+":keys", k.ID.String()).Err() },
		func() error { return s.rdb.Set(ctx, secretKey(apikey.Digest(secret)), sb, 0).Err() })
	if err != nil {
		return apikey.Key{}, "", err
	}
	return k, secret, nil
}

// inOrder runs steps one after the other and stops at the first error.
func inOrder(steps ...func() error) error {
	for _, step := range steps {
		if err := step(); err != nil {
			return err
		}
	}
	return nil
}

func orDefault(v, def int) int {
	if v == 0 {
		return def
	}
	return v
}

// Key reads a key record.
func (s *Store) Key(ctx context.Context, id uuid.UUID) (apikey.Key, error) {
	var k apikey.Key
	return k, s.getJSON(ctx, keyKey(id), &k)
}

func (s *Store) putKey(ctx context.Context, k apikey.Key) error {
	b, _ := json.Marshal(k)
	return s.rdb.Set(ctx, keyKey(k.ID), b, 0).Err()
}

// Revoke marks a key revoked; every process refuses it within CacheTTL.
func (s *Store) Revoke(ctx context.Context, id uuid.UUID) (apikey.Key, error) {
	k, err := s.Key(ctx, id)
	if err != nil {
		return apikey.Key{}, err
	}
	if k.RevokedAt == nil {
		now := s.now()
		k.RevokedAt = &now
	}
	return k, s.putKey(ctx, k)
}

// checkQuotas refuses a key's quotas below 0 (0: the default, or as it is) or above
// limits.MaxQuota: every writer of a key's limits passes here.
func checkQuotas(burst, daily int) error {
	if burst < 0 || daily < 0 || burst > limits.MaxQuota || daily > limits.MaxQuota {
		return fmt.Errorf("limits are whole numbers from 1 to %d", limits.MaxQuota)
	}
	return nil
}

// SetLimits changes a key's burst and daily quotas (0 leaves one as it is).
func (s *Store) SetLimits(ctx context.Context, id uuid.UUID, burst, daily int) (apikey.Key, error) {
	if err := checkQuotas(burst, daily); err != nil {
		return apikey.Key{}, err
	}
	k, err := s.Key(ctx, id)
	if err != nil {
		return apikey.Key{}, err
	}
	k.Burst, k.Daily = orDefault(burst, k.Burst), orDefault(daily, k.Daily)
	return k, s.putKey(ctx, k)
}

// Rotate issues a new secret for key id at once. Every older secret of the key keeps
// working until now+overlap or its own earlier cutover, then answers key_expired.
func (s *Store) Rotate(ctx context.Context, id uuid.UUID, overlap time.Duration) (apikey.Key, string, time.Time, error) {
	if overlap < 0 {
		return apikey.Key{}, "", time.Time{}, errors.New("overlap must not be negative")
	}
	k, err := s.Key(ctx, id)
	if err != nil {
		return apikey.Key{}, "", time.Time{}, err
	}
	if k.RevokedAt != nil {
		return apikey.Key{}, "", time.Time{}, errors.New("a revoked key cannot be rotated")
	}
	cutover := s.now().Add(overlap)
	digests, err := s.rdb.SMembers(ctx, keyKey(id)+":secrets").Result()
	if err != nil {
		return apikey.Key{}, "", time.Time{}, err
	}
	secret := apikey.NewSecret(k.Env)
	nb, _ := json.Marshal(apikey.Secret{KeyID: k.ID})
	d := apikey.Digest(secret)
	// The new secret first: should a step below fail, the caller gets no secret and the
	// old ones keep working as they did.
	if err := s.rdb.SAdd(ctx, keyKey(id)+":secrets", d).Err(); err != nil {
		return apikey.Key{}, "", time.Time{}, err
	}
	if err := s.rdb.Set(ctx, secretKey(d), nb, 0).Err(); err != nil {
		return apikey.Key{}, "", time.Time{}, err
	}
	for _, old := range digests {
		if err := s.setCutover(ctx, old, cutover); err != nil {
			return apikey.Key{}, "", time.Time{}, err
		}
	}
	return k, secret, cutover, nil
}

// setCutover gives the secret record of digest cutover, unless it has an earlier one: a
// rotation never extends an older secret's life, and a shorter overlap ends it sooner
// (rotating with overlap 0 cuts off a leaked secret however long an earlier rotation let it
// run).
func (s *Store) setCutover(ctx context.Context, digest string, cutover time.Time) error {
	var old apikey.Secret
	if err := s.getJSON(ctx, secretKey(digest), &old); err != nil || old.CutoverAt != nil && !cutover.Before(*old.CutoverAt) {
		if errors.Is(err, ErrNotFound) {
			return nil
		}
		return err
	}
	old.CutoverAt = &cutover
	ob, _ := json.Marshal(old)
	return s.rdb.Set(ctx, secretKey(digest), ob, 0).Err()
}

// Keys lists a workspace's keys.
func (s *Store) Keys(ctx context.Context, ws uuid.UUID) ([]apikey.Key, error) {
	return idset.Load(ctx, s.rdb, wsKey(ws)+":keys", ErrNotFound, s.Key)
}

// Authenticate finds the key a secret opens. It returns apikey.ErrUnknownSecret when none does.
// The caller checks revocation, expiry and cutover (Check). The secret itself is hashed
// at once and never kept; the stored digest is compared in constant time.
func (s *Store) Authenticate(ctx context.Context, secret string) (*apikey.Key, apikey.Secret, error) {
	digest := apikey.Digest(secret)
	now := s.Now()
	s.mu.Lock()
	c, ok := s.byHash[digest]
	s.mu.Unlock()
	if ok && now.Sub(c.fetched) < s.CacheTTL && subtle.ConstantTimeCompare([]byte(c.digest), []byte(digest)) == 1 {
		return c.key, c.secret, nil
	}
	k, sec, err := s.lookup(ctx, digest)
	if errors.Is(err, ErrNotFound) {
		s.forget(digest)
		return nil, apikey.Secret{}, apikey.ErrUnknownSecret
	}
	if err != nil {
		return nil, apikey.Secret{}, err
	}
	s.mu.Lock()
	if len(s.byHash) > 100000 { // bound memory: valid keys only, but be safe
		clear(s.byHash)
	}
	s.byHash[digest] = cachedKey{key: k, secret: sec, digest: digest, fetched: now}
	s.mu.Unlock()
	return k, sec, nil
}

// lookup reads the secret record of digest, then the key record it names: two round
// trips (the records live in different hash slots of a cluster), taken once per
// CacheTTL per secret and process. ErrNotFound when either is missing.
func (s *Store) lookup(ctx context.Context, digest string) (*apikey.Key, apikey.Secret, error) {
	var sec apikey.Secret
	if err := s.getJSON(ctx, secretKey(digest), &sec); err != nil {
		return nil, apikey.Secret{}, err
	}
	k := new(apikey.Key)
	if err := s.getJSON(ctx, keyKey(sec.KeyID), k); err != nil {
		return nil, apikey.Secret{}, err
	}
	return k, sec, nil
}

func (s *Store) forget(digest string) {
	s.mu.Lock()
	delete(s.byHash, digest)
	s.mu.Unlock()
}
