package httpserver

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/valyala/fasthttp"

	"svc/lib/idempotency"
	"svc/lib/limits"
	"svc/lib/problem"
	"svc/lib/redisfn"
)

// idemState is an Idempotency-Key request's key, fingerprint and what the gate found.
type idemState struct {
	key, fp string
	outcome idempotency.Outcome
	stored  *idempotency.Stored
	res     idempotency.Reservation
	// tookUnread: the one-call gate took a request for a replay whose answer this
	// version cannot read (a newer version's, in a rolling upgrade), answered as in use;
	// the request is given back with that 409.
	tookUnread bool
}

// reserveGateLibrary holds reserve_gate, the gate of m requests in one call, of one API
// key or several. KEYS = {the records' group directories (nd), then limits.Keys of each
// API key (nk of them)}; ARGV = {m, nd, nk, now ms, the records' tables' life, every and
// skew ms, then each API key's windows (daily q, daily w ms, burst q, burst w ms:
// limits.Args without now), then for each request: two bytes, its directory's index in
// KEYS (0: none) and its key's index (1-based), and, with a directory, its record's field
// and reservation (idempotency.PendingRecord)}: what every request shares is sent once,
// and a request's indices are bytes, read without parsing a number (tonumber of a
// string is two strtod calls in Lua 5.1; bench/HISTORY.md, stop 54).
// See reserveGateArgs. For each request in order: one without a directory takes one
// request from its key's windows (a request without Idempotency-Key, or one whose key
// was reserved by a call of its own: a Redis Cluster); one with a directory reserves the
// Idempotency-Key first; a conflicting key (reuse, in use) only reads the windows, any
// other outcome takes one request from them, and a reservation the windows deny is
// dropped again: take's two calls and their order, request by request, as m calls one
// after another would. A second run of one call (the Redis client's retry after a lost
// reply: reserve finds each request's own reservation) only reads the windows of
// requests with a directory, the first run having taken them; a request without one is
// taken again, as a second run of its own call would be. The directories are read in
// one MGET, an API key's windows once a call and written once: the requests share the
// call's cost (bench/HISTORY.md, stop 53). All keys of one call must be on one Redis server (on
// a cluster: one hash slot). Returns, per request, {reserve's outcome (0 without a
// directory), its bucket or record or false, take's limits.Results values...}:
// gateValues values each.
var reserveGateLibrary = redisfn.New("reserve_gate", idempotency.LuaBuckets+idempotency.LuaRecords+limits.LuaTake+`
-- G_SLOTS are the values a call's answer starts from: {unpack(G_SLOTS, 1, 9 * m)} sizes
-- the answer's table once, where filling an empty one resizes it at every power of two.
local G_SLOTS = {}
for i = 1, 9 * 255 do G_SLOTS[i] = false end

local function reserve_gate(KEYS, ARGV)
  -- ARGV's numbers are integers the server wrote: arithmetic converts each once (x + 0),
  -- where tonumber parses it twice (Lua 5.1).
  local m, nd, nk, now = ARGV[1] + 0, ARGV[2] + 0, ARGV[3] + 0, ARGV[4] + 0
  local life, every, skew = ARGV[5] + 0, ARGV[6] + 0, ARGV[7] + 0
  local wins = {}
  for j = 1, nk do
    local a, k = 8 + (j - 1) * 4, nd + (j - 1) * 3 + 1
    local w = {k = KEYS[k], dq = ARGV[a] + 0, dw = ARGV[a + 1] + 0, bq = ARGV[a + 2] + 0,
      bw = ARGV[a + 3] + 0, ds = 0, bs = 0, spent = false}
    w.ds, w.bs = l_state(KEYS[k], KEYS[k + 1], KEYS[k + 2], now, w.dq, w.dw, w.bq, w.bw)
    wins[j] = w
  end
  local dirs = nd > 0 and redis.call('MGET', unpack(KEYS, 1, nd)) or {}
  local tables, out, p, k = {}, {unpack(G_SLOTS, 1, 9 * m)}, 8 + nk * 4, 0
  for i = 1, m do
    local d, j = string.byte(ARGV[p], 1, 2)
    local w, t, f, pv, o, v, again = wins[j], nil, nil, nil, 0, false, nil
    if d > 0 then
      f, pv = ARGV[p + 1], ARGV[p + 2]
      p = p + 3
      t = tables[d]
      if not t then
        t = r_open(KEYS[d], now, life, every, skew)
        b_load(t, dirs[d])
        tables[d] = t
      end
      o, v, again = reserve_in(t, f, pv)
    else
      p = p + 1
    end
    local cost = 1
    if o == 2 or o == 3 or again == 1 then cost = 0 end
    local allowed, denied, retry
    w.ds, w.bs, allowed, denied, retry = l_step(w.ds, w.bs, cost, w.dq, w.dw, w.bq, w.bw)
    if cost ~= 0 and allowed == 1 then w.spent = true end
    if t and o == 0 and allowed ~= 1 then unreserve_in(t, f, pv) end
    out[k + 1], out[k + 2] = o, v or false
    out[k + 3], out[k + 4], out[k + 5], out[k + 6], out[k + 7], out[k + 8], out[k + 9] =
      l_results(allowed, denied, retry, w.ds, w.bs, w.dq, w.dw, w.bq, w.bw)
    k = k + 9
  end
  for j = 1, nk do
    local w = wins[j]
    if w.spent then l_store(w.k, w.ds, w.bs, now, w.dw, w.bw, ARGV[4]) end
  end
  return out
end
`, "reserve_gate")

// take runs the gate for r: its decision, and idem's outcome when idem is not nil. An
// Idempotency-Key is reserved first (on its record's hash slot, idempotency.Store.Reserve),
// then the request taken from the windows (on its key's): a conflicting key (reuse, in
// use) spends nothing (its answer declares the windows as they stand, a read-only peek),
// and the reservation of a request the windows deny is released before it is answered.
// On one Redis server (Deps.OneServer) that is one call (reserveGate); on a cluster,
// where the record and the windows are on different masters, two, and a third to
// release.
func (s *Server) take(r *Request, burst, daily limits.Window, idem *idemState) (limits.Decision, error) {
	kid := r.Key.ID.String()
	start := time.Now()
	defer func() { s.Deps.Metrics.RedisGate.Observe(time.Since(start).Seconds()) }()
	if idem != nil && s.oneServer() {
		dec, err := s.reserveGate(r, kid, burst, daily, idem)
		if !s.refusedAcrossSlots(err) {
			return dec, err
		}
		// two calls from now on; nothing ran (Redis refuses the call whole)
	}
	if idem != nil {
		var err error
		idem.res, err = s.Deps.Idem.Reserve(r.Context(), kid, idem.key, idem.fp, r.route.TakeoverAfter, r.ID)
		if err != nil {
			return limits.Decision{}, err
		}
		idem.outcome, idem.stored = idem.res.Outcome, idem.res.Stored
		if idem.outcome == idempotency.Reuse || idem.outcome == idempotency.InUse {
			return s.Deps.Limits.Peek(r.Context(), kid, burst, daily)
		}
	}
	dec, err := s.takeWindows(kid, burst, daily)
	if idem != nil && idem.outcome == idempotency.Proceed && (err != nil || !dec.Allowed) {
		if err := s.Deps.Idem.Release(r.Context(), kid, idem.key, idem.fp, r.ID); err != nil {
			s.Deps.Log.Warn("idempotency release failed", "request_id", r.ID, "err", err.Error())
		}
	}
	return dec, err
}

// reserveGate is take for an Idempotency-Key request in one call (reserve_gate).
func (s *Server) reserveGate(r *Request, kid string, burst, daily limits.Window, idem *idemState) (limits.Decision, error) {
	c := &gateCall{kid: kid, burst: burst, daily: daily,
		rec: s.Deps.Idem.PendingRecord(kid, idem.key, idem.fp, r.route.TakeoverAfter, r.ID)}
	if err := s.gates.do(c); err != nil {
		return limits.Decision{}, err
	}
	var err error
	if idem.res, err = idempotency.ReservationOf(c.res[:2]); err != nil {
		return limits.Decision{}, err
	}
	idem.outcome, idem.stored = idem.res.Outcome, idem.res.Stored
	idem.tookUnread = c.res[0] == int64(idempotency.Replay) && idem.outcome != idempotency.Replay
	return decisionOf(c.res[2:], burst, daily)
}

// takeWindows takes one request from key kid's windows, in a reserve_gate call that
// other requests may share (gatesFor).
func (s *Server) takeWindows(kid string, burst, daily limits.Window) (limits.Decision, error) {
	one := s.oneServer()
	c := &gateCall{kid: kid, burst: burst, daily: daily}
	err := s.gatesFor(kid).do(c)
	if one && s.refusedAcrossSlots(err) { // again, in a call of the windows' slot
		c = &gateCall{kid: kid, burst: burst, daily: daily}
		err = s.gatesFor(kid).do(c)
	}
	if err != nil {
		return limits.Decision{}, err
	}
	return decisionOf(c.res[2:], burst, daily)
}

// gatesFor is the batcher of a call on key kid's windows: on one Redis server the
// server's one, which gathers every request's gate; on a cluster (or a server that
// refused keys of several slots) the batcher of the windows' hash slot, since one call
// touches one slot there.
func (s *Server) gatesFor(kid string) *gateBatcher {
	if s.oneServer() {
		return s.gates
	}
	slot := redisfn.Slot(limits.Keys(kid)[0])
	if b, ok := s.slotGates.Load(slot); ok {
		return b.(*gateBatcher)
	}
	b, _ := s.slotGates.LoadOrStore(slot, s.newGateBatcher())
	return b.(*gateBatcher)
}

// oneServer reports whether a gate call may touch keys of several hash slots: Redis is
// one server (Deps.OneServer) and has not refused such a call (refusedAcrossSlots).
func (s *Server) oneServer() bool { return s.Deps.OneServer && !s.crossSlot.Load() }

// refusedAcrossSlots reports whether err is Redis refusing a call over keys of several
// hash slots (CROSSSLOT: a cluster behind one address, a proxy); from then on every gate
// call keeps to one slot (oneServer is false), which is logged once.
func (s *Server) refusedAcrossSlots(err error) bool {
	if err == nil || !redis.HasErrorPrefix(err, "CROSSSLOT") {
		return false
	}
	if !s.crossSlot.Swap(true) {
		s.Deps.Log.Warn("redis refused a call across hash slots; the gate keeps each call to one slot from now on", "err", err.Error())
	}
	return true
}

// decisionOf reads take's limits.Results values.
func decisionOf(res []any, burst, daily limits.Window) (limits.Decision, error) {
	if len(res) < limits.Results {
		return limits.Decision{}, fmt.Errorf("gate: %d values, want %d", len(res), limits.Results)
	}
	ints := make([]int64, limits.Results)
	for i := range ints {
		ints[i], _ = res[i].(int64)
	}
	return limits.DecisionOf(ints, burst, daily), nil
}

// idempotencyKey is the request's Idempotency-Key (nil without one), or the 422 of one
// sent empty, more than once or too long, which spends nothing: a client whose key
// variable is unset, or that names two keys, would otherwise be served without the
// protection it asked for, or with one it did not choose.
func (s *Server) idempotencyKey(r *Request) ([]byte, *problem.Problem) {
	vs := r.Ctx.Request.Header.PeekAll("Idempotency-Key")
	var p *problem.Problem
	switch {
	case len(vs) == 0:
		return nil, nil
	case len(vs) > 1:
		p = problem.Invalid("The Idempotency-Key header is sent more than once.",
			problem.FieldError{Field: "Idempotency-Key", Rule: "single", Value: nil, Detail: "Send one Idempotency-Key header."})
	case len(vs[0]) == 0:
		p = problem.Invalid("The Idempotency-Key header is empty.",
			problem.FieldError{Field: "Idempotency-Key", Rule: "min_length", Value: "",
				Detail: "Send a key of 1 to 255 characters, or no Idempotency-Key header."})
	case len(vs[0]) > idempotency.MaxKeyLen:
		p = problem.Invalid("The Idempotency-Key header is too long.",
			problem.FieldError{Field: "Idempotency-Key", Rule: "max_length", Value: idempotency.MaxKeyLen})
	default:
		return vs[0], nil
	}
	r.Limits = s.peek(r, r.Key)
	return nil, p
}

// gate takes one request from the key's windows and, for an Idempotency-Key request,
// reserves the key first (take). A conflicting Idempotency-Key (reuse, in use) spends
// nothing.
func (s *Server) gate(r *Request) *problem.Problem {
	var idem *idemState
	if r.route.Idempotent {
		k, p := s.idempotencyKey(r)
		if p != nil {
			return p
		}
		// A dry run's key is checked for its shape only: it reserves nothing, stores nothing.
		if k != nil && !r.dryRun {
			idem = &idemState{key: string(k),
				fp: idempotency.Fingerprint(string(r.Ctx.Method()), stripVersion(string(r.Ctx.Path())), r.Ctx.PostBody())}
		}
	}
	b, d := limits.Windows(r.Key.Burst, r.Key.Daily)
	dec, err := s.take(r, b, d, idem)
	if err != nil {
		s.Deps.Log.Error("rate limiter failed", "request_id", r.ID, "err", err.Error())
		full := limits.Full(b, d) // the key's own policy; what is left is unknown
		r.Limits = &full
		return unavailable("the rate limiter")
	}
	r.Limits, r.idem = &dec, idem
	if dec.Allowed {
		r.charged = idem == nil || idem.outcome == idempotency.Proceed || idem.outcome == idempotency.Replay || idem.tookUnread
		return nil
	}
	var p *problem.Problem
	if dec.Denied == "daily" {
		p = problem.New(problem.QuotaExceeded, "The key's daily quota of %d requests is spent.", d.Quota)
	} else {
		p = problem.New(problem.RateLimited, "The key's burst limit of %d requests per %d s is spent.", b.Quota, b.Seconds)
	}
	p.RetryAfter = max(1, dec.RetryAfter)
	return p
}

// refundIfRejected gives back the quota of a request answered with a 4xx: the one unit
// this request's own gate took (r.charged), once. Nothing else sets r.charged, so no
// request, in-process or not, can give back a unit another request spent.
func (s *Server) refundIfRejected(r *Request) {
	st := r.Ctx.Response.StatusCode()
	if r.Limits == nil || !r.charged || st < 400 || st >= 500 {
		return
	}
	r.charged = false
	b, d := limits.Windows(r.Key.Burst, r.Key.Daily)
	dec, err := s.Deps.Limits.Refund(r.Context(), r.Key.ID.String(), b, d)
	if err != nil {
		s.Deps.Log.Warn("quota refund failed", "request_id", r.ID, "err", err.Error())
		return
	}
	dec.Allowed = true
	r.Limits = &dec
	s.rateHeaders(r.Ctx, r.Limits)
}

// idempotent runs an Idempotency-Key request whose key the gate looked up: replay,
// conflict, or run and store.
func (s *Server) idempotent(r *Request) {
	kid, in := r.Key.ID.String(), r.idem
	switch in.outcome {
	case idempotency.Reuse:
		p := problem.New(problem.IdempotencyKeyReuse, "This Idempotency-Key was used with a different request.")
		s.refused(r, p)
		s.writeProblem(r.Ctx, r.ID, r.Limits, p)
		return
	case idempotency.InUse:
		p := problem.New(problem.IdempotencyKeyInUse, "A request with this Idempotency-Key is still running.")
		p.RetryAfter = 1
		s.refused(r, p)
		s.writeProblem(r.Ctx, r.ID, r.Limits, p)
		s.refundIfRejected(r) // charged only when the one call took it for an unreadable replay
		return
	case idempotency.Replay:
		r.Raw(in.stored.Status, in.stored.ContentType, in.stored.Body)
		r.Ctx.Response.Header.Set("Idempotent-Replayed", "true")
		s.finish(r, nil)
		s.refundIfRejected(r)
		return
	}
	s.finish(r, r.route.Handle(r))
	st := r.Ctx.Response.StatusCode()
	if st >= 500 && r.pending != nil {
		go s.settle(kid, in.key, in.fp, r.pending, r.ID)
		return
	}
	if st >= 500 || st == fasthttp.StatusTooManyRequests {
		if err := s.Deps.Idem.Release(r.Context(), kid, in.key, in.fp, r.ID); err != nil {
			s.Deps.Log.Warn("idempotency release failed", "request_id", r.ID, "err", err.Error())
		}
		s.refundIfRejected(r) // a handler's 429 (the edge's brake) spends no quota
		return
	}
	// Recorded before the answer, so that a repeat sent after it always replays. If this
	// process dies between Kafka's acknowledgement and here, a repeat takes the
	// reservation over after the route's TakeoverAfter (else it lapses after PendingTTL)
	// and runs again: the consumer drops that second copy of an event batch by its batch
	// id.
	start := time.Now()
	err := s.Deps.Idem.CompleteReserved(r.Context(), in.res, kid, in.key, in.fp, idempotency.Stored{Status: st,
		ContentType: string(r.Ctx.Response.Header.ContentType()), Body: r.Ctx.Response.Body()})
	s.Deps.Metrics.RedisStore.Observe(time.Since(start).Seconds())
	if err != nil {
		s.Deps.Log.Error("idempotency completion failed", "request_id", r.ID, "err", err.Error())
	}
	s.refundIfRejected(r)
}

// settle decides an ambiguous idempotent request (reqID, the reservation's owner) once its
// outcome is known.
func (s *Server) settle(kid, key, fp string, wait func() (idempotency.Stored, bool), reqID string) {
	st, ok := wait()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var err error
	if ok {
		err = s.Deps.Idem.Complete(ctx, kid, key, fp, st)
	} else {
		err = s.Deps.Idem.Release(ctx, kid, key, fp, reqID)
	}
	if err != nil {
		s.Deps.Log.Error("idempotency settle failed", "request_id", reqID, "err", err.Error())
	}
}
