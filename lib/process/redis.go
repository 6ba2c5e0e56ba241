package process

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// OpenRedis connects to url and checks that Redis answers and is 7.0 or newer.
func OpenRedis(ctx context.Context, url string) (*redis.Client, error) {
	opt, err := redis.ParseURL(url)
	if err != nil {
		return nil, fmt.Errorf("SVC_REDIS_URL: %w", err)
	}
	opt.PoolSize = max(opt.PoolSize, 64)
	opt.ReadTimeout, opt.WriteTimeout = 2*time.Second, 2*time.Second
	rdb := redis.NewClient(opt)
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := rdb.Ping(pctx).Err(); err != nil {
		rdb.Close()
		return nil, fmt.Errorf("redis at %s does not answer: %w", opt.Addr, err)
	}
	if err := requireRedis7(pctx, rdb); err != nil {
		rdb.Close()
		return nil, fmt.Errorf("redis at %s: %w", opt.Addr, err)
	}
	return rdb, nil
}

// requireRedis7 refuses a Redis older than 7.0: the idempotency records need SET with
// both NX and GET. A server that hides INFO is given the benefit of the doubt.
func requireRedis7(ctx context.Context, rdb *redis.Client) error {
	info, err := rdb.Info(ctx, "server").Result()
	if err != nil {
		return nil
	}
	return checkRedisVersion(info)
}

// checkRedisVersion reads redis_version from an INFO server reply.
func checkRedisVersion(info string) error {
	for _, line := range strings.Split(info, "\n") {
		v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:")
		if !ok {
			continue
		}
		major, _, _ := strings.Cut(v, ".")
		if n, err := strconv.Atoi(major); err == nil && n < 7 {
			return fmt.Errorf("version %s; svc needs Redis 7.0 or newer", v)
		}
	}
	return nil
}

// RedisCheck is a readiness check that pings Redis.
func RedisCheck(rdb *redis.Client) Check {
	return Check{Name: "redis", Fn: func(ctx context.Context) error { return rdb.Ping(ctx).Err() }}
}
