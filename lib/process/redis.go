package process

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"svc/lib/settings"
)

// RedisConfig says where Redis is: a Redis Cluster by its seed addresses when Cluster
// is set, else one server by URL. Every role and admin command reads it the same way.
//
// In a cluster, keys that one script or transaction touches share a hash slot through
// a hash tag ({…} in the name): a key's rate-limit windows and its idempotency table
// ({<key id>}), a batch-claim group's table ({<topic>:<byte>}), the webhook schedule
// and its deliveries ({<prefix>sched}). Everything else is one key per command, so keys
// of different API keys, pixels and claim groups spread over every master.
type RedisConfig struct {
	// URL locates one Redis server (SVC_REDIS_URL, default redis://127.0.0.1:6379/0).
	URL string
	// Cluster holds the seed addresses (host:port) of a Redis Cluster
	// (SVC_REDIS_CLUSTER, comma-separated); when set, URL is not used.
	Cluster []string
}

// ClusterStateReloadInterval is how often a cluster client reloads the slot map while
// it has traffic.
const ClusterStateReloadInterval = time.Second

// RedisFromEnv reads SVC_REDIS_URL and SVC_REDIS_CLUSTER.
func RedisFromEnv(r *settings.Reader) RedisConfig {
	return RedisConfig{URL: r.String("SVC_REDIS_URL"), Cluster: r.List("SVC_REDIS_CLUSTER")}
}

// String names the target for messages (no credentials).
func (c RedisConfig) String() string {
	if len(c.Cluster) > 0 {
		return "redis cluster at " + strings.Join(c.Cluster, ",")
	}
	if opt, err := redis.ParseURL(c.URL); err == nil {
		return "redis at " + opt.Addr
	}
	return "redis"
}

// errRedisURL is the error of a URL that does not parse. It says nothing of the URL or
// of the parser's error, which quotes the URL (its password included) or a part of it.
var errRedisURL = errors.New("SVC_REDIS_URL is not a redis:// or rediss:// URL (redis://[user:password@]host:port[/db]; " +
	"percent-encode a password holding '/', '?', '#' or '@')")

// Validate reports seed addresses that are not host:port, or a URL that does not parse.
func (c RedisConfig) Validate() error {
	if len(c.Cluster) == 0 {
		if _, err := redis.ParseURL(c.URL); err != nil {
			return errRedisURL
		}
	}
	for _, a := range c.Cluster {
		host, port, err := net.SplitHostPort(a)
		if err != nil || host == "" || port == "" {
			return fmt.Errorf("SVC_REDIS_CLUSTER: %q is not host:port", a)
		}
	}
	return nil
}

// OpenRedis connects to the server or cluster c names, checks that it answers and that
// every node runs Redis 7 or newer. The client is go-redis's universal one: a
// *redis.Client for one server, a *redis.ClusterClient (which follows MOVED/ASK and
// reloads the slot map after a failover) for a cluster.
func OpenRedis(ctx context.Context, c RedisConfig) (redis.UniversalClient, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	rdb, err := newRedis(c)
	if err != nil {
		return nil, err
	}
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := rdb.Ping(pctx).Err(); err != nil {
		rdb.Close()
		return nil, fmt.Errorf("%s does not answer: %w", c, err)
	}
	if err := requireRedis7(pctx, rdb); err != nil {
		rdb.Close()
		return nil, fmt.Errorf("%s: %w", c, err)
	}
	return rdb, nil
}

func newRedis(c RedisConfig) (redis.UniversalClient, error) {
	const poolSize, timeout = 64, 2 * time.Second
	if len(c.Cluster) > 0 {
		opt := (&redis.UniversalOptions{
			Addrs: c.Cluster, IsClusterMode: true, PoolSize: poolSize,
			ReadTimeout: timeout, WriteTimeout: timeout, DialTimeout: timeout,
			MaxRedirects: 8, MaxRetries: 3, MinRetryBackoff: 50 * time.Millisecond, MaxRetryBackoff: 500 * time.Millisecond,
		}).Cluster()
		// A failed master answers nothing, not MOVED, so the slot map is only reloaded on
		// this clock (go-redis's default is 60 s): after a replica is promoted, commands
		// reach it within about a second more.
		opt.ClusterStateReloadInterval = ClusterStateReloadInterval
		return redis.NewClusterClient(opt), nil
	}
	opt, err := redis.ParseURL(c.URL)
	if err != nil {
		return nil, errRedisURL
	}
	opt.PoolSize = max(opt.PoolSize, poolSize)
	opt.ReadTimeout, opt.WriteTimeout = timeout, timeout
	return redis.NewClient(opt), nil
}

// EachNode calls fn on every node of rdb: the server itself, or every master and
// replica of a cluster (concurrently).
func EachNode(ctx context.Context, rdb redis.UniversalClient, fn func(ctx context.Context, node *redis.Client) error) error {
	switch c := rdb.(type) {
	case *redis.ClusterClient:
		return c.ForEachShard(ctx, fn)
	case *redis.Client:
		return fn(ctx, c)
	}
	return fmt.Errorf("unsupported redis client %T", rdb)
}

// EachMaster calls fn on every node that holds keys: the server itself, or every
// master of a cluster (concurrently). Keyspace scans go through it.
func EachMaster(ctx context.Context, rdb redis.UniversalClient, fn func(ctx context.Context, node *redis.Client) error) error {
	switch c := rdb.(type) {
	case *redis.ClusterClient:
		return c.ForEachMaster(ctx, fn)
	case *redis.Client:
		return fn(ctx, c)
	}
	return fmt.Errorf("unsupported redis client %T", rdb)
}

// requireRedis7 refuses a Redis older than 7.0 on any node: the idempotency tables
// need PEXPIRETIME. A server that hides INFO is given the benefit of the
// doubt.
func requireRedis7(ctx context.Context, rdb redis.UniversalClient) error {
	return EachNode(ctx, rdb, func(ctx context.Context, node *redis.Client) error {
		info, err := node.Info(ctx, "server").Result()
		if err != nil {
			return nil
		}
		if err := checkRedisVersion(info); err != nil {
			return fmt.Errorf("node %s: %w", node.Options().Addr, err)
		}
		return nil
	})
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

// UnlinkPattern removes every key matching pattern (SCAN on every master, UNLINK one key
// per command in pipelines, so no command spans two hash slots) and returns how many it
// removed.
func UnlinkPattern(ctx context.Context, rdb redis.UniversalClient, pattern string) (int, error) {
	var total atomic.Int64
	err := EachMaster(ctx, rdb, func(ctx context.Context, node *redis.Client) error {
		var cursor uint64
		for {
			ks, next, err := node.Scan(ctx, cursor, pattern, 5000).Result()
			if err != nil {
				return err
			}
			if err := Unlink(ctx, node, ks...); err != nil {
				return err
			}
			total.Add(int64(len(ks)))
			if cursor = next; cursor == 0 {
				return nil
			}
		}
	})
	return int(total.Load()), err
}

// Unlink removes keys with one UNLINK per key, pipelined (a cluster client sends each
// to its master): valid whatever slots the keys are in.
func Unlink(ctx context.Context, rdb redis.Cmdable, keys ...string) error {
	if len(keys) == 0 {
		return nil
	}
	_, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, k := range keys {
			p.Unlink(ctx, k)
		}
		return nil
	})
	return err
}

// RedisCheck is a readiness check that pings Redis.
func RedisCheck(rdb redis.UniversalClient) Check {
	return Check{Name: "redis", Fn: func(ctx context.Context) error { return rdb.Ping(ctx).Err() }}
}
