package app

import (
	"context"
	"errors"
	"time"

	json "github.com/goccy/go-json"
	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
)

// Session is a signed-in person's server-side session. Its id is the cookie's value
// (32 random bytes), stored only as its SHA-256; CSRF is the token every form of the
// session carries. The role is not here: each request reads the membership, so a
// changed or removed membership applies at once.
type Session struct {
	Email     string    `json:"email"`
	Workspace uuid.UUID `json:"workspace"`
	CSRF      string    `json:"csrf"`
	Address   string    `json:"address"`
	CreatedAt time.Time `json:"created_at"`
	ExpiresAt time.Time `json:"expires_at"`
}

// CSRFValid reports whether token is the session's CSRF token (constant time).
func (s Session) CSRFValid(token string) bool {
	return constantEqual(token, s.CSRF)
}

// Sessions keeps sessions in Redis, each under svc:app:session:<sha256 of its id> with
// a TTL of its remaining life: signing out deletes it, so the cookie opens nothing.
type Sessions struct {
	rdb redis.UniversalClient
	TTL time.Duration
	Now func() time.Time
}

// NewSessions returns the session store over rdb; sessions last ttl.
func NewSessions(rdb redis.UniversalClient, ttl time.Duration) *Sessions {
	return &Sessions{rdb: rdb, TTL: ttl, Now: time.Now}
}

func sessionKey(id string) string { return "svc:app:session:" + digestOf(id) }

// Create starts a session of email in ws from address and returns its id (the
// cookie's value, shown only here).
func (s *Sessions) Create(ctx context.Context, email string, ws uuid.UUID, address string) (string, Session, error) {
	now := s.Now().UTC().Truncate(time.Second)
	ss := Session{Email: email, Workspace: ws, CSRF: randomToken(), Address: address, CreatedAt: now, ExpiresAt: now.Add(s.TTL)}
	id := randomToken()
	b, _ := json.Marshal(ss)
	return id, ss, s.rdb.Set(ctx, sessionKey(id), b, s.TTL).Err()
}

// Get reads the session of id (ErrNotFound when it expired, was signed out or never
// was).
func (s *Sessions) Get(ctx context.Context, id string) (Session, error) {
	var ss Session
	if id == "" {
		return ss, ErrNotFound
	}
	if err := getJSON(ctx, s.rdb, sessionKey(id), &ss); err != nil {
		return ss, err
	}
	if !s.Now().Before(ss.ExpiresAt) {
		return Session{}, ErrNotFound
	}
	return ss, nil
}

// SetWorkspace moves session id to workspace ws (the caller checked the membership).
func (s *Sessions) SetWorkspace(ctx context.Context, id string, ss Session, ws uuid.UUID) error {
	ss.Workspace = ws
	b, _ := json.Marshal(ss)
	err := s.rdb.SetArgs(ctx, sessionKey(id), b, redis.SetArgs{KeepTTL: true, Mode: "XX"}).Err()
	if errors.Is(err, redis.Nil) {
		return ErrNotFound
	}
	return err
}

// Delete ends session id.
func (s *Sessions) Delete(ctx context.Context, id string) error {
	return s.rdb.Del(ctx, sessionKey(id)).Err()
}
