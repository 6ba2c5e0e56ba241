package app

// membersData is the members screen's.
type membersData struct {
	Members []Member
	Link    string // a sign-in link just made (shown once)
	Invited *Invite
	Error   string
	Email   string
	Role    string
}

// membersPage lists the workspace's members and their roles.
func (a *App) membersPage(c *call) error {
	return a.renderMembers(c, 200, membersData{Role: RoleViewer})
}

func (a *App) renderMembers(c *call, status int, d membersData) error {
	ms, err := a.Users.Members(c.Context(), c.ws.ID)
	if err != nil {
		return err
	}
	d.Members = ms
	return c.render(status, "members", "Members", "members", d)
}

// invite makes a sign-in link for someone to join the workspace, as `svc admin user
// invite` does, and shows it once: the administrator sends it to the person.
func (a *App) inviteMember(c *call) error {
	email, role := c.form.Get("email"), c.form.Get("role")
	token, inv, err := a.Users.Invite(c.Context(), c.ws.ID, email, role, c.session.Email)
	if err != nil {
		return a.renderMembers(c, 422, membersData{Error: err.Error(), Email: email, Role: role})
	}
	if err := c.audit("user invite", inv.Email, "role="+inv.Role); err != nil {
		return err
	}
	c.Ctx.Response.Header.Set("Cache-Control", "no-store")
	return a.renderMembers(c, 201, membersData{Link: a.Config.PublicURL + "/app/invite/" + token, Invited: &inv, Role: RoleViewer})
}
