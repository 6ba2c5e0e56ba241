package app

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"svc/lib/apikey"
	"svc/lib/httpserver"
	"svc/lib/ids"
	"svc/lib/limits"
	"svc/schema/workspace"
)

// keyView is a key as the screens show it, with what its windows have left now.
type keyView struct {
	apikey.Key
	ID        string // key_…
	State     string // active, expired, revoked
	Allow     []string
	BurstLeft int
	DailyLeft int
	Peeked    bool   // BurstLeft and DailyLeft are known
	LastUsed  string // when it last spent a request (lastUsed)
}

// keysData is the keys screen's.
type keysData struct {
	Keys     []keyView
	Showroom bool
	Scopes   []string
	Versions []httpserver.Version
	Error    string
	Form     map[string]string // a refused form's values, shown again
}

// view formats k, peeking at its windows (read-only: nothing is spent).
func (c *call) keyView(k apikey.Key, now time.Time) keyView {
	j := apikey.NewJSON(k, now)
	v := keyView{Key: k, ID: j.ID, State: j.Status, Allow: j.Allow}
	if l := c.Server().Deps.Limits; l != nil {
		b, d := limits.Windows(k.Burst, k.Daily)
		if dec, err := l.Peek(c.Context(), k.ID.String(), b, d); err == nil {
			v.BurstLeft, v.DailyLeft, v.Peeked = dec.Burst.Remaining, dec.Daily.Remaining, true
		}
		v.LastUsed = c.lastUsed(l, k)
	}
	return v
}

// lastUsed says when k last spent a request, from its daily window's state
// (limits.LastTaken: nothing is written for it on the request path), to the minute.
func (c *call) lastUsed(l *limits.Limiter, k apikey.Key) string {
	at, ok, err := l.LastTaken(c.Context(), k.ID.String())
	switch {
	case err != nil:
		return "unknown"
	case !ok:
		return "not in the last 24 h"
	}
	return when(at)
}

func (a *App) keysPage(c *call) error { return a.renderKeys(c, 200, "", nil) }

func (a *App) renderKeys(c *call, status int, errText string, form map[string]string) error {
	ks, err := a.Keys.Keys(c.Context(), c.ws.ID)
	if err != nil {
		return err
	}
	slices.SortFunc(ks, func(x, y apikey.Key) int { return y.CreatedAt.Compare(x.CreatedAt) })
	now := a.Now()
	d := keysData{Showroom: c.ws.Showroom, Scopes: apikey.Scopes, Versions: httpserver.Served, Error: errText, Form: form}
	for _, k := range ks {
		d.Keys = append(d.Keys, c.keyView(k, now))
	}
	if d.Form == nil {
		d.Form = map[string]string{"burst": itoa(apikey.DefaultBurst), "daily": itoa(apikey.DefaultDaily), "scope:events:write": "on"}
	}
	return c.render(status, "keys", "API keys", "keys", d)
}

// createKey creates a key of the session's workspace from the form, through the
// workspace store as `svc admin key create` does, and shows its secret once.
func (a *App) createKey(c *call) error {
	f := c.form
	spec := workspace.KeySpec{WorkspaceID: c.ws.ID, Env: apikey.Live, Scopes: f["scope"], Allow: splitList(f.Get("allow")),
		Version: f.Get("version")}
	if c.ws.Showroom {
		spec.Env = apikey.Sandbox
	}
	var errs []string
	var err error
	if spec.Burst, err = strconv.Atoi(f.Get("burst")); err != nil || !quotaOK(spec.Burst) {
		errs = append(errs, "The burst limit is a whole number from 1 to 1,000,000,000.")
	}
	if spec.Daily, err = strconv.Atoi(f.Get("daily")); err != nil || !quotaOK(spec.Daily) {
		errs = append(errs, "The daily limit is a whole number from 1 to 1,000,000,000.")
	}
	if e := f.Get("expires"); e != "" {
		t, err := time.Parse("2006-01-02", e)
		if err != nil || !t.After(a.Now()) {
			errs = append(errs, "The expiry is a date in the future (the key stops at 00:00 UTC that day).")
		}
		spec.ExpiresAt = &t
	}
	if spec.Version != "" {
		if _, p := httpserver.ResolveVersion("", "", spec.Version); p != nil {
			errs = append(errs, p.Detail)
		}
	}
	if len(errs) == 0 {
		k, secret, err := a.Keys.CreateKey(c.Context(), spec)
		if err == nil {
			detail := fmt.Sprintf("env=%s scopes=%s burst=%d daily=%d", k.Env, strings.Join(k.Scopes, ","), k.Burst, k.Daily)
			if err := c.audit("key create", ids.Format(ids.Key, k.ID), detail); err != nil {
				return err
			}
			return a.renderSecret(c, k, secret, nil)
		}
		errs = append(errs, err.Error()) // the store's rules: scopes, allow-list, environment
	}
	form := map[string]string{"burst": f.Get("burst"), "daily": f.Get("daily"), "allow": f.Get("allow"),
		"expires": f.Get("expires"), "version": f.Get("version")}
	for _, s := range f["scope"] {
		form["scope:"+s] = "on"
	}
	return a.renderKeys(c, 422, strings.Join(errs, " "), form)
}

// secretData is the page that shows a secret, once.
type secretData struct {
	Key      keyView
	Secret   string
	Curl     string
	Pixel    string // the pixel the curl line names ("" when the workspace has none)
	Cutover  *time.Time
	NoEvents bool // the key lacks events:write: the curl line will get 403
}

func (a *App) renderSecret(c *call, k apikey.Key, secret string, cutover *time.Time) error {
	pxs, err := a.Keys.Pixels(c.Context(), c.ws.ID)
	if err != nil {
		return err
	}
	slices.SortFunc(pxs, func(x, y workspace.Pixel) int { return x.CreatedAt.Compare(y.CreatedAt) })
	d := secretData{Key: c.keyView(k, a.Now()), Secret: secret, Cutover: cutover, NoEvents: !k.HasScope("events:write")}
	pixel := "pxl_…"
	if len(pxs) > 0 {
		d.Pixel = ids.Format(ids.Pixel, pxs[0].ID)
		pixel = d.Pixel
	}
	d.Curl = CurlLine(a.Config.PublicURL, secret, pixel, a.Now())
	c.Ctx.Response.Header.Set("Cache-Control", "no-store")
	return c.render(201, "secret", "Your new secret", "keys", d)
}

// CurlLine is a ready POST /events request with secret for pixel: one line a shell runs.
func CurlLine(publicURL, secret, pixel string, now time.Time) string {
	body := fmt.Sprintf(`{"pixel_id":"%s","events":[{"event_name":"purchase","occurred_at":"%s","value":49.90,"currency":"EUR",`+
		`"consent":{"measurement":true},"identity":{"email":"ada@example.com"}}]}`, pixel, now.UTC().Truncate(time.Second).Format(time.RFC3339))
	return fmt.Sprintf("curl -i -X POST %s/v1/events -H 'Authorization: Bearer %s' -H 'Content-Type: application/json' "+
		"-H 'Idempotency-Key: %s' -d '%s'", publicURL, secret, uuid.NewString(), body)
}

// keyOf is the key of the path's id in the session's workspace; nil (the 404 page
// answered) for a malformed id, an unknown key or another workspace's.
func (a *App) keyOf(c *call) (*apikey.Key, error) {
	id, err := ids.Parse(ids.Key, c.Param("id"))
	if err != nil {
		return nil, c.notFound("API key")
	}
	k, err := a.Keys.Key(c.Context(), id)
	if errors.Is(err, workspace.ErrNotFound) || err == nil && k.WorkspaceID != c.ws.ID {
		return nil, c.notFound("API key")
	}
	if err != nil {
		return nil, err
	}
	return &k, nil
}

// keyData is one key's page's.
type keyData struct {
	Key      keyView
	Overlaps []string
	Error    string
}

func (a *App) keyPage(c *call) error {
	k, err := a.keyOf(c)
	if k == nil {
		return err
	}
	return c.render(200, "key", ids.Format(ids.Key, k.ID), "keys", keyData{Key: c.keyView(*k, a.Now()), Overlaps: overlaps})
}

// overlaps are the choices of how long a rotated-out secret keeps working.
var overlaps = []string{"0s", "1h", "24h", "168h"}

func (a *App) rotateKey(c *call) error {
	k, err := a.keyOf(c)
	if k == nil {
		return err
	}
	overlap, err := time.ParseDuration(c.form.Get("overlap"))
	if err != nil || !slices.Contains(overlaps, c.form.Get("overlap")) {
		return c.render(422, "key", "Rotate", "keys", keyData{Key: c.keyView(*k, a.Now()), Overlaps: overlaps, Error: "Choose an overlap."})
	}
	nk, secret, cutover, err := a.Keys.Rotate(c.Context(), k.ID, overlap)
	if err != nil {
		return c.render(422, "key", "Rotate", "keys", keyData{Key: c.keyView(*k, a.Now()), Overlaps: overlaps, Error: err.Error()})
	}
	if err := c.audit("key rotate", ids.Format(ids.Key, k.ID), "overlap="+overlap.String()+" cutover="+when(cutover)); err != nil {
		return err
	}
	return a.renderSecret(c, nk, secret, &cutover)
}

func (a *App) revokeKey(c *call) error {
	k, err := a.keyOf(c)
	if k == nil {
		return err
	}
	if c.form.Get("confirm") != "yes" {
		return c.render(422, "key", "Revoke", "keys", keyData{Key: c.keyView(*k, a.Now()), Overlaps: overlaps,
			Error: "Tick the box to confirm: a revoked key stops working at once, for good."})
	}
	if k.RevokedAt != nil { // revoked already: nothing changes, nothing to audit
		c.SeeOther("/app/api-keys/" + ids.Format(ids.Key, k.ID))
		return nil
	}
	if _, err := a.Keys.Revoke(c.Context(), k.ID); err != nil {
		return err
	}
	if err := c.audit("key revoke", ids.Format(ids.Key, k.ID), ""); err != nil {
		return err
	}
	c.SeeOther("/app/api-keys/" + ids.Format(ids.Key, k.ID))
	return nil
}

func (a *App) keyLimits(c *call) error {
	k, err := a.keyOf(c)
	if k == nil {
		return err
	}
	burst, err1 := strconv.Atoi(c.form.Get("burst"))
	daily, err2 := strconv.Atoi(c.form.Get("daily"))
	if err1 != nil || err2 != nil || !quotaOK(burst) || !quotaOK(daily) {
		return c.render(422, "key", "Limits", "keys", keyData{Key: c.keyView(*k, a.Now()), Overlaps: overlaps,
			Error: "Both limits are whole numbers from 1 to 1,000,000,000."})
	}
	if _, err := a.Keys.SetLimits(c.Context(), k.ID, burst, daily); err != nil {
		return err
	}
	detail := fmt.Sprintf("burst %d→%d daily %d→%d", k.Burst, burst, k.Daily, daily)
	if err := c.audit("key set-limits", ids.Format(ids.Key, k.ID), detail); err != nil {
		return err
	}
	c.SeeOther("/app/api-keys/" + ids.Format(ids.Key, k.ID))
	return nil
}

// audit records a change made by the session's person in its workspace.
func (c *call) audit(action, target, detail string) error {
	return c.app.Audit.Record(c.Context(), Entry{Workspace: c.ws.ID, Who: c.session.Email, Address: c.ClientIP().String(),
		Action: action, Target: target, Detail: detail})
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' || r == '\n' }) {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// quotaOK is a quota the form may set: 1 to limits.MaxQuota (the store refuses more).
func quotaOK(n int) bool { return n >= 1 && n <= limits.MaxQuota }
