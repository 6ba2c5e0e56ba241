package app

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"svc/lib/ids"
	"svc/schema"
	"svc/schema/erasure"
	"svc/schema/workspace"
)

// workspaceData is the workspace screen's: its raw-event retention, its erasure
// requests, its members.
type workspaceData struct {
	RetentionDays int // 0: unlimited
	MinDays       int
	MaxDays       int
	Erasures      []erasureView
	ErasureError  string // the erasures cannot be read (ClickHouse)
	Members       []Member
	Roles         []string
	Error         string
	Notice        string
}

type erasureView struct {
	*erasure.Erasure
	ID string // era_…
}

// workspacePage shows the workspace's retention, erasures and members.
func (a *App) workspacePage(c *call) error {
	return a.renderWorkspace(c, 200, workspaceData{Notice: noticeOf(c.Query("done"))})
}

// notices are the messages a change's redirect asks the page to show.
var notices = map[string]string{
	"retention": "Retention saved.", "erasure": "Erasure requested: it runs in the background; its state is below.",
	"role": "Role changed.", "removed": "Member removed.",
}

func noticeOf(done string) string { return notices[done] }

func (a *App) renderWorkspace(c *call, status int, d workspaceData) error {
	ctx := c.Context()
	var err error
	if d.RetentionDays, err = workspace.NewRetention(a.Keys.Redis()).Get(ctx, c.ws.ID); err != nil {
		return err
	}
	if d.Members, err = a.Users.Members(ctx, c.ws.ID); err != nil {
		return err
	}
	d.MinDays, d.MaxDays, d.Roles = workspace.MinRetentionDays, workspace.MaxRetentionDays, []string{RoleAdmin, RoleViewer}
	es, err := a.erasures(ctx, c.ws.ID)
	if err != nil {
		a.Log.Warn("workspace page: erasures unavailable", "request_id", c.ID, "err", err.Error())
		d.ErasureError = "The erasure requests cannot be read right now (the analytics store does not answer)."
	}
	for _, e := range es {
		d.Erasures = append(d.Erasures, erasureView{Erasure: e, ID: ids.Format(ids.Erasure, e.ID)})
	}
	return c.render(status, "workspace", "Workspace", "workspace", d)
}

// erasures lists the workspace's newest 50 erasure requests (erasure.List, as GET
// /erasures).
func (a *App) erasures(ctx context.Context, ws uuid.UUID) ([]*erasure.Erasure, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := a.rollups(ctx)
	if err != nil {
		return nil, err
	}
	return erasure.List(ctx, conn, erasure.ListQuery{Workspace: ws, Limit: 50})
}

// setRetention sets the workspace's raw-event retention through the store `svc admin
// workspace set-retention` uses: days (8..36500), or unlimited.
func (a *App) setRetention(c *call) error {
	days := 0
	if c.form.Get("unlimited") != "yes" {
		n, err := strconv.Atoi(strings.TrimSpace(c.form.Get("days")))
		if err == nil {
			err = workspace.ValidateRetentionDays(n)
		}
		if err != nil {
			return a.renderWorkspace(c, 422, workspaceData{Error: "Retention is a whole number of days from " +
				itoa(workspace.MinRetentionDays) + " to " + itoa(workspace.MaxRetentionDays) + ", or unlimited."})
		}
		days = n
	}
	old, err := workspace.NewRetention(a.Keys.Redis()).Get(c.Context(), c.ws.ID)
	if err != nil {
		return err
	}
	if err := workspace.NewRetention(a.Keys.Redis()).Set(c.Context(), c.ws.ID, days); err != nil {
		return err
	}
	if err := c.audit("workspace set-retention", ids.Format(ids.Org, c.ws.ID), "days "+retentionText(old)+"→"+retentionText(days)); err != nil {
		return err
	}
	c.SeeOther("/app/workspace?done=retention")
	return nil
}

func retentionText(days int) string {
	if days == 0 {
		return "unlimited"
	}
	return itoa(days)
}

// requestErasure requests the erasure of a person by email (hashed here as POST
// /events hashes it; the address is never stored or logged) through erasure.Submit, as
// POST /erasures does.
func (a *App) requestErasure(c *call) error {
	// Events carry addresses trimmed and lower-cased (POST /events refuses others): so is this one.
	digest, rule := schema.EmailDigest([]byte(strings.ToLower(strings.TrimSpace(c.form.Get("email")))))
	if rule != "" {
		return a.renderWorkspace(c, 422, workspaceData{Error: "The email is not one an event could carry (" + rule + ")."})
	}
	ctx, cancel := context.WithTimeout(c.Context(), 10*time.Second)
	defer cancel()
	conn, err := a.rollups(ctx)
	if err != nil {
		a.Log.Warn("erasure request: ClickHouse unavailable", "request_id", c.ID, "err", err.Error())
		return a.renderWorkspace(c, 503, workspaceData{Error: "The erasure cannot be recorded right now (the analytics store does not answer); nothing was changed. Try again shortly."})
	}
	now := a.Now().UTC().Truncate(time.Second)
	e := &erasure.Erasure{ID: uuid.New(), Workspace: c.ws.ID, Sandbox: c.ws.Showroom, Email: digest, Suppress: c.form.Get("suppress") == "yes",
		Stage: erasure.StagePending, RequestedAt: now, RequestID: c.ID}
	switch err := erasure.Submit(ctx, conn, erasure.NewRegistry(a.Keys.Redis()), e, now); {
	case errors.Is(err, erasure.ErrNotRegistered):
		// Recorded: the worker registers the identity with the pipeline when it starts
		// the erasure (privacy/worker.go), so it runs; another request would be a second.
		a.Log.Warn("erasure request: identity not registered yet; the worker will", "request_id", c.ID, "err", err.Error())
	case err != nil:
		a.Log.Warn("erasure request: not recorded", "request_id", c.ID, "err", err.Error())
		return a.renderWorkspace(c, 503, workspaceData{Error: "The erasure cannot be recorded right now (the analytics store does not answer); nothing was changed. Try again shortly."})
	}
	if err := c.audit("erasure request", ids.Format(ids.Erasure, e.ID), "suppress="+strconv.FormatBool(e.Suppress)); err != nil {
		return err
	}
	c.SeeOther("/app/workspace?done=erasure")
	return nil
}

// setMemberRole changes a member's role (never the last admin's to viewer).
func (a *App) setMemberRole(c *call) error {
	email, role := c.form.Get("email"), c.form.Get("role")
	before, _, err := a.Users.SetRole(c.Context(), c.ws.ID, email, role)
	if err != nil {
		return a.memberRefused(c, err)
	}
	if err := c.audit("user set-role", email, "role "+before.Role+"→"+role); err != nil {
		return err
	}
	c.SeeOther("/app/workspace?done=role")
	return nil
}

// removeMember ends a membership (never the last admin's).
func (a *App) removeMember(c *call) error {
	email := c.form.Get("email")
	if c.form.Get("confirm") != "yes" {
		return a.renderWorkspace(c, 422, workspaceData{Error: "Tick the box to confirm the removal of " + email + "."})
	}
	m, err := a.Users.Remove(c.Context(), c.ws.ID, email)
	if err != nil {
		return a.memberRefused(c, err)
	}
	if err := c.audit("user remove", email, "role="+m.Role); err != nil {
		return err
	}
	c.SeeOther("/app/workspace?done=removed")
	return nil
}

// memberRefused answers a member change that failed with err: 404 for no such member,
// 422 for the last admin or an unknown role, else the error (the 500 page).
func (a *App) memberRefused(c *call, err error) error {
	switch {
	case errors.Is(err, ErrNotFound):
		return c.notFound("member")
	case errors.Is(err, ErrLastAdmin):
		return a.renderWorkspace(c, 422, workspaceData{Error: "Refused: " + err.Error() + "."})
	case errors.Is(err, errRole):
		return a.renderWorkspace(c, 422, workspaceData{Error: err.Error() + "."})
	}
	return err
}
