// Package idset reads records listed by a Redis set of UUIDs (a workspace's pixels, its
// keys, its webhook endpoints): the set's members, each loaded by its own record.
package idset

import (
	"context"
	"errors"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
)

// Load returns the record load reads for each UUID in the Redis set named set, in the
// set's order. A member that is not a UUID, or whose record load reports as missing
// (an error matching missing: the record went after the set was read), is skipped; any
// other error stops the listing, so a list is never silently short.
func Load[T any](ctx context.Context, rdb redis.Cmdable, set string, missing error,
	load func(context.Context, uuid.UUID) (T, error)) ([]T, error) {
	members, err := rdb.SMembers(ctx, set).Result()
	if err != nil {
		return nil, err
	}
	out := make([]T, 0, len(members))
	for _, raw := range members {
		id, err := uuid.Parse(raw)
		if err != nil {
			continue
		}
		v, err := load(ctx, id)
		if errors.Is(err, missing) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}
