package app

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"
	"github.com/valyala/fasthttp"

	"svc/lib/ids"
)

// signInData is the sign-in page's.
type signInData struct{ Email, Next, Error string }

func (a *App) signInPage(c *call) error {
	return c.render(200, "signin", "Sign in", "", signInData{Next: safeNext(c.Query("next"))})
}

// attempt is one sign-in attempt counted against its counters (attemptCounters). A
// failure leaves it counted; ok gives it back (a success, or an error that decided
// nothing), so people who sign in right never wait.
type attempt struct {
	c        *call
	counters []counter
}

// counter is one throttle counter an attempt is counted against, with its bound.
type counter struct {
	kind, subject string
	limit         int
}

// emailSpread is how many times SVC_APP_SIGNIN_ATTEMPTS an email's failures from every
// address together may reach: one address alone stops at the bound, so that nobody can
// lock an account out from one address (NIST SP 800-63B §5.2.2: throttling must not let
// an attacker deny the account's owner), while guessing from many is still bounded.
const emailSpread = 10

// attemptCounters are the counters of an attempt from addr for email ("" when none was
// given): the address's; the email's from that address; the email's from all addresses.
func (a *App) attemptCounters(addr, email string) []counter {
	cs := []counter{{"addr", addr, a.Config.AddressAttempts}}
	if email != "" {
		cs = append(cs, counter{"pair", email + " " + addr, a.Config.SignInAttempts},
			counter{"email", email, a.Config.SignInAttempts * emailSpread})
	}
	return cs
}

// throttled counts an attempt of the client's address for email against each of its
// counters; it answers 429 and returns stop when one of them is at its bound of failed
// attempts (nothing is counted then), and stop with the error when the counters failed.
func (c *call) throttled(email string) (at *attempt, stop bool, err error) {
	a, ctx := c.app, c.Context()
	cs := a.attemptCounters(c.ClientIP().String(), email)
	taken, ok := 0, true
	for ; taken < len(cs) && ok && err == nil; taken++ {
		ok, err = a.Throttle.Take(ctx, cs[taken].kind, cs[taken].subject, cs[taken].limit)
	}
	if !ok || err != nil { // the last Take counted nothing; give back those before it
		for _, ct := range cs[:taken-1] {
			_ = a.Throttle.Give(ctx, ct.kind, ct.subject)
		}
	}
	if err != nil {
		return nil, true, err
	}
	if !ok { // wait until the counter at its bound runs out, not a whole window
		full := cs[taken-1]
		left := a.Throttle.Left(ctx, full.kind, full.subject)
		c.Ctx.Response.Header.Set("Retry-After", itoa(int((left+time.Second-1)/time.Second)))
		c.message(429, "Too many attempts", "Too many failed sign-in attempts for this address or email. Wait a few minutes and try again.")
		return nil, true, nil
	}
	return &attempt{c: c, counters: cs}, false, nil
}

// ok gives the attempt back: it succeeded, or an error decided nothing.
func (at *attempt) ok() {
	a, ctx := at.c.app, at.c.Context()
	for _, ct := range at.counters {
		if err := a.Throttle.Give(ctx, ct.kind, ct.subject); err != nil {
			a.Log.Warn("sign-in throttle: give back failed", "err", err.Error())
		}
	}
}

// signIn checks email and password (throttled per address and per email) and starts a
// session in the person's first workspace.
func (a *App) signIn(c *call) error {
	ctx := c.Context()
	next := safeNext(c.form.Get("next"))
	email, err := NormalEmail(c.form.Get("email"))
	if err != nil {
		email = ""
	}
	at, stop, err := c.throttled(email)
	if stop {
		return err
	}
	refuse := func() error { // the attempt stays counted
		_ = a.Audit.Record(ctx, Entry{Who: email, Address: c.ClientIP().String(), Action: "user sign-in refused", Target: email})
		return c.render(401, "signin", "Sign in", "", signInData{Email: c.form.Get("email"), Next: next, Error: "Wrong email or password."})
	}
	ok, err := a.Users.CheckPassword(ctx, email, c.form.Get("password"))
	if err != nil {
		at.ok()
		return err
	}
	if !ok || email == "" {
		return refuse()
	}
	ws, err := a.firstWorkspace(ctx, email)
	if errors.Is(err, ErrNotFound) {
		return refuse()
	}
	at.ok()
	if err != nil {
		return err
	}
	return a.startSession(c, email, ws, "user sign-in", next)
}

// firstWorkspace is the first workspace email is still a member of.
func (a *App) firstWorkspace(ctx context.Context, email string) (uuid.UUID, error) {
	wss, err := a.Users.Workspaces(ctx, email)
	if err != nil {
		return uuid.Nil, err
	}
	for _, ws := range wss {
		if _, err := a.Users.Member(ctx, ws, email); err == nil {
			return ws, nil
		}
	}
	return uuid.Nil, ErrNotFound
}

// startSession starts a session of email in ws, records action in ws's audit log,
// and goes to next.
func (a *App) startSession(c *call, email string, ws uuid.UUID, action, next string) error {
	ctx := c.Context()
	// A session this browser held before is ended, not left open beside the new one (its
	// cookie is replaced, so nothing could sign it out again).
	if old := string(c.Ctx.Request.Header.Cookie(a.cookie("svc_session"))); old != "" {
		if err := a.Sessions.Delete(ctx, old); err != nil {
			return err
		}
	}
	id, _, err := a.Sessions.Create(ctx, email, ws, c.ClientIP().String())
	if err != nil {
		return err
	}
	if err := a.Audit.Record(ctx, Entry{Workspace: ws, Who: email, Address: c.ClientIP().String(), Action: action, Target: email}); err != nil {
		return err
	}
	a.setCookie(c, "svc_session", id, int(a.Config.SessionTTL.Seconds()), fasthttp.CookieSameSiteLaxMode)
	a.clearCookie(c, "svc_pre")
	c.SeeOther(next)
	return nil
}

// signOut ends the session: its record is deleted, so the cookie opens nothing again.
func (a *App) signOut(c *call) error {
	if err := a.Sessions.Delete(c.Context(), c.sid); err != nil {
		return err
	}
	_ = a.Audit.Record(c.Context(), Entry{Workspace: c.ws.ID, Who: c.session.Email, Address: c.ClientIP().String(),
		Action: "user sign-out", Target: c.session.Email})
	a.clearCookie(c, "svc_session")
	c.SeeOther("/app/sign-in")
	return nil
}

// switchWorkspace moves the session to another workspace of the person.
func (a *App) switchWorkspace(c *call) error {
	id, err := ids.Parse(ids.Org, c.form.Get("workspace"))
	if err != nil {
		return c.notFound("workspace")
	}
	if _, err := a.Users.Member(c.Context(), id, c.session.Email); err != nil {
		return c.notFound("workspace")
	}
	if err := a.Sessions.SetWorkspace(c.Context(), c.sid, c.session, id); err != nil {
		return err
	}
	// The workspace entered records it: its log shows who came in, as a sign-in does.
	_ = a.Audit.Record(c.Context(), Entry{Workspace: id, Who: c.session.Email, Address: c.ClientIP().String(),
		Action: "user switch-workspace", Target: c.session.Email})
	c.SeeOther("/app/api-keys")
	return nil
}

// inviteData is the sign-in link's page's.
type inviteData struct {
	Token, Workspace, Email, Role, Error string
	HasAccount                           bool
	Expires                              any
	Min                                  int
}

// invite reads the sign-in link of the request (throttled per address); nil with the
// 410 page answered when it was used, expired or never was.
func (a *App) invite(c *call) (*Invite, *inviteData, error) {
	at, stop, err := c.throttled("")
	if stop {
		return nil, nil, err
	}
	token := c.Param("token")
	inv, err := a.Users.PeekInvite(c.Context(), token)
	if errors.Is(err, ErrInviteGone) { // the attempt stays counted: links are not guessed
		c.message(410, "Sign-in link not valid", "This sign-in link was used already or has expired (links work once, for 24 hours). Ask a workspace administrator for a new one.")
		return nil, nil, nil
	}
	at.ok()
	if err != nil {
		return nil, nil, err
	}
	w, err := a.Keys.Workspace(c.Context(), inv.Workspace)
	if err != nil {
		return nil, nil, err
	}
	_, perr := a.Users.Person(c.Context(), inv.Email)
	if perr != nil && !errors.Is(perr, ErrNotFound) {
		return nil, nil, perr
	}
	d := &inviteData{Token: token, Workspace: w.Name, Email: inv.Email, Role: inv.Role, HasAccount: perr == nil,
		Expires: inv.ExpiresAt, Min: MinPassword}
	return &inv, d, nil
}

func (a *App) invitePage(c *call) error {
	inv, d, err := a.invite(c)
	if inv == nil {
		return err
	}
	return c.render(200, "invite", "Join "+d.Workspace, "", d)
}

// acceptInvite uses a sign-in link: a newcomer sets a password, someone with an account
// proves theirs; then the link is used up (once, atomically), the membership made, and
// a session started.
func (a *App) acceptInvite(c *call) (err error) {
	ctx := c.Context()
	failed := false
	inv, d, err := a.invite(c)
	if inv == nil {
		return err
	}
	at, stop, err := c.throttled(inv.Email)
	if stop {
		return err
	}
	defer func() {
		if !failed {
			at.ok()
		}
	}()
	pw := c.form.Get("password")
	again := func(msg string) error { d.Error = msg; return c.render(422, "invite", "Join "+d.Workspace, "", d) }
	if d.HasAccount {
		ok, err := a.Users.CheckPassword(ctx, inv.Email, pw)
		if err != nil {
			return err
		}
		if !ok {
			failed = true // the attempt stays counted
			return again("Wrong password.")
		}
	} else {
		if err := checkPassword(pw, inv.Email); err != nil {
			return again(err.Error())
		}
		if pw != c.form.Get("confirm") {
			return again("The two passwords differ.")
		}
	}
	if _, err := a.Users.TakeInvite(ctx, c.Param("token")); errors.Is(err, ErrInviteGone) {
		c.message(410, "Sign-in link not valid", "This sign-in link was used already or has expired.")
		return nil
	} else if err != nil {
		return err
	}
	if !d.HasAccount {
		if _, err := a.Users.CreatePerson(ctx, inv.Email, pw); errors.Is(err, ErrExists) {
			c.message(409, "Account exists", "An account for this email was made meanwhile. Ask for a new link and sign in with its password.")
			return nil
		} else if err != nil {
			return err
		}
	}
	if _, err := a.Users.Join(ctx, inv.Workspace, inv.Email, inv.Role, inv.InvitedBy); err != nil {
		return err
	}
	return a.startSession(c, inv.Email, inv.Workspace, "user accept-invite", "/app/api-keys")
}
