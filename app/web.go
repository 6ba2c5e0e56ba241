package app

import (
	"bytes"
	"context"
	"crypto/subtle"
	"errors"
	"io"
	"net"
	"net/url"
	"strings"
	"syscall"

	"github.com/valyala/fasthttp"

	"svc/lib/httpserver"
	"svc/schema/workspace"
)

// ContentSecurityPolicy is sent with every page and file of the application: scripts
// and styles only from files it serves (no inline script or style, no eval), no
// framing, forms posted only to itself.
const ContentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"frame-ancestors 'none'; form-action 'self'; base-uri 'none'"

// A handler serves one page; an error it returns becomes the 500 page (logged).
type handler func(c *call) error

// call is one request to the application: the request, its form, and (behind
// signedIn) the session, the membership and the workspace.
type call struct {
	*httpserver.Request
	app     *App
	form    url.Values
	sid     string // the session id (the cookie's value)
	session Session
	member  Member
	ws      workspace.Workspace
	pre     string // the pre-session CSRF token (signed-out pages)
}

// serve adapts h to the HTTP server: security headers on every answer, the 500 page for
// an error.
func (a *App) serve(h handler) httpserver.Handler {
	return func(r *httpserver.Request) error {
		hd := &r.Ctx.Response.Header
		hd.Set("Content-Security-Policy", ContentSecurityPolicy)
		hd.Set("X-Content-Type-Options", "nosniff")
		hd.Set("Referrer-Policy", "no-referrer") // a sign-in link's token never leaves in a Referer
		hd.Set("X-Frame-Options", "DENY")
		hd.Set("Cross-Origin-Opener-Policy", "same-origin")
		hd.Set("Cache-Control", "no-store")
		if a.Config.secure() { // served over TLS: browsers keep to it (RFC 6797)
			hd.Set("Strict-Transport-Security", "max-age=31536000")
		}
		c := &call{Request: r, app: a}
		if err := h(c); err != nil {
			r.Ctx.Response.ResetBody()
			if storeDown(err) {
				a.Log.Warn("page: a store is not answering", "request_id", r.ID, "route", r.RoutePath(), "err", err.Error())
				hd.Set("Retry-After", "2")
				c.message(503, "Try again in a moment", "A store the application needs is not answering. Reload in a few seconds "+
					"to see whether the change was made. Request "+r.ID+" identifies this for the operator.")
				return nil
			}
			a.Log.Error("page failed", "request_id", r.ID, "route", r.RoutePath(), "err", err.Error())
			c.message(500, "Something went wrong", "The page failed; nothing more was changed. Request "+r.ID+" identifies it for the operator.")
		}
		return nil
	}
}

// storeDown reports whether err is a store (Redis, ClickHouse) not answering rather than
// a fault of the page: a network error (refused, reset, timed out), a connection closed
// under the call, or a deadline passed. The page then answers 503 with Retry-After, as
// the API does.
func storeDown(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, context.DeadlineExceeded) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET)
}

// anyone lets every request through (the static files, the first screen).
func (a *App) anyone(h handler) handler { return h }

// signedOut guards the pages of people not signed in (sign-in, sign-in links): a
// pre-session token in a SameSite=Strict cookie, and on a POST the same token in the
// form (login CSRF).
func (a *App) signedOut(h handler) handler {
	return func(c *call) error {
		c.pre = string(c.Ctx.Request.Header.Cookie(a.cookie("svc_pre")))
		if c.post() {
			if !c.formAccepted(func(token string) bool { return c.pre != "" && constantEqual(token, c.pre) }) {
				return nil
			}
			return h(c)
		}
		if c.pre == "" {
			c.pre = randomToken()
			a.setCookie(c, "svc_pre", c.pre, 3600, fasthttp.CookieSameSiteStrictMode)
		}
		return h(c)
	}
}

// signedIn guards the workspace's pages: a live session whose person is still a
// member of its workspace; on a POST, a same-site request carrying the session's CSRF
// token. Without a session a GET is sent to the sign-in page (and back after it).
func (a *App) signedIn(h handler) handler {
	return func(c *call) error {
		ctx := c.Context()
		c.sid = string(c.Ctx.Request.Header.Cookie(a.cookie("svc_session")))
		ss, err := a.Sessions.Get(ctx, c.sid)
		if errors.Is(err, ErrNotFound) {
			return c.toSignIn()
		}
		if err != nil {
			return err
		}
		m, err := a.Users.Member(ctx, ss.Workspace, ss.Email)
		if errors.Is(err, ErrNotFound) {
			_ = a.Sessions.Delete(ctx, c.sid)
			return c.toSignIn()
		}
		if err != nil {
			return err
		}
		w, err := a.Keys.Workspace(ctx, ss.Workspace)
		if err != nil {
			return err
		}
		c.session, c.member, c.ws = ss, m, w
		if c.post() && !c.formAccepted(ss.CSRFValid) {
			return nil
		}
		return h(c)
	}
}

// admin guards what changes things: a signed-in admin of the workspace; a viewer gets
// 403.
func (a *App) admin(h handler) handler {
	return a.signedIn(func(c *call) error {
		if c.member.Role != RoleAdmin {
			c.message(403, "Not allowed", "Your role in this workspace is viewer: you can see everything, but only an admin can change it.")
			return nil
		}
		return h(c)
	})
}

// constantEqual compares a token from a request with the expected one in constant time.
func constantEqual(got, want string) bool {
	return got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

func (c *call) post() bool { return string(c.Ctx.Method()) == "POST" }

// sameSite refuses a request the browser says comes from another site: Fetch
// Metadata's Sec-Fetch-Site, and the Origin, which must be the application's own (its
// public URL's, or the host the request was sent to) when it names one. Our pages' own
// forms send Origin "null" (their Referrer-Policy is no-referrer) or none; browsers
// without either rely on the CSRF token alone.
func (c *call) sameSite() bool {
	s := string(c.Ctx.Request.Header.Peek("Sec-Fetch-Site"))
	if s != "" && s != "same-origin" && s != "none" {
		return false
	}
	o := string(c.Ctx.Request.Header.Peek("Origin"))
	if o == "" || o == "null" {
		return true
	}
	if u, err := url.Parse(c.app.Config.PublicURL); err == nil && u.Host != "" && strings.EqualFold(o, u.Scheme+"://"+u.Host) {
		return true
	}
	u, err := url.Parse(o)
	return err == nil && u.Path == "" && strings.EqualFold(u.Host, string(c.Ctx.Host()))
}

// formAccepted reads a POST's form and checks it came from our own page: same site, and
// its csrf token valid by tokenOK. Otherwise it answers and returns false: 400 for a
// body that is not a form (not the token's 403, which would send the person reloading
// for nothing), 403 for another site or a token that does not match.
func (c *call) formAccepted(tokenOK func(string) bool) bool {
	if err := c.parseForm(); err != nil {
		c.message(400, "Form not readable", "The form could not be read: send it as application/x-www-form-urlencoded, as the page's own form does.")
		return false
	}
	if !c.sameSite() || !tokenOK(c.form.Get("csrf")) {
		c.message(403, "Form refused", "The form's security token is missing or does not match. Reload the page and try again.")
		return false
	}
	return true
}

// parseForm reads an application/x-www-form-urlencoded body.
func (c *call) parseForm() error {
	if !bytes.HasPrefix(c.Ctx.Request.Header.ContentType(), []byte("application/x-www-form-urlencoded")) {
		return errors.New("not a form")
	}
	f, err := url.ParseQuery(string(c.Body()))
	c.form = f
	return err
}

// toSignIn sends the request to the sign-in page, which returns to a GET's page after.
func (c *call) toSignIn() error {
	c.app.clearCookie(c, "svc_session")
	next := "/app/sign-in"
	if !c.post() {
		next += "?next=" + url.QueryEscape(string(c.Ctx.RequestURI()))
	}
	c.SeeOther(next)
	return nil
}

// safeNext is a page to go to after signing in: a path of the application only.
func safeNext(next string) string {
	if strings.HasPrefix(next, "/app/") && !strings.HasPrefix(next, "//") && !strings.ContainsAny(next, "\\\r\n") {
		return next
	}
	return "/app/api-keys"
}

// cookie is a cookie's name: with the __Host- prefix (Secure, Path=/, no Domain) when
// the application is served over https; browsers refuse that prefix without TLS.
func (a *App) cookie(name string) string {
	if a.Config.secure() {
		return "__Host-" + name
	}
	return name
}

// setCookie sets an HttpOnly cookie for maxAge seconds (Secure behind https).
func (a *App) setCookie(c *call, name, value string, maxAge int, sameSite fasthttp.CookieSameSite) {
	ck := fasthttp.AcquireCookie()
	defer fasthttp.ReleaseCookie(ck)
	ck.SetKey(a.cookie(name))
	ck.SetValue(value)
	ck.SetPath("/")
	ck.SetHTTPOnly(true)
	ck.SetSecure(a.Config.secure())
	ck.SetSameSite(sameSite)
	if maxAge < 0 {
		ck.SetExpire(fasthttp.CookieExpireDelete)
	} else {
		ck.SetMaxAge(maxAge)
	}
	c.Ctx.Response.Header.SetCookie(ck)
}

func (a *App) clearCookie(c *call, name string) {
	a.setCookie(c, name, "", -1, fasthttp.CookieSameSiteLaxMode)
}

// home is /app: the keys screen when signed in, the sign-in page otherwise.
func (a *App) home(c *call) error {
	c.SeeOther("/app/api-keys")
	return nil
}
