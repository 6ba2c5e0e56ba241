package webhooks

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	json "github.com/goccy/go-json"
	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
)

// Store keeps the webhook state that must be shared by every process and survive
// restarts, in Redis (all keys under Config.Prefix):
//
//	in:secrets:<ws>          HASH  secret id → {secret, created_at, expires_at}
//	in:msg:<ws>:<message id> STRING processing | processed | ignored (replay guard)
//	ep:<id>                  HASH  json (the endpoint), failing_since, disabled_at, disabled_reason
//	ws:<ws>:eps              SET   endpoint ids of a workspace
//	workspaces               SET   workspaces with at least one endpoint
//	evt:<event id>           STRING the event's exact body (kept EventTTL)
//	{sched}                  ZSET  "<endpoint id>:<event id>" → due time (unix ms)
//	{sched}:dlv:<endpoint>:<event>  HASH  attempts, round, state, token, workspace, kind, …
//	logq                     LIST  delivery-log rows waiting for ClickHouse
//	scan:*                   trigger state (last closed day scanned)
//
// The schedule and the deliveries share the hash tag {sched}, so the scripts that
// claim, finish and reschedule deliveries touch one hash slot of a Redis Cluster (one
// master holds the whole schedule; deliveries are few next to events). Every other
// command touches one key. Before the tag the two lived at schedule and dlv:…;
// MoveLegacySchedule moves what is still scheduled there.
//
// Inbound and endpoint secrets are kept as they are (an HMAC needs them) and never
// logged or put in an error.
type Store struct {
	rdb redis.UniversalClient
	p   string
	// Now is the clock (tests replace it).
	Now func() time.Time
}

// NewStore returns a Store over rdb with key prefix (normally "svc:wh:").
func NewStore(rdb redis.UniversalClient, prefix string) *Store {
	return &Store{rdb: rdb, p: prefix, Now: time.Now}
}

// ErrNotFound is returned for an endpoint, event or delivery that does not exist.
var ErrNotFound = errors.New("not found")

// EventTTL is how long an event's body stays in Redis (ClickHouse keeps it after).
const EventTTL = 30 * 24 * time.Hour

// doneTTL is how long the record of a finished delivery is kept (for redeliver).
const doneTTL = 30 * 24 * time.Hour

// NewSecret returns a new signing secret: "whsec_" and 32 random bytes, base64url.
func NewSecret() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return "whsec_" + base64.RawURLEncoding.EncodeToString(b[:])
}

// ---- inbound secrets ----

// InboundSecret is one inbound signing secret of a workspace.
type InboundSecret struct {
	ID        string     `json:"id"`
	Secret    string     `json:"secret"`
	CreatedAt time.Time  `json:"created_at"`
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
}

func (s *Store) inSecretsKey(ws uuid.UUID) string { return s.p + "in:secrets:" + ws.String() }

// IssueInboundSecret creates a new inbound secret for ws. Every other secret that is
// still valid stays valid for overlap more (or until its own earlier expiry), so a
// partner can switch without a gap. It returns the new secret and the secrets still
// valid besides it.
func (s *Store) IssueInboundSecret(ctx context.Context, ws uuid.UUID, overlap time.Duration) (InboundSecret, []InboundSecret, error) {
	now := s.Now().UTC().Truncate(time.Second)
	cur, err := s.InboundSecrets(ctx, ws)
	if err != nil {
		return InboundSecret{}, nil, err
	}
	ns := InboundSecret{ID: uuid.NewString(), Secret: NewSecret(), CreatedAt: now}
	until := now.Add(overlap)
	fields := map[string]any{}
	var others []InboundSecret
	for _, c := range cur {
		if c.ExpiresAt == nil || c.ExpiresAt.After(until) {
			c.ExpiresAt = &until
		}
		b, _ := json.Marshal(c)
		fields[c.ID] = b
		others = append(others, c)
	}
	b, _ := json.Marshal(ns)
	fields[ns.ID] = b
	if err := s.rdb.HSet(ctx, s.inSecretsKey(ws), fields).Err(); err != nil {
		return InboundSecret{}, nil, err
	}
	return ns, others, nil
}

// InboundSecrets returns ws's inbound secrets valid now, newest first; expired ones are
// removed on the way.
func (s *Store) InboundSecrets(ctx context.Context, ws uuid.UUID) ([]InboundSecret, error) {
	m, err := s.rdb.HGetAll(ctx, s.inSecretsKey(ws)).Result()
	if err != nil {
		return nil, err
	}
	now := s.Now()
	var out []InboundSecret
	var expired []string
	for id, raw := range m {
		var c InboundSecret
		if json.Unmarshal([]byte(raw), &c) != nil {
			continue
		}
		if c.ExpiresAt != nil && !now.Before(*c.ExpiresAt) {
			expired = append(expired, id)
			continue
		}
		out = append(out, c)
	}
	if len(expired) > 0 {
		_ = s.rdb.HDel(ctx, s.inSecretsKey(ws), expired...).Err()
	}
	sort.Slice(out, func(i, j int) bool { return out[i].CreatedAt.After(out[j].CreatedAt) })
	return out, nil
}

// ---- inbound replay guard ----

func (s *Store) msgKey(ws uuid.UUID, id string) string {
	return s.p + "in:msg:" + ws.String() + ":" + id
}

// Message states of the replay guard.
const (
	msgProcessing = "processing"
	msgProcessed  = "processed"
	msgIgnored    = "ignored"
)

// BeginMessage reserves message id for processing. It returns "" when reserved, or the
// state already recorded (processing, processed, ignored). The reservation lapses after
// hold if the holder dies.
func (s *Store) BeginMessage(ctx context.Context, ws uuid.UUID, id string, hold time.Duration) (string, error) {
	ok, err := s.rdb.SetNX(ctx, s.msgKey(ws, id), msgProcessing, hold).Result()
	if err != nil {
		return "", err
	}
	if ok {
		return "", nil
	}
	st, err := s.rdb.Get(ctx, s.msgKey(ws, id)).Result()
	if errors.Is(err, redis.Nil) {
		return s.BeginMessage(ctx, ws, id, hold) // lapsed in between
	}
	return st, err
}

// EndMessage records the final state of a reserved message for window.
func (s *Store) EndMessage(ctx context.Context, ws uuid.UUID, id, state string, window time.Duration) error {
	return s.rdb.Set(ctx, s.msgKey(ws, id), state, window).Err()
}

// ReleaseMessage forgets a reservation, so that a retry of the message is processed.
func (s *Store) ReleaseMessage(ctx context.Context, ws uuid.UUID, id string) error {
	return s.rdb.Del(ctx, s.msgKey(ws, id)).Err()
}

// ---- endpoints ----

// Endpoint is an outbound webhook endpoint of a workspace.
type Endpoint struct {
	ID          uuid.UUID `json:"id"`
	WorkspaceID uuid.UUID `json:"workspace_id"`
	URL         string    `json:"url"`
	// Kinds filters the event kinds delivered; empty means every kind.
	Kinds []string `json:"kinds"`
	// Secrets sign deliveries, one v1 each; more than one while a secret rotates.
	Secrets   []EndpointSecret `json:"secrets"`
	CreatedAt time.Time        `json:"created_at"`

	// State, kept beside the record (several workers update it).
	FailingSince   *time.Time `json:"-"`
	DisabledAt     *time.Time `json:"-"`
	DisabledReason string     `json:"-"`
}

// EndpointSecret is one signing secret of an endpoint.
type EndpointSecret struct {
	Secret    string     `json:"secret"`
	CreatedAt time.Time  `json:"created_at"`
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
}

// Wants reports whether the endpoint takes events of kind.
func (e *Endpoint) Wants(kind string) bool {
	return len(e.Kinds) == 0 || slices.Contains(e.Kinds, kind)
}

// Enabled reports whether deliveries go to the endpoint.
func (e *Endpoint) Enabled() bool { return e.DisabledAt == nil }

// SigningSecrets returns the secrets valid at now, as HMAC keys.
func (e *Endpoint) SigningSecrets(now time.Time) [][]byte {
	var out [][]byte
	for _, s := range e.Secrets {
		if s.ExpiresAt == nil || now.Before(*s.ExpiresAt) {
			out = append(out, []byte(s.Secret))
		}
	}
	return out
}

func (s *Store) epKey(id uuid.UUID) string    { return s.p + "ep:" + id.String() }
func (s *Store) wsEpsKey(ws uuid.UUID) string { return s.p + "ws:" + ws.String() + ":eps" }

// ValidateURL checks an endpoint URL: absolute http or https, a host, no user
// information (it would be a credential in logs).
func ValidateURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return errors.New("want an absolute http:// or https:// URL")
	}
	if u.User != nil {
		return errors.New("the URL must not carry user information; authenticate with the signature")
	}
	if u.Fragment != "" {
		return errors.New("the URL must not have a fragment")
	}
	if len(raw) > 2048 {
		return errors.New("the URL is longer than 2048 characters")
	}
	return nil
}

// CreateEndpoint registers an endpoint for ws with a new signing secret.
func (s *Store) CreateEndpoint(ctx context.Context, ws uuid.UUID, rawURL string, kinds []string) (Endpoint, error) {
	if err := ValidateURL(rawURL); err != nil {
		return Endpoint{}, err
	}
	for _, k := range kinds {
		if !slices.Contains(Kinds, k) {
			return Endpoint{}, fmt.Errorf("unknown event kind %q (known: %s)", k, strings.Join(Kinds, ", "))
		}
	}
	now := s.Now().UTC().Truncate(time.Second)
	e := Endpoint{ID: uuid.New(), WorkspaceID: ws, URL: rawURL, Kinds: kinds,
		Secrets: []EndpointSecret{{Secret: NewSecret(), CreatedAt: now}}, CreatedAt: now}
	if e.Kinds == nil {
		e.Kinds = []string{}
	}
	b, _ := json.Marshal(e)
	// One key per command, the record first: an endpoint is only found (and delivered
	// to) once it is listed, so a failure midway leaves nothing half-made in use.
	for _, step := range []func() error{
		func() error { return s.rdb.HSet(ctx, s.epKey(e.ID), "json", b).Err() },
		func() error { return s.rdb.SAdd(ctx, s.wsEpsKey(ws), e.ID.String()).Err() },
		func() error { return s.rdb.SAdd(ctx, s.p+"workspaces", ws.String()).Err() },
	} {
		if err := step(); err != nil {
			return Endpoint{}, err
		}
	}
	return e, nil
}

// RotateEndpointSecret adds a new secret to an endpoint; the others stay valid for
// overlap more. Deliveries are signed with every valid secret meanwhile.
func (s *Store) RotateEndpointSecret(ctx context.Context, id uuid.UUID, overlap time.Duration) (Endpoint, error) {
	e, err := s.Endpoint(ctx, id)
	if err != nil {
		return e, err
	}
	now := s.Now().UTC().Truncate(time.Second)
	until := now.Add(overlap)
	var keep []EndpointSecret
	for _, sec := range e.Secrets {
		if sec.ExpiresAt != nil && !now.Before(*sec.ExpiresAt) {
			continue
		}
		if sec.ExpiresAt == nil || sec.ExpiresAt.After(until) {
			sec.ExpiresAt = &until
		}
		keep = append(keep, sec)
	}
	e.Secrets = append([]EndpointSecret{{Secret: NewSecret(), CreatedAt: now}}, keep...)
	b, _ := json.Marshal(e)
	return e, s.rdb.HSet(ctx, s.epKey(e.ID), "json", b).Err()
}

// Endpoint reads one endpoint with its state.
func (s *Store) Endpoint(ctx context.Context, id uuid.UUID) (Endpoint, error) {
	m, err := s.rdb.HGetAll(ctx, s.epKey(id)).Result()
	if err != nil {
		return Endpoint{}, err
	}
	if m["json"] == "" {
		return Endpoint{}, ErrNotFound
	}
	var e Endpoint
	if err := json.Unmarshal([]byte(m["json"]), &e); err != nil {
		return Endpoint{}, fmt.Errorf("endpoint %s: %w", id, err)
	}
	e.FailingSince = unixMillis(m["failing_since"])
	e.DisabledAt = unixMillis(m["disabled_at"])
	e.DisabledReason = m["disabled_reason"]
	return e, nil
}

func unixMillis(s string) *time.Time {
	if s == "" {
		return nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return nil
	}
	t := time.UnixMilli(n).UTC()
	return &t
}

// Endpoints lists ws's endpoints, oldest first.
func (s *Store) Endpoints(ctx context.Context, ws uuid.UUID) ([]Endpoint, error) {
	idsRaw, err := s.rdb.SMembers(ctx, s.wsEpsKey(ws)).Result()
	if err != nil {
		return nil, err
	}
	out := make([]Endpoint, 0, len(idsRaw))
	for _, raw := range idsRaw {
		id, err := uuid.Parse(raw)
		if err != nil {
			continue
		}
		e, err := s.Endpoint(ctx, id)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].CreatedAt.Before(out[j].CreatedAt) })
	return out, nil
}

// Workspaces lists the workspaces that have endpoints.
func (s *Store) Workspaces(ctx context.Context) ([]uuid.UUID, error) {
	raw, err := s.rdb.SMembers(ctx, s.p+"workspaces").Result()
	if err != nil {
		return nil, err
	}
	out := make([]uuid.UUID, 0, len(raw))
	for _, r := range raw {
		if id, err := uuid.Parse(r); err == nil {
			out = append(out, id)
		}
	}
	return out, nil
}

// DisableEndpoint stops deliveries to an endpoint; it reports whether this call
// disabled it (false if it was already disabled).
func (s *Store) DisableEndpoint(ctx context.Context, id uuid.UUID, reason string) (bool, error) {
	now := strconv.FormatInt(s.Now().UnixMilli(), 10)
	ok, err := s.rdb.HSetNX(ctx, s.epKey(id), "disabled_at", now).Result()
	if err != nil || !ok {
		return false, err
	}
	return true, s.rdb.HSet(ctx, s.epKey(id), "disabled_reason", reason).Err()
}

// EnableEndpoint resumes deliveries and forgets the failure run.
func (s *Store) EnableEndpoint(ctx context.Context, id uuid.UUID) error {
	return s.rdb.HDel(ctx, s.epKey(id), "disabled_at", "disabled_reason", "failing_since", "last_failure").Err()
}

// failureScript records a failed attempt: it starts a new run of failures unless the
// previous failure is recent (within gap ms), and returns the run's start (unix ms).
// KEYS: endpoint hash. ARGV: now ms, gap ms.
var failureScript = redis.NewScript(`
local since = redis.call('HGET', KEYS[1], 'failing_since')
local last = redis.call('HGET', KEYS[1], 'last_failure')
local now = tonumber(ARGV[1])
if not since or not last or now - tonumber(last) > tonumber(ARGV[2]) then
  since = ARGV[1]
  redis.call('HSET', KEYS[1], 'failing_since', since)
end
redis.call('HSET', KEYS[1], 'last_failure', ARGV[1])
return since
`)

// markFailure records a failed attempt on the endpoint and returns the start of the
// current run of failures. A failure more than gap after the previous one starts a new
// run (an endpoint that failed once last month is not "failing for a month").
func (s *Store) markFailure(ctx context.Context, id uuid.UUID, at time.Time, gap time.Duration) (time.Time, error) {
	v, err := failureScript.Run(ctx, s.rdb, []string{s.epKey(id)}, at.UnixMilli(), gap.Milliseconds()).Text()
	if err != nil {
		return at, err
	}
	if t := unixMillis(v); t != nil {
		return *t, nil
	}
	return at, nil
}

// markSuccess ends the endpoint's run of failures.
func (s *Store) markSuccess(ctx context.Context, id uuid.UUID) error {
	return s.rdb.HDel(ctx, s.epKey(id), "failing_since", "last_failure").Err()
}

// ---- events and the delivery schedule ----

func (s *Store) evtKey(id uuid.UUID) string { return s.p + "evt:" + id.String() }
func (s *Store) schedKey() string           { return s.p + "{sched}" }
func member(ep, ev uuid.UUID) string        { return ep.String() + ":" + ev.String() }
func (s *Store) dlvPrefix() string          { return s.p + "{sched}:dlv:" }
func (s *Store) dlvKey(m string) string     { return s.dlvPrefix() + m }

// putEvent stores body under id unless it is there; it reports whether it was new and
// returns the body stored (the first one: a re-emission never changes the bytes).
func (s *Store) putEvent(ctx context.Context, id uuid.UUID, body []byte) (bool, []byte, error) {
	ok, err := s.rdb.SetNX(ctx, s.evtKey(id), body, EventTTL).Result()
	if err != nil || ok {
		return ok, body, err
	}
	old, err := s.rdb.Get(ctx, s.evtKey(id)).Bytes()
	if errors.Is(err, redis.Nil) {
		return s.putEvent(ctx, id, body)
	}
	return false, old, err
}

// eventBody returns an event's body from Redis (ErrNotFound once it has expired).
func (s *Store) eventBody(ctx context.Context, id uuid.UUID) ([]byte, error) {
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

// enqueue schedules the delivery of event ev to endpoint ep at due, once: a second
// call for the same pair does nothing and returns false.
func (s *Store) enqueue(ctx context.Context, ep, ev, ws uuid.UUID, kind string, due time.Time) (bool, error) {
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

// claim takes up to limit deliveries due at now, leased until now+lease.
func (s *Store) claim(ctx context.Context, now time.Time, lease time.Duration, limit int) ([]Claim, error) {
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

// finish ends or reschedules a claimed delivery. It returns false when the claim was
// lost (the lease ran out and another worker took the delivery).
func (s *Store) finish(ctx context.Context, c Claim, next *time.Time, state string, status int) (bool, error) {
	nx := ""
	if next != nil {
		nx = strconv.FormatInt(next.UnixMilli(), 10)
	}
	n, err := finishScript.Run(ctx, s.rdb, []string{s.schedKey(), s.dlvKey(c.Member)}, c.Member, c.Token,
		nx, state, status, int(doneTTL/time.Second)).Int()
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
		_, err = s.enqueue(ctx, ep, ev, ws, kind, due)
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

// ---- delivery-log queue (rows ClickHouse could not take yet) ----

func (s *Store) pushLog(ctx context.Context, b []byte) error {
	return s.rdb.RPush(ctx, s.p+"logq", b).Err()
}

// popLogs takes up to n queued rows (the caller pushes them back if it cannot write them).
func (s *Store) popLogs(ctx context.Context, n int) ([]string, error) {
	v, err := s.rdb.LPopCount(ctx, s.p+"logq", n).Result()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	return v, err
}

// ---- trigger state ----

func (s *Store) getState(ctx context.Context, name string) (string, error) {
	v, err := s.rdb.Get(ctx, s.p+"scan:"+name).Result()
	if errors.Is(err, redis.Nil) {
		return "", nil
	}
	return v, err
}

func (s *Store) setState(ctx context.Context, name, v string) error {
	return s.rdb.Set(ctx, s.p+"scan:"+name, v, 0).Err()
}
