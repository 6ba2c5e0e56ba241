package workspace

import (
	"context"
	"errors"
	"fmt"
	"time"

	json "github.com/goccy/go-json"
	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"svc/schema"
)

// Reporting time zones. A workspace has one (default UTC); a pixel may override it.
// The zone of a pixel's rollups is the pixel's, else its workspace's, else UTC.

// ZoneTTL bounds how stale a process's view of a pixel's zone may be. A changed zone
// applies to reads within a second: this, plus the read API's page cache, which may keep
// a page computed just before the view's refresh for twice its TTL (250 ms by default:
// fresh, then served stale while one request refreshes it).
const ZoneTTL = 500 * time.Millisecond

type cachedZone struct {
	zone    Zone
	fetched time.Time
}

// Zone is the time zone a pixel's days are in, and where it comes from.
type Zone struct {
	Name   string // IANA name
	Source string // "pixel", "workspace" or "default"
}

// checkZone accepts "" (inherit, or UTC for a workspace) and names schema.LoadZone knows.
func checkZone(name string) error {
	if name == "" {
		return nil
	}
	if _, err := schema.LoadZone(name); err != nil {
		return err
	}
	return nil
}

// EffectiveZone is the zone of a pixel of workspace w whose own zone is pixelZone.
func EffectiveZone(w Workspace, pixelZone string) Zone {
	switch {
	case pixelZone != "":
		return Zone{pixelZone, "pixel"}
	case w.TimeZone != "":
		return Zone{w.TimeZone, "workspace"}
	}
	return Zone{schema.UTC, "default"}
}

// TimeZone returns the zone of pixel's rollups, read from Redis at most ZoneTTL ago.
func (s *Store) TimeZone(ctx context.Context, pixel Pixel) (Zone, error) {
	now := s.Now()
	if v, ok := s.zones.Load(pixel.ID); ok && now.Sub(v.(cachedZone).fetched) < ZoneTTL {
		return v.(cachedZone).zone, nil
	}
	// Two GETs in one round trip (a pipeline, not MGET: the keys may live on different
	// nodes of a Redis cluster).
	var pc, wc *redis.StringCmd
	if _, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		pc, wc = p.Get(ctx, pixelKey(pixel.ID)), p.Get(ctx, wsKey(pixel.WorkspaceID))
		return nil
	}); err != nil && !errors.Is(err, redis.Nil) {
		return Zone{}, err
	}
	var px Pixel
	var w Workspace
	for _, r := range []struct {
		cmd *redis.StringCmd
		v   any
	}{{pc, &px}, {wc, &w}} {
		b, err := r.cmd.Bytes()
		if errors.Is(err, redis.Nil) {
			return Zone{}, ErrNotFound
		}
		if err != nil {
			return Zone{}, err
		}
		if err := json.Unmarshal(b, r.v); err != nil {
			return Zone{}, err
		}
	}
	z := EffectiveZone(w, px.TimeZone)
	s.zones.Store(pixel.ID, cachedZone{zone: z, fetched: now})
	return z, nil
}

// SetWorkspaceTimeZone sets workspace id's zone (a name schema.LoadZone knows).
func (s *Store) SetWorkspaceTimeZone(ctx context.Context, id uuid.UUID, zone string) (Workspace, error) {
	if zone == "" {
		return Workspace{}, errors.New("a workspace's time zone cannot be empty (UTC is the default)")
	}
	if err := checkZone(zone); err != nil {
		return Workspace{}, err
	}
	var w Workspace
	err := s.update(ctx, wsKey(id), &w, func() error { w.TimeZone = zone; return nil })
	s.zones.Clear() // this process sees the change at once, others within ZoneTTL
	return w, err
}

// SetPixelTimeZone sets pixel id's zone; "" makes it follow its workspace's again.
func (s *Store) SetPixelTimeZone(ctx context.Context, id uuid.UUID, zone string) (Pixel, error) {
	if err := checkZone(zone); err != nil {
		return Pixel{}, err
	}
	var p Pixel
	err := s.update(ctx, pixelKey(id), &p, func() error { p.TimeZone = zone; return nil })
	if err == nil {
		s.pixels.Store(id, p)
	}
	s.zones.Delete(id) // this process sees the change at once, others within ZoneTTL
	return p, err
}

// update rewrites the JSON record at key with change, optimistically (WATCH): a
// concurrent writer of the same record makes it retry rather than lose either change.
func (s *Store) update(ctx context.Context, key string, v any, change func() error) error {
	for attempt := 0; attempt < 10; attempt++ {
		err := s.rdb.Watch(ctx, func(tx *redis.Tx) error {
			b, err := tx.Get(ctx, key).Bytes()
			if errors.Is(err, redis.Nil) {
				return ErrNotFound
			}
			if err != nil {
				return err
			}
			if err := json.Unmarshal(b, v); err != nil {
				return err
			}
			if err := change(); err != nil {
				return err
			}
			nb, _ := json.Marshal(v)
			_, err = tx.TxPipelined(ctx, func(p redis.Pipeliner) error { return p.Set(ctx, key, nb, 0).Err() })
			return err
		}, key)
		if !errors.Is(err, redis.TxFailedErr) {
			return err
		}
	}
	return fmt.Errorf("%s: too many concurrent changes", key)
}
