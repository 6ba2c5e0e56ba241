package process

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Replicas makes writes survive a failover before a caller acts on them. Redis
// replicates asynchronously: a master that dies can take its last writes with it, and
// the replica promoted in its place never saw them. Replicate waits, on every master
// holding one of the keys given, until a replica has acknowledged every write that
// master had accepted when the call began (Redis's WAIT, on a connection that has just
// written: WAIT waits for the connection's own last write, and a master's replication
// stream is in order, so the writes made before it through any connection are
// included). A master with no replica connected is not waited for (nothing would be
// saved by it); the count of replicas is read at most every replicaCountTTL.
type Replicas struct {
	rdb     redis.UniversalClient
	timeout time.Duration

	mu     sync.Mutex
	counts map[string]replicaCount // master address → replicas connected
}

type replicaCount struct {
	n  int
	at time.Time
}

// replicaCountTTL is how long a master's count of replicas is trusted.
const replicaCountTTL = 5 * time.Second

// NewReplicas waits for replicas of rdb's masters, at most timeout per call (below the
// client's read timeout: a WAIT blocks its connection).
func NewReplicas(rdb redis.UniversalClient, timeout time.Duration) *Replicas {
	return &Replicas{rdb: rdb, timeout: timeout, counts: map[string]replicaCount{}}
}

// Replicate returns once a replica of each master holding one of keys has every write
// that master accepted before the call, or an error naming a master whose replicas did
// not acknowledge within the timeout.
func (r *Replicas) Replicate(ctx context.Context, keys []string) error {
	masters := map[string]*redis.Client{}
	mark := map[string]string{} // master address → a key of a hash slot it holds
	switch c := r.rdb.(type) {
	case *redis.ClusterClient:
		for _, k := range keys {
			m, err := c.MasterForKey(ctx, k)
			if err != nil {
				return err
			}
			if _, ok := masters[m.Options().Addr]; !ok {
				masters[m.Options().Addr], mark[m.Options().Addr] = m, syncKey(k)
			}
		}
	case *redis.Client:
		if len(keys) > 0 {
			masters[c.Options().Addr], mark[c.Options().Addr] = c, syncKey(keys[0])
		}
	default:
		return fmt.Errorf("unsupported redis client %T", r.rdb)
	}
	errs := make(chan error, len(masters))
	for addr, m := range masters {
		go func() { errs <- r.replicate(ctx, addr, m, mark[addr]) }()
	}
	var first error
	for range masters {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// replicate writes key on master m and waits, on the same connection, for a replica.
func (r *Replicas) replicate(ctx context.Context, addr string, m *redis.Client, key string) error {
	n, err := r.replicaCount(ctx, addr, m)
	if err != nil || n == 0 {
		return err
	}
	var acked *redis.Cmd
	_, err = m.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, key, time.Now().UnixMilli(), time.Minute)
		acked = p.Do(ctx, "WAIT", 1, r.timeout.Milliseconds())
		return nil
	})
	if err != nil {
		return err
	}
	if n, _ := acked.Int(); n < 1 {
		r.mu.Lock()
		delete(r.counts, addr) // read the replicas again next time: one may have gone
		r.mu.Unlock()
		return fmt.Errorf("redis %s: no replica acknowledged the writes within %v", addr, r.timeout)
	}
	return nil
}

func (r *Replicas) replicaCount(ctx context.Context, addr string, m *redis.Client) (int, error) {
	r.mu.Lock()
	c, ok := r.counts[addr]
	r.mu.Unlock()
	if ok && time.Since(c.at) < replicaCountTTL {
		return c.n, nil
	}
	info, err := m.Info(ctx, "replication").Result()
	if err != nil {
		return 0, err
	}
	n := 0
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "connected_slaves:"); ok {
			n, _ = strconv.Atoi(v)
		}
	}
	r.mu.Lock()
	r.counts[addr] = replicaCount{n: n, at: time.Now()}
	r.mu.Unlock()
	return n, nil
}

// syncKey is the key Replicate writes in key's hash slot: svc:sync: and key's hash tag
// (key itself when it has none).
func syncKey(key string) string {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			return "svc:sync:" + key[i:i+j+2]
		}
	}
	return "svc:sync:{" + key + "}"
}
