package webhook

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
)

func (s *Store) evtKey(id uuid.UUID) string { return s.p + "evt:" + id.String() }

func (s *Store) schedKey() string { return s.p + "{sched}" }

func member(ep, ev uuid.UUID) string { return ep.String() + ":" + ev.String() }

func (s *Store) dlvPrefix() string { return s.p + "{sched}:dlv:" }

func (s *Store) dlvKey(m string) string { return s.dlvPrefix() + m }

// PutEvent stores body under id unless it is there; it reports whether it was new and
// returns the body stored (the first one: a re-emission never changes the bytes).
func (s *Store) PutEvent(ctx context.Context, id uuid.UUID, body []byte) (bool, []byte, error) {
	ok, err := s.rdb.SetNX(ctx, s.evtKey(id), body, EventTTL).Result()
	if err != nil || ok {
		return ok, body, err
	}
	old, err := s.rdb.Get(ctx, s.evtKey(id)).Bytes()
	if errors.Is(err, redis.Nil) {
		return s.PutEvent(ctx, id, body)
	}
	return false, old, err
}

// EventBody returns an event's body from Redis (ErrNotFound once it has expired).
func (s *Store) EventBody(ctx context.Context, id uuid.UUID) ([]byte, error) {
	b, err := s.rdb.Get(ctx, s.evtKey(id)).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, ErrNotFound
	}
	return b, err
}

// enqueueScript creates a delivery (if it does not exist yet) and schedules it.
// KEYS: schedule, dlv hash. ARGV: member, due ms, workspace, kind, created ms.
var enqueueScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[2]) == 1 then return 0 end
redis.call('HSET', KEYS[2], 'attempts', 0, 'round', 0, 'state', 'pending', 'workspace', ARGV[3],
  'kind', ARGV[4], 'created', ARGV[5], 'next_at', ARGV[2])
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1])
return 1
`)

// Enqueue schedules the delivery of event ev to endpoint ep at due, once: a second
// call for the same pair does nothing and returns false.
func (s *Store) Enqueue(ctx context.Context, ep, ev, ws uuid.UUID, kind string, due time.Time) (bool, error) {
	m := member(ep, ev)
	n, err := enqueueScript.Run(ctx, s.rdb, []string{s.schedKey(), s.dlvKey(m)}, m, due.UnixMilli(),
		ws.String(), kind, s.Now().UnixMilli()).Int()
	return n == 1, err
}

// claimScript takes up to limit due deliveries: each is pushed to the lease's end in
// the schedule (so no other worker sees it due), its attempt counter incremented and
// a token naming this claim stored. Atomic: two workers never claim the same attempt.
// KEYS: schedule. ARGV: now ms, lease-until ms, limit, token prefix, dlv key prefix.
var claimScript = redis.NewScript(`
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[3]))
local out = {}
for _, m in ipairs(due) do
  local h = ARGV[5] .. m
  if redis.call('EXISTS', h) == 0 then
    redis.call('ZREM', KEYS[1], m)
  else
    redis.call('ZADD', KEYS[1], ARGV[2], m)
    local n = redis.call('HINCRBY', h, 'attempts', 1)
    local tok = ARGV[4] .. ':' .. n
    redis.call('HSET', h, 'token', tok, 'state', 'in_flight', 'next_at', ARGV[2])
    local r = redis.call('HMGET', h, 'round', 'workspace', 'kind')
    table.insert(out, {m, n, tok, r[1] or '0', r[2] or '', r[3] or ''})
  end
end
return out
`)

// Claim is one claimed attempt.
type Claim struct {
	Member    string
	Endpoint  uuid.UUID
	Event     uuid.UUID
	Attempt   int // 1-based, counted over the delivery's life
	Round     int // attempts made before the current round (redeliver starts a round)
	Token     string
	Workspace uuid.UUID
	Kind      string
}

// ClaimDue takes up to limit deliveries due at now, leased until now+lease.
func (s *Store) ClaimDue(ctx context.Context, now time.Time, lease time.Duration, limit int) ([]Claim, error) {
	tok := uuid.NewString()
	res, err := claimScript.Run(ctx, s.rdb, []string{s.schedKey()}, now.UnixMilli(),
		now.Add(lease).UnixMilli(), limit, tok, s.dlvPrefix()).Slice()
	if err != nil {
		if errors.Is(err, redis.Nil) {
			return nil, nil
		}
		return nil, err
	}
	out := make([]Claim, 0, len(res))
	for _, r := range res {
		row, ok := r.([]any)
		if !ok || len(row) < 6 {
			continue
		}
		m, _ := row[0].(string)
		epS, evS, _ := strings.Cut(m, ":")
		ep, err1 := uuid.Parse(epS)
		ev, err2 := uuid.Parse(evS)
		if err1 != nil || err2 != nil {
			continue
		}
		n, _ := row[1].(int64)
		t, _ := row[2].(string)
		round, _ := strconv.Atoi(fmt.Sprint(row[3]))
		ws, _ := uuid.Parse(fmt.Sprint(row[4]))
		kind, _ := row[5].(string)
		out = append(out, Claim{Member: m, Endpoint: ep, Event: ev, Attempt: int(n), Round: round,
			Token: t, Workspace: ws, Kind: kind})
	}
	return out, nil
}

// finishScript records the result of a claimed attempt, only if the claim still holds
// (its token matches): next ms reschedules, "" ends the delivery.
// KEYS: schedule, dlv hash. ARGV: member, token, next ms or "", state, status, ttl s.
var finishScript = redis.NewScript(`
if redis.call('HGET', KEYS[2], 'token') ~= ARGV[2] then return 0 end
redis.call('HDEL', KEYS[2], 'token')
redis.call('HSET', KEYS[2], 'state', ARGV[4], 'last_status', ARGV[5], 'next_at', ARGV[3])
if ARGV[3] == '' then
  redis.call('ZREM', KEYS[1], ARGV[1])
  redis.call('EXPIRE', KEYS[2], tonumber(ARGV[6]))
else
  redis.call('ZADD', KEYS[1], ARGV[3], ARGV[1])
  redis.call('PERSIST', KEYS[2])
end
return 1
`)

// Finish ends or reschedules a claimed delivery. It returns false when the claim was
// lost (the lease ran out and another worker took the delivery).
func (s *Store) Finish(ctx context.Context, c Claim, next *time.Time, state string, status int) (bool, error) {
	nx := ""
	if next != nil {
		nx = strconv.FormatInt(next.UnixMilli(), 10)
	}
	n, err := finishScript.Run(ctx, s.rdb, []string{s.schedKey(), s.dlvKey(c.Member)}, c.Member, c.Token,
		nx, state, status, int(DoneTTL/time.Second)).Int()
	return n == 1, err
}

// redeliverScript starts a new round of attempts for a delivery that is not in flight.
// KEYS: schedule, dlv hash. ARGV: member, due ms. Returns 1, 0 (unknown), -1 (in flight).
var redeliverScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[2]) == 0 then return 0 end
if redis.call('HEXISTS', KEYS[2], 'token') == 1 then return -1 end
local n = redis.call('HGET', KEYS[2], 'attempts')
redis.call('HSET', KEYS[2], 'round', n, 'state', 'pending', 'next_at', ARGV[2])
redis.call('PERSIST', KEYS[2])
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1])
return 1
`)

// ErrInFlight is returned by Redeliver for a delivery an attempt is being made on.
var ErrInFlight = errors.New("an attempt is in flight; try again in a minute")

// Redeliver schedules a new round of attempts of ev to ep, starting at due. A delivery
// that was never created (the endpoint was added after the event) is created.
func (s *Store) Redeliver(ctx context.Context, ep, ev, ws uuid.UUID, kind string, due time.Time) error {
	m := member(ep, ev)
	n, err := redeliverScript.Run(ctx, s.rdb, []string{s.schedKey(), s.dlvKey(m)}, m, due.UnixMilli()).Int()
	switch {
	case err != nil:
		return err
	case n == -1:
		return ErrInFlight
	case n == 0:
		_, err = s.Enqueue(ctx, ep, ev, ws, kind, due)
		return err
	}
	return nil
}

// Delivery is the scheduling state of one (endpoint, event) delivery.
type Delivery struct {
	Endpoint   uuid.UUID  `json:"-"`
	Event      uuid.UUID  `json:"-"`
	State      string     `json:"state"` // pending, in_flight, delivered, failed, dropped
	Attempts   int        `json:"attempts"`
	NextAt     *time.Time `json:"next_attempt_at"`
	LastStatus int        `json:"last_status"`
}

// Delivery reads the scheduling state of the delivery of ev to ep.
func (s *Store) Delivery(ctx context.Context, ep, ev uuid.UUID) (Delivery, error) {
	m, err := s.rdb.HGetAll(ctx, s.dlvKey(member(ep, ev))).Result()
	if err == nil && len(m) == 0 {
		m, err = s.legacyDelivery(ctx, member(ep, ev))
	}
	if err != nil {
		return Delivery{}, err
	}
	if len(m) == 0 {
		return Delivery{}, ErrNotFound
	}
	d := Delivery{Endpoint: ep, Event: ev, State: m["state"], NextAt: unixMillis(m["next_at"])}
	d.Attempts, _ = strconv.Atoi(m["attempts"])
	d.LastStatus, _ = strconv.Atoi(m["last_status"])
	return d, nil
}

// Due returns the number of scheduled deliveries (pending or leased).
func (s *Store) Due(ctx context.Context) (int64, error) {
	return s.rdb.ZCard(ctx, s.schedKey()).Result()
}
