package webhook

import (
	"context"
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

	"svc/lib/idset"
)

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

func (s *Store) epKey(id uuid.UUID) string { return s.p + "ep:" + id.String() }

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
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("the port %q is not a port: want 1 to 65535, or none", p)
		}
	}
	if len(raw) > 2048 {
		return errors.New("the URL is longer than 2048 characters")
	}
	return nil
}

// CreateEndpoint registers an endpoint for ws with a new signing secret. A URL whose host
// is an address s.Egress refuses (or localhost) is refused with its *AddressError.
func (s *Store) CreateEndpoint(ctx context.Context, ws uuid.UUID, rawURL string, kinds []string) (Endpoint, error) {
	if err := ValidateURL(rawURL); err != nil {
		return Endpoint{}, err
	}
	if err := s.Egress.CheckURL(rawURL); err != nil {
		return Endpoint{}, err
	}
	var unique []string
	for _, k := range kinds {
		if !slices.Contains(Kinds, k) {
			return Endpoint{}, fmt.Errorf("unknown event kind %q (known: %s)", k, strings.Join(Kinds, ", "))
		}
		if !slices.Contains(unique, k) { // a kind named twice is subscribed once
			unique = append(unique, k)
		}
	}
	kinds = unique
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

// RotateEndpointSecret adds a new secret to an endpoint; each other secret stays valid
// until the earlier of its expiry, if it has one, and now + overlap (a second rotation
// within an overlap does not lengthen the first). Deliveries are signed with every
// valid secret meanwhile.
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
	out, err := idset.Load(ctx, s.rdb, s.wsEpsKey(ws), ErrNotFound, s.Endpoint)
	if err != nil {
		return nil, err
	}
	sort.Slice(out, func(i, j int) bool { return out[i].CreatedAt.Before(out[j].CreatedAt) })
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

// MarkFailure records a failed attempt on the endpoint and returns the start of the
// current run of failures. A failure more than gap after the previous one starts a new
// run (an endpoint that failed once last month is not "failing for a month").
func (s *Store) MarkFailure(ctx context.Context, id uuid.UUID, at time.Time, gap time.Duration) (time.Time, error) {
	v, err := failureScript.Run(ctx, s.rdb, []string{s.epKey(id)}, at.UnixMilli(), gap.Milliseconds()).Text()
	if err != nil {
		return at, err
	}
	if t := unixMillis(v); t != nil {
		return *t, nil
	}
	return at, nil
}

// MarkSuccess ends the endpoint's run of failures.
func (s *Store) MarkSuccess(ctx context.Context, id uuid.UUID) error {
	return s.rdb.HDel(ctx, s.epKey(id), "failing_since", "last_failure").Err()
}
