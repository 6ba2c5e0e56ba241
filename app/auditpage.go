package app

// auditPage shows the newest 200 entries of the workspace's audit log: changes made in
// the application and with `svc admin`.
func (a *App) auditPage(c *call) error {
	es, err := a.Audit.List(c.Context(), c.ws.ID, 200)
	if err != nil {
		return err
	}
	return c.render(200, "audit", "Audit log", "audit", es)
}
