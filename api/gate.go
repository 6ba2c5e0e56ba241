package api

import (
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"svc/api/idempotency"
	"svc/api/limits"
)

// idemState is an Idempotency-Key request's key, fingerprint and what the gate found.
type idemState struct {
	key, fp string
	outcome idempotency.Outcome
	stored  *idempotency.Stored
}

// gateScript is the hot path's one Redis round trip: look the Idempotency-Key up (when
// KEYS[3] is given), take one request from both windows, and reserve the key when the
// request may run; a conflicting key spends nothing (its answer declares the windows as
// they stand), and a denied request reserves nothing.
// KEYS = daily state, burst state[, the key's idempotency table (idempotency.DirKey)].
// ARGV = now ms, daily q, daily w ms, burst q, burst w ms[, idempotency.Store.ReserveArgs].
// Returns take's limits.Results values (limits.LuaTake), then reserve's
// (idempotency.LuaReserve) when KEYS[3] is given.
var gateScript = redis.NewScript(limits.LuaTake + idempotency.LuaReserve + `
local now = tonumber(ARGV[1])
local function windows(cost)
  return take(KEYS[1], KEYS[2], now, tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5]), cost)
end
if #KEYS == 2 then return windows(1) end
local r = reserve(KEYS[3], now, {unpack(ARGV, 6)})
if r[1] == 2 or r[1] == 3 then
  local t = windows(0)
  t[#t + 1] = r[1]
  return t
end
local t = windows(1)
if t[1] == 0 then return t end
if r[1] == 0 then reserved() end
local n = #t
for i, v in ipairs(r) do t[n + i] = v end
return t
`)

// take runs the gate for r: its decision, and idem's outcome when idem is not nil.
func (s *Server) take(r *Request, burst, daily limits.Window, idem *idemState) (limits.Decision, error) {
	kid := r.Key.ID.String()
	keys := limits.Keys(kid)
	args := limits.Args(s.now(), burst, daily)
	if idem != nil {
		keys = append(keys, idempotency.DirKey(kid))
		args = append(args, s.Deps.Idem.ReserveArgs(idem.key, idem.fp, r.route.TakeoverAfter, r.ID)...)
	}
	start := time.Now()
	res, err := gateScript.Run(r.Context(), s.Deps.Limits.Redis(), keys, args...).Slice()
	s.Deps.Metrics.RedisGate.Observe(time.Since(start).Seconds())
	if err != nil {
		return limits.Decision{}, err
	}
	if len(res) < limits.Results {
		return limits.Decision{}, fmt.Errorf("gate: %d values, want %d", len(res), limits.Results)
	}
	ints := make([]int64, limits.Results)
	for i := range ints {
		ints[i], _ = res[i].(int64)
	}
	dec := limits.DecisionOf(ints, burst, daily)
	if idem != nil && len(res) > limits.Results {
		idem.outcome, idem.stored = idempotency.OutcomeOf(res[limits.Results:])
	}
	return dec, nil
}
