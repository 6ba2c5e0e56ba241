package app

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
)

// Entry is one change in the audit log: who made it, from which address, what it was,
// when (the stream entry's time).
type Entry struct {
	Time      time.Time
	Workspace uuid.UUID // uuid.Nil: a change of no one workspace (the operator's log)
	Who       string    // an email, or "svc admin (user@host)"
	Address   string    // the client address, or "local" for svc admin
	Action    string    // the admin command's name where there is one: "key revoke"
	Target    string    // the object's id: "key_…"
	Detail    string    // what changed, never a secret
}

// Audit is the audit log: one Redis stream per workspace (svc:app:audit:<uuid>) and
// one for changes of no workspace (svc:app:audit:ops), trimmed to Retention as entries
// are added. The application and `svc admin` write it; the application reads it.
type Audit struct {
	rdb       redis.UniversalClient
	Retention time.Duration
	Now       func() time.Time
	ops       string // the operator's stream: opsStream but in tests
}

// OperatorPrefix begins the label `svc admin` signs its changes with: "svc admin
// (user@host)". The application shows such a label as "svc admin" (shownWho): the
// operator's account and machine are for the operator (`svc admin audit list`), not for
// every member of a workspace.
const OperatorPrefix = "svc admin ("

// shownWho is who made a change as the application's pages show it.
func shownWho(who string) string {
	if strings.HasPrefix(who, OperatorPrefix) {
		return "svc admin"
	}
	return who
}

// opsStream is the operator's log: changes of no one workspace.
const opsStream = "svc:app:audit:ops"

// NewAudit returns the audit log over rdb, keeping entries for retention.
func NewAudit(rdb redis.UniversalClient, retention time.Duration) *Audit {
	return &Audit{rdb: rdb, Retention: retention, Now: time.Now, ops: opsStream}
}

// stream is the Redis stream of workspace ws's log (uuid.Nil: the operator's).
func (a *Audit) stream(ws uuid.UUID) string {
	if ws == uuid.Nil {
		return a.ops
	}
	return "svc:app:audit:" + ws.String()
}

// opsCap bounds the operator's log, which refused sign-ins from anyone also reach: past
// it the oldest entries go, whatever their age.
const opsCap = 100000

// Record appends e (its Time is the stream's) and drops entries past Retention (in the
// operator's log, past opsCap entries).
func (a *Audit) Record(ctx context.Context, e Entry) error {
	args := &redis.XAddArgs{Stream: a.stream(e.Workspace),
		Values: []string{"who", e.Who, "address", e.Address, "action", e.Action, "target", e.Target, "detail", e.Detail}}
	if e.Workspace == uuid.Nil {
		args.MaxLen = opsCap
	} else {
		args.MinID = strconv.FormatInt(a.Now().Add(-a.Retention).UnixMilli(), 10)
	}
	return a.rdb.XAdd(ctx, args).Err()
}

// List returns the newest n entries of workspace ws, newest first.
func (a *Audit) List(ctx context.Context, ws uuid.UUID, n int64) ([]Entry, error) {
	msgs, err := a.rdb.XRevRangeN(ctx, a.stream(ws), "+", "-", n).Result()
	if err != nil {
		return nil, err
	}
	out := make([]Entry, 0, len(msgs))
	for _, m := range msgs {
		ms, _, _ := strings.Cut(m.ID, "-")
		t, _ := strconv.ParseInt(ms, 10, 64)
		s := func(k string) string { v, _ := m.Values[k].(string); return v }
		out = append(out, Entry{Time: time.UnixMilli(t).UTC(), Workspace: ws, Who: s("who"), Address: s("address"),
			Action: s("action"), Target: s("target"), Detail: s("detail")})
	}
	return out, nil
}
