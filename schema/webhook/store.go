package webhook

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"sort"
	"time"

	json "github.com/goccy/go-json"
	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"svc/lib/ids"
)

// Store keeps the webhook state that must be shared by every process and survive
// restarts, in Redis (all keys under one prefix, SVC_WEBHOOKS_REDIS_PREFIX). This
// package holds what the webhooks role and the application share: endpoints, inbound
// secrets, events and the delivery schedule. The role's own keys (the inbound replay
// guard, the failure buckets, the log queue, the trigger state) are kept by the role
// (webhooks.Store) under the same prefix, through Redis and Prefix:
//
//	in:secrets:<ws>          HASH  secret id → {secret, created_at, expires_at}
//	in:msg:<ws>:<message id> STRING processing | processed | ignored (the role's replay guard, by id)
//	in:sig:<ws>:<digest>     STRING the same, by signed content (hex SHA-256 of "<t>.<body>")
//	in:fail:<address>        STRING refused attempts of a client address (the role's throttle)
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
	// Egress refuses endpoints at internal addresses when they are created (CheckURL);
	// the zero value allows none (Config.Egress gives the configured one).
	Egress Egress
}

// NewStore returns a Store over rdb with key prefix (normally "svc:wh:").
func NewStore(rdb redis.UniversalClient, prefix string) *Store {
	return &Store{rdb: rdb, p: prefix, Now: time.Now}
}

// Redis is the store's client, for the role's own keys.
func (s *Store) Redis() redis.UniversalClient { return s.rdb }

// Prefix is the store's key prefix, for the role's own keys.
func (s *Store) Prefix() string { return s.p }

// ErrNotFound is returned for an endpoint, event or delivery that does not exist.
var ErrNotFound = errors.New("not found")

// EventTTL is how long an event's body stays in Redis (ClickHouse keeps it after).
const EventTTL = 30 * 24 * time.Hour

// DoneTTL is how long the record of a finished delivery is kept (for redeliver).
const DoneTTL = 30 * 24 * time.Hour

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

// ---- endpoints ----

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

// EventMeta finds event id's workspace and kind: from its body in Redis, or in
// ClickHouse through the logs openLogs opens, once Redis has let it go (the body is then
// put back for the worker). An unknown event is ErrNotFound.
func (st *Store) EventMeta(ctx context.Context, openLogs func(context.Context) (*Logs, func(), error), id uuid.UUID) (uuid.UUID, string, error) {
	body, err := st.EventBody(ctx, id)
	if errors.Is(err, ErrNotFound) {
		logs, closeFn, lerr := openLogs(ctx)
		if lerr != nil {
			return uuid.Nil, "", lerr
		}
		defer closeFn()
		se, lerr := logs.Event(ctx, id)
		if errors.Is(lerr, ErrNotFound) {
			return uuid.Nil, "", fmt.Errorf("no event %s (%w)", ids.Format(ids.Event, id), ErrNotFound)
		}
		if lerr != nil {
			return uuid.Nil, "", lerr
		}
		if _, _, err := st.PutEvent(ctx, id, se.Body); err != nil {
			return uuid.Nil, "", err
		}
		return se.WorkspaceID, se.Kind, nil
	}
	if err != nil {
		return uuid.Nil, "", err
	}
	var env Envelope
	if err := json.Unmarshal(body, &env); err != nil {
		return uuid.Nil, "", fmt.Errorf("event %s: %v", ids.Format(ids.Event, id), err)
	}
	ws, err := uuid.Parse(env.WorkspaceIDUUID)
	if err != nil {
		return uuid.Nil, "", fmt.Errorf("event %s: no workspace", ids.Format(ids.Event, id))
	}
	return ws, env.Type, nil
}
