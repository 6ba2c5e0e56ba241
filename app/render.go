package app

import (
	"bytes"
	"embed"
	"html/template"
	"io/fs"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"svc/lib/ids"
	"svc/schema/workspace"
)

//go:embed templates/*.html
var templateFS embed.FS

// pages are the templates, each page's with the layout around it: html/template
// escapes every value by its context, so a name like <script>…</script> is text.
var pages = func() map[string]*template.Template {
	funcs := template.FuncMap{
		"static": staticURL,
		"org":    func(id uuid.UUID) string { return ids.Format(ids.Org, id) },
		"keyID":  func(id uuid.UUID) string { return ids.Format(ids.Key, id) },
		"pixel":  func(id uuid.UUID) string { return ids.Format(ids.Pixel, id) },
		"when":   when,
		"whenp": func(t *time.Time) string {
			if t == nil {
				return "never"
			}
			return when(*t)
		},
		"join": strings.Join,
		"who":  shownWho,
	}
	names, err := fs.Glob(templateFS, "templates/*.html")
	if err != nil {
		panic(err)
	}
	out := map[string]*template.Template{}
	for _, n := range names {
		if n == "templates/layout.html" {
			continue
		}
		name := strings.TrimSuffix(strings.TrimPrefix(n, "templates/"), ".html")
		out[name] = template.Must(template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html", n))
	}
	return out
}()

func when(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return t.UTC().Format("2006-01-02 15:04 UTC")
}

// view is what the layout and every page see.
type view struct {
	Title string
	Nav   string // the current screen: "keys", "pixels", "audit"
	CSRF  string // the token of the page's forms
	User  *userView
	Data  any
}

// userView is the signed-in person in their workspace.
type userView struct {
	Email      string
	Role       string
	Admin      bool
	Workspace  workspace.Workspace
	Workspaces []workspace.Workspace // every workspace of the person, when more than one
}

// render writes page with data as the answer, with status.
func (c *call) render(status int, page, title, nav string, data any) error {
	v := view{Title: title, Nav: nav, CSRF: c.pre, Data: data}
	if c.session.Email != "" {
		v.CSRF = c.session.CSRF
		v.User = &userView{Email: c.session.Email, Role: c.member.Role, Admin: c.member.Role == RoleAdmin, Workspace: c.ws}
		if wss, err := c.app.Users.Workspaces(c.Context(), c.session.Email); err == nil && len(wss) > 1 {
			for _, id := range wss {
				if w, err := c.app.Keys.Workspace(c.Context(), id); err == nil {
					v.User.Workspaces = append(v.User.Workspaces, w)
				}
			}
		}
	}
	var b bytes.Buffer
	if err := pages[page].ExecuteTemplate(&b, "layout.html", v); err != nil {
		return err
	}
	c.HTML(status, b.Bytes())
	return nil
}

// message answers a page of one message (refusals, failures, a used link).
func (c *call) message(status int, title, text string) {
	if err := c.render(status, "message", title, "", text); err != nil {
		c.HTML(status, []byte("<!doctype html><title>"+template.HTMLEscapeString(title)+"</title><p>"+template.HTMLEscapeString(text)))
	}
}

// notFound is the 404 of an object that is not in the session's workspace (or does not
// exist, or whose id is malformed): the same page for each, as the API's 404 rule.
func (c *call) notFound(what string) error {
	c.message(404, "Not found", "No "+what+" with this id in this workspace.")
	return nil
}

func itoa(n int) string { return strconv.Itoa(n) }
