package webhooks

import (
	"context"
	"errors"
	"net/netip"
	"time"

	"github.com/redis/go-redis/v9"
)

// The receiver is public: anyone can post to it. Every attempt that is refused (bad
// signature, stale timestamp, unknown workspace, malformed, …) or that repeats a
// message already handled is a failure charged to the client's address, in a token
// bucket shared by every process (Redis): Config.InboundFailureBurst failures at once,
// refilled at Config.InboundFailuresPerMinute. An address whose bucket is empty gets
// 429 rate_limited with Retry-After for every message, before any other work (no
// workspace lookup, no signature check, no log row). Messages that are processed
// charge nothing, so a partner that signs correctly never empties its own bucket.
//
// The bucket is a GCRA: one value, the instant (unix ms) at which the address's
// bucket is full again ("theoretical arrival time"). A failure moves it one interval
// later; a failure that would move it more than burst intervals past now is refused.

// Throttle is one address's state: over the bound or not, and for how long.
type Throttle struct {
	Limited    bool
	RetryAfter time.Duration
}

// chargeScript charges one failure. KEYS[1]: the address's bucket. ARGV: now (unix
// ms), interval (ms per failure), burst. Returns 0 when charged, else the ms until one
// more failure fits (nothing is charged then).
var chargeScript = redis.NewScript(`
local now, step, burst = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local tat = tonumber(redis.call('GET', KEYS[1]) or '0') or 0
if tat < now then tat = now end
local over = tat + step - (now + burst * step)
if over > 0 then return over end
redis.call('SET', KEYS[1], tat + step, 'PX', tat + step - now)
return 0
`)

func (s *Store) failKey(addr string) string { return s.p + "in:fail:" + addr }

// failureAddr is the bucket an address counts against: an IPv4 address, or an IPv6
// client's /64 (what one subscriber usually holds; lib/httpserver/conns.go counts connections
// the same way).
func failureAddr(a netip.Addr) string {
	a = a.Unmap()
	if a.Is6() {
		p, _ := a.Prefix(64)
		return p.String()
	}
	return a.String()
}

// PeekFailures reports whether addr's bucket is empty, without charging it.
func (s *Store) PeekFailures(ctx context.Context, addr string, burst int, interval time.Duration) (Throttle, error) {
	tat, err := s.rdb.Get(ctx, s.failKey(addr)).Int64()
	if errors.Is(err, redis.Nil) {
		return Throttle{}, nil
	}
	if err != nil {
		return Throttle{}, err
	}
	now := s.Now().UnixMilli()
	over := max(tat, now) + interval.Milliseconds() - (now + int64(burst)*interval.Milliseconds())
	return throttle(over), nil
}

// ChargeFailure charges one failure to addr; Limited when the bucket was already empty
// (then nothing is charged).
func (s *Store) ChargeFailure(ctx context.Context, addr string, burst int, interval time.Duration) (Throttle, error) {
	over, err := chargeScript.Run(ctx, s.rdb, []string{s.failKey(addr)}, s.Now().UnixMilli(),
		interval.Milliseconds(), burst).Int64()
	if err != nil {
		return Throttle{}, err
	}
	return throttle(over), nil
}

func throttle(overMS int64) Throttle {
	if overMS <= 0 {
		return Throttle{}
	}
	return Throttle{Limited: true, RetryAfter: time.Duration(overMS) * time.Millisecond}
}
