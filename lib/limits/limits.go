// Package limits enforces each key's two windows, burst (default 120 per 60 s) and daily
// (default 10,000 per rolling 86,400 s), atomically in Redis in one round trip, and
// writes the rate-limit headers every response carries.
//
// Each window is a leaky bucket that counts spent requests: its state is the count and
// the time it was written ("<spent>:<unix ms>"), and the count drains continuously at
// quota/window. A window admits a request while spent+1 <= quota: q requests at once,
// then one every w/q seconds, which is the GCRA's behaviour with one Redis value per
// window, and what makes the window rolling. The state is in requests, not in a time that
// depends on the quota, so a spent request stays spent when an administrator changes the
// quota, up or down; a window never holds more than its quota (lowering the quota below
// what was spent leaves it empty, and it refills within one window length).
//
// Refund rules: the daily window is checked first and a request it stops spends no
// burst; a request stopped by either window spends nothing; Refund gives back what an
// admitted request spent when it ends up rejected (4xx).
package limits

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Window is one quota window.
type Window struct {
	Name    string // "burst" or "daily"
	Quota   int    // requests per window
	Seconds int    // window length
}

// State is a window's state after a decision.
type State struct {
	Window
	Remaining int
	Reset     int // seconds until the window is full again
}

// Decision is the outcome of Take.
type Decision struct {
	Allowed bool
	// Denied names the window that stopped the request ("daily" or "burst"); empty
	// when allowed.
	Denied string
	// RetryAfter is the seconds to wait before the denied window admits one request.
	RetryAfter int
	Burst      State
	Daily      State
}

// Closest returns the window closest to being spent (fewest remaining as a share of its
// quota): the one RateLimit-Limit/Remaining/Reset describe.
func (d *Decision) Closest() State {
	if float64(d.Daily.Remaining)/float64(d.Daily.Quota) < float64(d.Burst.Remaining)/float64(d.Burst.Quota) {
		return d.Daily
	}
	return d.Burst
}

// Limiter takes and refunds requests against Redis.
type Limiter struct {
	rdb redis.Cmdable
	Now func() time.Time
}

// Redis returns the client the limiter uses.
func (l *Limiter) Redis() redis.Cmdable { return l.rdb }

// New returns a Limiter over rdb.
func New(rdb redis.Cmdable) *Limiter { return &Limiter{rdb: rdb, Now: time.Now} }

// LuaTake defines the Lua function take(k, kd, kb, now, dq, dw, bq, bw, cost): both
// windows of one key, whose state is the string k ("<daily spent> <burst spent> <unix
// ms>"; window lengths in ms), cost 1 to take, -1 to refund, 0 to read without writing
// (no write command runs, so it may be called from a read-only script). It returns
// Results values: {allowed (0/1), denied (0 none, 1 daily, 2 burst), retry_ms, daily
// remaining, daily ms until full, burst remaining, burst ms until full}. Other scripts
// (the server's gate) include it, so the algorithm is written once. One GET and one SET
// a request: the windows' state is one string.
//
// When k is absent the state is read from the format before, one string per window
// (kd, kb: "<spent>:<unix ms>", or a bare GCRA theoretical arrival time in ms, read
// under the current quota); such values expire within a day.
const LuaTake = `
local L_EPS = 1e-9

local function l_spent(key, q, w, now)
  local v = redis.call('GET', key)
  if not v then return 0 end
  local s, at = string.match(v, '^([^:]+):(.+)$')
  if not s then
    return math.max(0, math.min(q, ((tonumber(v) or 0) - now) * q / w))
  end
  s, at = tonumber(s) or 0, tonumber(at) or now
  if at > now then at = now end
  return math.max(0, math.min(q, s) - (now - at) * q / w)
end

local function l_state(k, kd, kb, now, dq, dw, bq, bw)
  local v = redis.call('GET', k)
  if not v then return l_spent(kd, dq, dw, now), l_spent(kb, bq, bw, now) end
  local d, b, at = string.match(v, '^(%S+) (%S+) (%S+)$')
  at = math.min(tonumber(at) or now, now)
  return math.max(0, math.min(dq, tonumber(d) or 0) - (now - at) * dq / dw),
    math.max(0, math.min(bq, tonumber(b) or 0) - (now - at) * bq / bw)
end

-- l_step: one request's cost (1 take, -1 refund, 0 read) applied to the spent counts ds,
-- bs; returns the new counts, allowed, denied, retry_ms. l_store writes the state, and
-- l_results makes take's values: a batch of requests (the server's gate) reads the state
-- once, steps each request in order, and writes it once.
local function l_step(ds, bs, cost, dq, dw, bq, bw)
  local allowed, denied, retry = 1, 0, 0
  if cost < 0 then
    ds, bs = math.max(0, ds - 1), math.max(0, bs - 1)
  elseif cost > 0 then
    if ds + 1 > dq + L_EPS then
      allowed, denied, retry = 0, 1, math.ceil((ds + 1 - dq) * dw / dq)
    elseif bs + 1 > bq + L_EPS then
      allowed, denied, retry = 0, 2, math.ceil((bs + 1 - bq) * bw / bq)
    else
      ds, bs = ds + 1, bs + 1
    end
  end
  return ds, bs, allowed, denied, retry
end

-- l_store's at is now's text when the caller has it (the digits it was sent), else nil:
-- formatting a number is a sprintf (Lua 5.1).
local function l_store(k, ds, bs, now, dw, bw, at)
  redis.call('SET', k, tostring(ds) .. ' ' .. tostring(bs) .. ' ' .. (at or string.format('%d', now)), 'PX', math.max(dw, bw) + 1000)
end

local function l_results(allowed, denied, retry, ds, bs, dq, dw, bq, bw)
  return allowed, denied, retry,
    math.floor(dq - ds + L_EPS), math.ceil(ds * dw / dq - L_EPS),
    math.floor(bq - bs + L_EPS), math.ceil(bs * bw / bq - L_EPS)
end

local function take(k, kd, kb, now, dq, dw, bq, bw, cost)
  local ds, bs = l_state(k, kd, kb, now, dq, dw, bq, bw)
  local allowed, denied, retry
  ds, bs, allowed, denied, retry = l_step(ds, bs, cost, dq, dw, bq, bw)
  if cost ~= 0 and allowed == 1 then l_store(k, ds, bs, now, dw, bw) end
  return {l_results(allowed, denied, retry, ds, bs, dq, dw, bq, bw)}
end
`

// Results is the number of values take returns.
const Results = 7

// takeScript: KEYS = Keys. ARGV = now ms, daily q, daily w ms, burst q, burst w ms, cost.
var takeScript = redis.NewScript(LuaTake + `
return take(KEYS[1], KEYS[2], KEYS[3], tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]),
  tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6]))
`)

// Keys returns the state key of key id's windows, then the daily and burst keys of the
// format before (read while the first is absent). All carry the hash tag {<key id>}, so
// a take touches one hash slot of a Redis Cluster.
func Keys(id string) []string {
	return []string{"svc:rl2:{" + id + "}", "svc:rl:{" + id + "}:daily", "svc:rl:{" + id + "}:burst"}
}

// Args returns take's ARGV for now and the windows, cost excluded.
func Args(now time.Time, burst, daily Window) []any {
	return []any{now.UnixMilli(), daily.Quota, daily.Seconds * 1000, burst.Quota, burst.Seconds * 1000}
}

// Take spends one request of key id's windows, unless either is exhausted.
func (l *Limiter) Take(ctx context.Context, id string, burst, daily Window) (Decision, error) {
	return l.run(ctx, id, burst, daily, 1)
}

// Refund gives back one request to both windows (for an admitted request that was then
// rejected with a 4xx).
func (l *Limiter) Refund(ctx context.Context, id string, burst, daily Window) (Decision, error) {
	return l.run(ctx, id, burst, daily, -1)
}

// Peek returns the windows' state without spending, in one read-only round trip: what
// a refusal made before the take (scope, version, allow-list…) declares.
func (l *Limiter) Peek(ctx context.Context, id string, burst, daily Window) (Decision, error) {
	return l.run(ctx, id, burst, daily, 0)
}

func (l *Limiter) run(ctx context.Context, id string, burst, daily Window, cost int) (Decision, error) {
	args := append(Args(l.Now(), burst, daily), cost)
	var res []int64
	var err error
	if cost == 0 {
		res, err = takeScript.RunRO(ctx, l.rdb, Keys(id), args...).Int64Slice()
	} else {
		res, err = takeScript.Run(ctx, l.rdb, Keys(id), args...).Int64Slice()
	}
	if err != nil {
		return Decision{}, err
	}
	if len(res) < Results {
		return Decision{}, fmt.Errorf("limits: take returned %d values, want %d", len(res), Results)
	}
	return DecisionOf(res, burst, daily), nil
}

// DecisionOf reads take's Results values (see LuaTake) as a Decision.
func DecisionOf(res []int64, burst, daily Window) Decision {
	d := Decision{Allowed: res[0] == 1, RetryAfter: int((res[2] + 999) / 1000)}
	switch res[1] {
	case 1:
		d.Denied = "daily"
	case 2:
		d.Denied = "burst"
	}
	d.Daily = state(daily, res[3], res[4])
	d.Burst = state(burst, res[5], res[6])
	return d
}

// state is a window's state from its remaining requests and ms until it is full.
func state(w Window, remaining, fullMs int64) State {
	return State{Window: w, Remaining: int(max(0, min(int64(w.Quota), remaining))), Reset: int((max(0, fullMs) + 999) / 1000)}
}

// Full is the state of windows nothing was spent from: what a response declares before
// a key is known (and when the limiter cannot be read).
func Full(burst, daily Window) Decision {
	return Decision{Allowed: true, Burst: State{Window: burst, Remaining: burst.Quota}, Daily: State{Window: daily, Remaining: daily.Quota}}
}

// Policy returns the RateLimit-Policy value: `"burst";q=120;w=60, "daily";q=10000;w=86400`.
func Policy(burst, daily Window) string {
	return `"` + burst.Name + `";q=` + strconv.Itoa(burst.Quota) + `;w=` + strconv.Itoa(burst.Seconds) +
		`, "` + daily.Name + `";q=` + strconv.Itoa(daily.Quota) + `;w=` + strconv.Itoa(daily.Seconds)
}

// Draft returns the IETF draft's RateLimit value: `"burst";r=..;t=.., "daily";r=..;t=..`.
func Draft(d *Decision) string {
	return `"burst";r=` + strconv.Itoa(d.Burst.Remaining) + `;t=` + strconv.Itoa(d.Burst.Reset) +
		`, "daily";r=` + strconv.Itoa(d.Daily.Remaining) + `;t=` + strconv.Itoa(d.Daily.Reset)
}

// MaxQuota bounds a window's quota: the windows' arithmetic runs in Lua's doubles, exact
// far below 2^53 but not near it, and a quota past this is no limit anyone means.
const MaxQuota = 1_000_000_000

// Windows returns the burst and daily windows of a key with the given quotas.
func Windows(burst, daily int) (Window, Window) {
	return Window{"burst", burst, 60}, Window{"daily", daily, 86400}
}

// LastTaken is when key id last spent (or was refunded) a request, read from its windows'
// state ("<daily spent> <burst spent> <unix ms>", written by every take; while that is
// absent, the daily window's string of the format before, "<spent>:<unix ms>"): nothing
// is written for it, so it costs the requests nothing. ok is false when the state is gone
// (no request within the daily window and a second: the key's TTL) or in an older format.
func (l *Limiter) LastTaken(ctx context.Context, id string) (at time.Time, ok bool, err error) {
	keys := Keys(id)
	v, err := l.rdb.Get(ctx, keys[0]).Result()
	sep := " "
	if errors.Is(err, redis.Nil) {
		v, err = l.rdb.Get(ctx, keys[1]).Result()
		sep = ":"
	}
	if errors.Is(err, redis.Nil) {
		return time.Time{}, false, nil
	}
	if err != nil {
		return time.Time{}, false, err
	}
	i := strings.LastIndex(v, sep)
	if i < 0 {
		return time.Time{}, false, nil
	}
	n, perr := strconv.ParseFloat(v[i+1:], 64)
	if perr != nil || n <= 0 {
		return time.Time{}, false, nil
	}
	return time.UnixMilli(int64(n)).UTC(), true, nil
}
