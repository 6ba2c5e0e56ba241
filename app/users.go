package app

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/mail"
	"slices"
	"strings"
	"time"

	json "github.com/goccy/go-json"
	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
)

// Roles of a workspace member: an admin changes things, a viewer sees them.
const (
	RoleAdmin  = "admin"
	RoleViewer = "viewer"
)

// InviteTTL is how long a sign-in link works (once).
const InviteTTL = 24 * time.Hour

// Errors of the user store.
var (
	ErrNotFound   = errors.New("not found")
	ErrInviteGone = errors.New("this sign-in link was used or has expired")
	ErrExists     = errors.New("an account with this email exists")
)

// Person is someone who signs in: an email and, once set, the argon2id hash of their
// password. A person belongs to workspaces as a Member.
type Person struct {
	Email      string    `json:"email"`
	Password   string    `json:"password"` // PHC string (password.go); never a password
	CreatedAt  time.Time `json:"created_at"`
	PasswordAt time.Time `json:"password_at"`
}

// Member is a person's role in one workspace.
type Member struct {
	Email     string    `json:"email"`
	Role      string    `json:"role"`
	InvitedBy string    `json:"invited_by"`
	JoinedAt  time.Time `json:"joined_at"`
}

// Invite is a pending sign-in link: stored under the SHA-256 of its token only.
type Invite struct {
	Workspace uuid.UUID `json:"workspace"`
	Email     string    `json:"email"`
	Role      string    `json:"role"`
	InvitedBy string    `json:"invited_by"`
	CreatedAt time.Time `json:"created_at"`
	ExpiresAt time.Time `json:"expires_at"`
}

// Users keeps people, memberships and invites in Redis (layout in README.md). Every
// command touches one key, as the workspace store's do, so the records spread over a
// Redis Cluster.
type Users struct {
	rdb redis.UniversalClient
	Now func() time.Time
}

// NewUsers returns the user store over rdb.
func NewUsers(rdb redis.UniversalClient) *Users { return &Users{rdb: rdb, Now: time.Now} }

func personKey(email string) string   { return "svc:app:person:" + email }
func personWSKey(email string) string { return "svc:app:person:" + email + ":workspaces" }
func membersKey(ws uuid.UUID) string  { return "svc:app:ws:" + ws.String() + ":members" }
func inviteKey(digest string) string  { return "svc:app:invite:" + digest }
func (u *Users) now() time.Time       { return u.Now().UTC().Truncate(time.Second) }
func validRole(role string) bool      { return role == RoleAdmin || role == RoleViewer }
func digestOf(token string) string {
	s := sha256.Sum256([]byte(token))
	return hex.EncodeToString(s[:])
}
func randomToken() string      { return base64.RawURLEncoding.EncodeToString(randomBytes(32)) }
func randomBytes(n int) []byte { b := make([]byte, n); _, _ = rand.Read(b); return b }
func getJSON(ctx context.Context, rdb redis.Cmdable, k string, v any) error {
	b, err := rdb.Get(ctx, k).Bytes()
	if errors.Is(err, redis.Nil) {
		return ErrNotFound
	}
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// NormalEmail is email trimmed and lower-cased, or an error when it is not one address.
func NormalEmail(email string) (string, error) {
	e := strings.ToLower(strings.TrimSpace(email))
	a, err := mail.ParseAddress(e)
	if err != nil || a.Address != e || len(e) > 254 || strings.ContainsAny(e, " :") {
		return "", fmt.Errorf("%q is not an email address", email)
	}
	return e, nil
}

// Invite records a sign-in link for email to join workspace ws with role, valid for
// InviteTTL and usable once, and returns its token (32 random bytes): shown only here,
// stored only as its SHA-256.
func (u *Users) Invite(ctx context.Context, ws uuid.UUID, email, role, by string) (string, Invite, error) {
	email, err := NormalEmail(email)
	if err != nil {
		return "", Invite{}, err
	}
	if !validRole(role) {
		return "", Invite{}, fmt.Errorf("role %q: want admin or viewer", role)
	}
	if m, err := u.Member(ctx, ws, email); err == nil {
		return "", Invite{}, fmt.Errorf("%s is a member of this workspace already (%s): change a role on the members screen", email, m.Role)
	} else if !errors.Is(err, ErrNotFound) {
		return "", Invite{}, err
	}
	now := u.now()
	inv := Invite{Workspace: ws, Email: email, Role: role, InvitedBy: by, CreatedAt: now, ExpiresAt: now.Add(InviteTTL)}
	token := randomToken()
	b, _ := json.Marshal(inv)
	return token, inv, u.rdb.Set(ctx, inviteKey(digestOf(token)), b, InviteTTL).Err()
}

// PeekInvite reads the invite of token without using it (ErrInviteGone when there is
// none: used, expired or never made).
func (u *Users) PeekInvite(ctx context.Context, token string) (Invite, error) {
	var inv Invite
	err := getJSON(ctx, u.rdb, inviteKey(digestOf(token)), &inv)
	if errors.Is(err, ErrNotFound) {
		return inv, ErrInviteGone
	}
	return inv, err
}

// TakeInvite uses the invite of token: of two requests racing with one token, one gets
// it (GETDEL), the other ErrInviteGone.
func (u *Users) TakeInvite(ctx context.Context, token string) (Invite, error) {
	b, err := u.rdb.GetDel(ctx, inviteKey(digestOf(token))).Bytes()
	if errors.Is(err, redis.Nil) {
		return Invite{}, ErrInviteGone
	}
	if err != nil {
		return Invite{}, err
	}
	var inv Invite
	return inv, json.Unmarshal(b, &inv)
}

// Person reads a person (ErrNotFound when the email has no account).
func (u *Users) Person(ctx context.Context, email string) (Person, error) {
	var p Person
	return p, getJSON(ctx, u.rdb, personKey(email), &p)
}

// CreatePerson makes the account of email with password pw (checked and hashed);
// ErrExists when the email has one already.
func (u *Users) CreatePerson(ctx context.Context, email, pw string) (Person, error) {
	if err := checkPassword(pw, email); err != nil {
		return Person{}, err
	}
	h, err := hashPassword(ctx, pw)
	if err != nil {
		return Person{}, err
	}
	now := u.now()
	p := Person{Email: email, Password: h, CreatedAt: now, PasswordAt: now}
	b, _ := json.Marshal(p)
	ok, err := u.rdb.SetNX(ctx, personKey(email), b, 0).Result()
	if err == nil && !ok {
		err = ErrExists
	}
	return p, err
}

// CheckPassword reports whether pw is the password of email's account. Without an
// account it verifies against a dummy hash, so both answers take as long. A hash made
// with older parameters is replaced by one with today's.
func (u *Users) CheckPassword(ctx context.Context, email, pw string) (bool, error) {
	p, err := u.Person(ctx, email)
	if errors.Is(err, ErrNotFound) || err == nil && p.Password == "" {
		_, err := verifyPassword(ctx, dummyHash(), pw)
		return false, err
	}
	if err != nil {
		return false, err
	}
	ok, err := verifyPassword(ctx, p.Password, pw)
	if ok && err == nil && outdated(p.Password) {
		if h, herr := hashPassword(ctx, pw); herr == nil {
			p.Password = h
			b, _ := json.Marshal(p)
			_ = u.rdb.Set(ctx, personKey(email), b, 0).Err()
		}
	}
	return ok, err
}

// Join makes email a member of ws with role; a member already keeps the membership and
// role they have (a sign-in link never changes a role), which Join returns.
func (u *Users) Join(ctx context.Context, ws uuid.UUID, email, role, by string) (Member, error) {
	if !validRole(role) {
		return Member{}, fmt.Errorf("role %q: want admin or viewer", role)
	}
	m := Member{Email: email, Role: role, InvitedBy: by, JoinedAt: u.now()}
	b, _ := json.Marshal(m)
	made, err := u.rdb.HSetNX(ctx, membersKey(ws), email, b).Result()
	if err != nil {
		return Member{}, err
	}
	if !made { // a member already: a link never changes a role (SetRole does, audited, keeping an admin)
		if m, err = u.Member(ctx, ws, email); err != nil {
			return Member{}, err
		}
	}
	return m, u.rdb.SAdd(ctx, personWSKey(email), ws.String()).Err()
}

// Member reads email's membership of ws (ErrNotFound when there is none).
func (u *Users) Member(ctx context.Context, ws uuid.UUID, email string) (Member, error) {
	b, err := u.rdb.HGet(ctx, membersKey(ws), email).Bytes()
	if errors.Is(err, redis.Nil) {
		return Member{}, ErrNotFound
	}
	if err != nil {
		return Member{}, err
	}
	var m Member
	return m, json.Unmarshal(b, &m)
}

// Members lists ws's members by email.
func (u *Users) Members(ctx context.Context, ws uuid.UUID) ([]Member, error) {
	all, err := u.rdb.HGetAll(ctx, membersKey(ws)).Result()
	if err != nil {
		return nil, err
	}
	out := make([]Member, 0, len(all))
	for _, b := range all {
		var m Member
		if json.Unmarshal([]byte(b), &m) == nil {
			out = append(out, m)
		}
	}
	slices.SortFunc(out, func(a, b Member) int { return strings.Compare(a.Email, b.Email) })
	return out, nil
}

// Workspaces lists the workspaces email is a member of.
func (u *Users) Workspaces(ctx context.Context, email string) ([]uuid.UUID, error) {
	raw, err := u.rdb.SMembers(ctx, personWSKey(email)).Result()
	if err != nil {
		return nil, err
	}
	var out []uuid.UUID
	for _, s := range raw {
		if id, err := uuid.Parse(s); err == nil {
			out = append(out, id)
		}
	}
	slices.SortFunc(out, func(a, b uuid.UUID) int { return strings.Compare(a.String(), b.String()) })
	return out, nil
}
