package app

import (
	"context"
	"errors"
	"fmt"

	json "github.com/goccy/go-json"
	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
)

// ErrLastAdmin refuses a change that would leave a workspace without an admin.
var ErrLastAdmin = errors.New("the workspace's last admin cannot be removed or made a viewer: make someone else admin first")

// changeMemberScript sets (ARGV[2] a member's JSON) or removes (ARGV[2] "") the member
// ARGV[1] of the members hash KEYS[1], unless the member is an admin who would no longer
// be one and no other admin is left. One script: two admins demoting each other at once
// cannot both succeed.
var changeMemberScript = redis.NewScript(`
local cur = redis.call('HGET', KEYS[1], ARGV[1])
if not cur then return 'missing' end
local ok, m = pcall(cjson.decode, cur)
local admin = ok and m.role == 'admin'
local stays = false
if ARGV[2] ~= '' then
  local ok2, n = pcall(cjson.decode, ARGV[2])
  stays = ok2 and n.role == 'admin'
end
if admin and not stays then
  local admins = 0
  for _, v in ipairs(redis.call('HVALS', KEYS[1])) do
    local okv, mv = pcall(cjson.decode, v)
    if okv and mv.role == 'admin' then admins = admins + 1 end
  end
  if admins <= 1 then return 'last_admin' end
end
if ARGV[2] == '' then redis.call('HDEL', KEYS[1], ARGV[1]) else redis.call('HSET', KEYS[1], ARGV[1], ARGV[2]) end
return 'ok'
`)

// errRole is a role other than admin and viewer.
var errRole = errors.New("a role is admin or viewer")

// SetRole changes email's role in ws (ErrNotFound: not a member; ErrLastAdmin: the
// last admin would become a viewer) and returns the membership before and after.
func (u *Users) SetRole(ctx context.Context, ws uuid.UUID, email, role string) (before, after Member, err error) {
	if !validRole(role) {
		return Member{}, Member{}, fmt.Errorf("%w: %q", errRole, role)
	}
	before, err = u.Member(ctx, ws, email)
	if err != nil {
		return Member{}, Member{}, err
	}
	after = before
	after.Role = role
	b, _ := json.Marshal(after)
	return before, after, u.changeMember(ctx, ws, email, string(b))
}

// Remove ends email's membership of ws (ErrNotFound, ErrLastAdmin as SetRole). Their
// sessions in ws end at their next request, which reads the membership.
func (u *Users) Remove(ctx context.Context, ws uuid.UUID, email string) (Member, error) {
	m, err := u.Member(ctx, ws, email)
	if err != nil {
		return Member{}, err
	}
	if err := u.changeMember(ctx, ws, email, ""); err != nil {
		return Member{}, err
	}
	return m, u.rdb.SRem(ctx, personWSKey(email), ws.String()).Err()
}

func (u *Users) changeMember(ctx context.Context, ws uuid.UUID, email, member string) error {
	res, err := changeMemberScript.Run(ctx, u.rdb, []string{membersKey(ws)}, email, member).Text()
	switch {
	case err != nil:
		return err
	case res == "missing":
		return ErrNotFound
	case res == "last_admin":
		return ErrLastAdmin
	}
	return nil
}

// Forget ends every membership of email and deletes their account, so that the address
// can be invited afresh and its owner choose their own password: the way back from an
// account someone else made through a sign-in link (whoever holds a newcomer's link sets
// the password; the service sends no mail to prove who owns an address). ErrLastAdmin,
// and nothing changed, when email is a workspace's last admin. It returns the
// workspaces left. Their sessions end at their next request, which reads the membership.
func (u *Users) Forget(ctx context.Context, email string) ([]uuid.UUID, error) {
	wss, err := u.Workspaces(ctx, email)
	if err != nil {
		return nil, err
	}
	for _, ws := range wss {
		last, err := u.lastAdmin(ctx, ws, email)
		if err != nil {
			return nil, err
		}
		if last {
			return nil, fmt.Errorf("%w (workspace %s)", ErrLastAdmin, ws)
		}
	}
	var left []uuid.UUID
	for _, ws := range wss {
		if _, err := u.Remove(ctx, ws, email); errors.Is(err, ErrNotFound) {
			continue
		} else if err != nil {
			return left, err
		}
		left = append(left, ws)
	}
	return left, u.rdb.Del(ctx, personKey(email), personWSKey(email)).Err()
}

// lastAdmin reports whether email is the only admin of ws.
func (u *Users) lastAdmin(ctx context.Context, ws uuid.UUID, email string) (bool, error) {
	ms, err := u.Members(ctx, ws)
	if err != nil {
		return false, err
	}
	admins, is := 0, false
	for _, m := range ms {
		if m.Role == RoleAdmin {
			admins++
			is = is || m.Email == email
		}
	}
	return is && admins == 1, nil
}
