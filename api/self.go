package api

import (
	"errors"
	"time"

	"svc/lib/apikey"
	"svc/lib/httpserver"
	"svc/lib/ids"
	"svc/lib/limits"
	"svc/lib/problem"
	"svc/schema/workspace"
)

// Window is one rate-limit window of the calling key as GET /limits and GET /me show it.
type Window struct {
	Name          string `json:"name"`           // "burst" or "daily"
	Quota         int    `json:"quota"`          // requests per window
	WindowSeconds int    `json:"window_seconds"` // length of the window
	Remaining     int    `json:"remaining"`      // left after this request
	Reset         int    `json:"reset"`          // seconds until the window is full again
	Scope         string `json:"scope"`          // "key": counted per key, not per workspace
}

// Limits is the body of GET /limits.
type Limits struct {
	KeyID     string   `json:"key_id"`
	KeyIDUUID string   `json:"key_id_uuid"`
	Policy    string   `json:"policy"` // the RateLimit-Policy header's value
	Windows   []Window `json:"limits"`
}

// windows returns the key's windows as of this request's decision.
func windows(r *httpserver.Request) (string, []Window) {
	b, d := limits.Windows(r.Key.Burst, r.Key.Daily)
	dec := limits.Decision{Burst: limits.State{Window: b, Remaining: b.Quota}, Daily: limits.State{Window: d, Remaining: d.Quota}}
	if r.Limits != nil {
		dec = *r.Limits
	}
	out := make([]Window, 0, 2)
	for _, s := range []limits.State{dec.Burst, dec.Daily} {
		out = append(out, Window{Name: s.Name, Quota: s.Quota, WindowSeconds: s.Seconds, Remaining: s.Remaining,
			Reset: s.Reset, Scope: "key"})
	}
	return limits.Policy(b, d), out
}

func (a *API) limits(r *httpserver.Request) error {
	policy, ws := windows(r)
	return r.JSON(200, Limits{KeyID: ids.Format(ids.Key, r.Key.ID), KeyIDUUID: r.Key.ID.String(), Policy: policy, Windows: ws})
}

// Me is the body of GET /me: the calling key's own record, without any secret.
type Me struct {
	ID              string     `json:"id"`
	IDUUID          string     `json:"id_uuid"`
	Environment     string     `json:"environment"` // "live" or "sandbox"
	Status          string     `json:"status"`      // "active" (a key that answers is active)
	WorkspaceID     string     `json:"workspace_id"`
	WorkspaceIDUUID string     `json:"workspace_id_uuid"`
	WorkspaceName   string     `json:"workspace_name"`
	Showroom        bool       `json:"showroom"`
	Scopes          []string   `json:"scopes"`
	ExpiresAt       *time.Time `json:"expires_at"`
	PinnedVersion   *string    `json:"pinned_version"`
	Version         string     `json:"version"` // the version this request was served with
	Allow           []string   `json:"allow"`   // address allow-list; empty: every address
	Limits          []Window   `json:"limits"`
	CreatedAt       time.Time  `json:"created_at"`
}

func (a *API) me(r *httpserver.Request) error {
	k := apikey.NewJSON(*r.Key, a.now())
	w, err := a.Keys.Workspace(r.Context(), r.Key.WorkspaceID)
	if err != nil && !errors.Is(err, workspace.ErrNotFound) {
		return problem.Unavailable("the key store", 1)
	}
	_, win := windows(r)
	m := Me{ID: k.ID, IDUUID: k.IDUUID, Environment: k.Env, Status: k.Status, WorkspaceID: k.WorkspaceID,
		WorkspaceIDUUID: k.WorkspaceIDUUID, WorkspaceName: w.Name, Showroom: w.Showroom, Scopes: k.Scopes,
		ExpiresAt: k.ExpiresAt, Version: r.Version, Allow: k.Allow, Limits: win, CreatedAt: k.CreatedAt}
	if k.Version != "" {
		m.PinnedVersion = &k.Version
	}
	if m.Scopes == nil {
		m.Scopes = []string{}
	}
	return r.JSON(200, m)
}

// Versions is the body of GET /versions.
type Versions struct {
	Data    []httpserver.Version `json:"data"`
	Aliases map[string]string    `json:"aliases"` // stable and next → dated version
	Current string               `json:"current"` // the version this request was served with
}

func (a *API) versions(r *httpserver.Request) error {
	return r.JSON(200, Versions{Data: httpserver.Served, Aliases: map[string]string{"stable": httpserver.Stable, "next": httpserver.Next},
		Current: r.Version})
}
