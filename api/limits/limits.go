// Package limits enforces each key's two windows, burst (default 120 per 60 s) and daily
// (default 10,000 per rolling 86,400 s), atomically in Redis in one round trip, and
// writes the rate-limit headers every response carries.
//
// Each window is a GCRA (generic cell rate algorithm) bucket: it holds the theoretical
// arrival time (TAT) in milliseconds. A window of quota q over w seconds admits q requests
// at once and refills one every w/q seconds; "rolling" falls out of it with one number of
// state per window. Refund rules: the daily window is checked first and a request it
// stops spends no burst; a request stopped by either window spends nothing; Refund
// gives back what an admitted request spent when it ends up rejected (4xx).
package limits

import (
	"context"
	"strconv"
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

// LuaTake defines the Lua function take(kd, kb, now, dq, dw, bq, bw, cost): the two
// windows' GCRA over the daily TAT key kd and the burst TAT key kb (windows in ms), cost
// 1 to take and -1 to refund. It returns {allowed(0/1), denied(0 none, 1 daily, 2 burst),
// retry_ms, daily TAT-now ms, burst TAT-now ms}. Other scripts (the server's one-trip
// gate) include it, so the algorithm is written once.
const LuaTake = `
local function take(kd, kb, now, dq, dw, bq, bw, cost)
  local function tat(key)
    local t = tonumber(redis.call('GET', key) or '0')
    if t < now then t = now end
    return t
  end
  local de, be = dw / dq, bw / bq
  local dt, bt = tat(kd), tat(kb)
  if cost < 0 then
    dt = math.max(now, dt - de); bt = math.max(now, bt - be)
    redis.call('SET', kd, tostring(dt), 'PX', dw + 1000)
    redis.call('SET', kb, tostring(bt), 'PX', bw + 1000)
    return {1, 0, 0, math.floor(dt - now), math.floor(bt - now)}
  end
  local ndt, nbt = dt + de, bt + be
  if ndt - now > dw then
    return {0, 1, math.ceil(ndt - now - dw), math.floor(dt - now), math.floor(bt - now)}
  end
  if nbt - now > bw then
    return {0, 2, math.ceil(nbt - now - bw), math.floor(dt - now), math.floor(bt - now)}
  end
  redis.call('SET', kd, tostring(ndt), 'PX', dw + 1000)
  redis.call('SET', kb, tostring(nbt), 'PX', bw + 1000)
  return {1, 0, 0, math.floor(ndt - now), math.floor(nbt - now)}
end
`

// takeScript: KEYS = daily TAT, burst TAT. ARGV = now ms, daily q, daily w ms, burst q,
// burst w ms, cost.
var takeScript = redis.NewScript(LuaTake + `
return take(KEYS[1], KEYS[2], tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]),
  tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6]))
`)

// Keys returns the daily and burst TAT keys of key id. Both carry the hash tag {<key
// id>}, as the key's idempotency records do (idempotency.RecordKey), so that the gate
// script touches one hash slot of a Redis Cluster.
func Keys(id string) []string { return keysFor(id) }

func keysFor(id string) []string {
	return []string{"svc:rl:{" + id + "}:daily", "svc:rl:{" + id + "}:burst"}
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

// Peek returns the windows' state without spending (GET /limits uses Take like any
// request; Peek serves tools and tests).
func (l *Limiter) Peek(ctx context.Context, id string, burst, daily Window) (Decision, error) {
	return l.run(ctx, id, burst, daily, 0)
}

func (l *Limiter) run(ctx context.Context, id string, burst, daily Window, cost int) (Decision, error) {
	now := l.Now().UnixMilli()
	args := []any{now, daily.Quota, daily.Seconds * 1000, burst.Quota, burst.Seconds * 1000, cost}
	var res []int64
	var err error
	if cost == 0 {
		res, err = l.peek(ctx, id, now, burst, daily)
	} else {
		res, err = takeScript.Run(ctx, l.rdb, keysFor(id), args...).Int64Slice()
	}
	if err != nil {
		return Decision{}, err
	}
	return DecisionOf(res, burst, daily), nil
}

// DecisionOf reads take's five results (see LuaTake) as a Decision.
func DecisionOf(res []int64, burst, daily Window) Decision {
	d := Decision{Allowed: res[0] == 1, RetryAfter: int((res[2] + 999) / 1000)}
	switch res[1] {
	case 1:
		d.Denied = "daily"
	case 2:
		d.Denied = "burst"
	}
	d.Daily = state(daily, res[3])
	d.Burst = state(burst, res[4])
	return d
}

func (l *Limiter) peek(ctx context.Context, id string, now int64, burst, daily Window) ([]int64, error) {
	vals, err := l.rdb.MGet(ctx, keysFor(id)...).Result()
	if err != nil {
		return nil, err
	}
	rel := func(v any) int64 {
		s, _ := v.(string)
		f, _ := strconv.ParseFloat(s, 64)
		if int64(f) < now {
			return 0
		}
		return int64(f) - now
	}
	return []int64{1, 0, 0, rel(vals[0]), rel(vals[1])}, nil
}

// state turns "TAT - now" into remaining requests and seconds to full.
func state(w Window, used int64) State {
	emission := float64(w.Seconds*1000) / float64(w.Quota)
	remaining := int((float64(w.Seconds*1000) - float64(used)) / emission)
	remaining = max(0, min(w.Quota, remaining))
	return State{Window: w, Remaining: remaining, Reset: int((used + 999) / 1000)}
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

// Windows returns the burst and daily windows of a key with the given quotas.
func Windows(burst, daily int) (Window, Window) {
	return Window{"burst", burst, 60}, Window{"daily", daily, 86400}
}
