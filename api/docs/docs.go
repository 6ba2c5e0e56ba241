// Package docs is the service's self-description: the OpenAPI 3.1 document
// (/openapi.json) with x-rateLimit per operation, the discovery documents
// (/.well-known/svc, /.well-known/api-catalog), the developer pages (/developers, HTML
// rendered from embedded Markdown with goldmark, and their Markdown mirror under
// /developers/md/, which lists them), one page per problem code (/developers/errors/<code>, the URL every
// problem document names), and the changelog page.
//
// Operations is the one table of per-operation documentation, keyed by "METHOD /path".
// The documents describe the routes the serving httpserver.Server actually serves
// (Server.Routes), so what is documented is what is served.
package docs

import (
	"bytes"
	"embed"
	"fmt"
	"html"
	"sort"
	"strings"
	"sync"

	json "github.com/goccy/go-json"
	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/extension"
	"github.com/yuin/goldmark/parser"

	"svc/lib/apikey"
	"svc/lib/httpserver"
	"svc/lib/limits"
	"svc/lib/problem"
)

//go:embed pages/*.md
var pageFS embed.FS

// Page is one developer page.
type Page struct {
	Name  string // URL name: /developers/<name>, /developers/md/<name>.md
	Title string
}

// Pages lists the developer pages in reading order.
var Pages = []Page{
	{"index", "Developers"},
	{"getting-started", "Getting started: a first event in five minutes"},
	{"authentication", "Authentication and keys"},
	{"events", "Events and hashing"},
	{"rollups", "Daily pixel rollups"},
	{"rejections", "Rejected events"},
	{"pipeline", "Pixel health and the life of a batch"},
	{"plans-and-actuals", "Plans and actuals"},
	{"webhooks", "Webhooks"},
	{"limits", "Limits"},
	{"errors", "Errors"},
	{"versioning", "Versioning"},
	{"changelog", "Changelog"},
	{"mcp", "MCP endpoint"},
	{"go-client", "Go client"},
	{"decisions", "Conventions and decisions"},
	{"privacy", "Privacy: erasure and retention"},
	{"application", "The application at /app"},
}

var (
	changelogMu  sync.RWMutex
	changelogSrc []byte
)

// UseChangelog sets the changelog page's Markdown source: the repository's
// CHANGELOG.md, which the svc command embeds and passes here at start-up (embed cannot
// reach the repository root from this package). CHANGELOG.md is the one source.
func UseChangelog(md []byte) {
	changelogMu.Lock()
	changelogSrc = append([]byte(nil), md...)
	changelogMu.Unlock()
}

func changelog() []byte {
	changelogMu.RLock()
	defer changelogMu.RUnlock()
	if len(changelogSrc) == 0 {
		return []byte("# Changelog\n\nThe changelog is published with each release (CHANGELOG.md).\n")
	}
	return changelogSrc
}

// Routes returns the routes of this package: /openapi.json, the discovery documents and
// the developer pages. All but the discovery document are Public documentation: they need
// no key and spend no quota. The discovery document needs a valid key (no scope), spends
// one request like GET /limits, and carries the calling key's own limits and scopes.
// (The MCP endpoint is in package mcp.)
func Routes() []httpserver.Route {
	return []httpserver.Route{
		{Method: "GET", Path: "/openapi.json", Public: true, Summary: "The OpenAPI 3.1 document.", Handle: serveOpenAPI},
		{Method: "GET", Path: "/.well-known/svc", Summary: "The discovery document, with the calling key's limits and scopes.", Handle: serveDiscovery},
		{Method: "GET", Path: "/.well-known/api-catalog", Public: true, Summary: "The RFC 9727 API catalog.", Handle: serveCatalog},
		{Method: "GET", Path: "/developers", Public: true, Summary: "Developer pages: index.", Handle: servePage},
		{Method: "GET", Path: "/developers/{page}", Public: true, Summary: "A developer page.", Handle: servePage},
		{Method: "GET", Path: "/developers/errors/{code}", Public: true, Summary: "The page of a problem code.", Handle: serveErrorPage},
		{Method: "GET", Path: "/developers/md", Public: true, Summary: "Index of the Markdown mirror: every page and error page.", Handle: serveMirrorIndex},
		{Method: "GET", Path: "/developers/md/{file}", Public: true, Summary: "Markdown mirror of a developer page.", Handle: serveMarkdown},
		{Method: "GET", Path: "/developers/md/errors/{file}", Public: true, Summary: "Markdown mirror of a problem code's page.", Handle: serveErrorMarkdown},
		{Method: "GET", Path: "/developers/screens/{file}", Public: true, Summary: "A screenshot of the application (the page application shows them).", Handle: serveScreen},
	}
}

// site is everything rendered for one server (its routes and public URL), built once.
type site struct {
	openapi   []byte
	discovery map[string]any // the service-wide part; ForKey completes it per request
	catalog   []byte
	html      map[string][]byte // page name or "errors/<code>" → HTML
	md        map[string][]byte // same keys → Markdown
}

var sites sync.Map // *httpserver.Server → *site

func siteOf(r *httpserver.Request) (*site, error) {
	srv := r.Server()
	if s, ok := sites.Load(srv); ok {
		return s.(*site), nil
	}
	s, err := Build(srv.Routes(), srv.Config.PublicURL)
	if err != nil {
		return nil, err
	}
	actual, _ := sites.LoadOrStore(srv, s)
	return actual.(*site), nil
}

// Build renders every document and page for routes served at publicURL.
func Build(routes []httpserver.Route, publicURL string) (*site, error) {
	s := &site{html: map[string][]byte{}, md: map[string][]byte{}}
	var err error
	if s.openapi, err = json.MarshalIndent(OpenAPI(routes, publicURL), "", "  "); err != nil {
		return nil, err
	}
	s.discovery = Discovery(routes, publicURL)
	if s.catalog, err = json.MarshalIndent(APICatalog(publicURL), "", "  "); err != nil {
		return nil, err
	}
	for _, p := range Pages {
		md, err := PageMarkdown(p.Name, routes, publicURL)
		if err != nil {
			return nil, err
		}
		s.md[p.Name] = md
		if s.html[p.Name], err = renderHTML(p.Title, md, p.Name, publicURL); err != nil {
			return nil, err
		}
	}
	s.md[mirrorIndexKey] = MirrorIndex(publicURL)
	for _, c := range problem.Codes() {
		md := ErrorMarkdown(c, publicURL)
		k := "errors/" + string(c)
		s.md[k] = md
		if s.html[k], err = renderHTML(string(c), md, k, publicURL); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// PageMarkdown returns the Markdown of a page with its placeholders filled:
// {{ROOT}} the public URL, {{BASE}} the base URL (with /v1), {{DOCS}} the docs URL, and
// generated sections (<!-- codes -->, <!-- scopes -->, <!-- versions -->,
// <!-- windows -->, <!-- operations -->).
func PageMarkdown(name string, routes []httpserver.Route, publicURL string) ([]byte, error) {
	var src []byte
	if name == "changelog" {
		src = changelog()
	} else {
		b, err := pageFS.ReadFile("pages/" + name + ".md")
		if err != nil {
			return nil, fmt.Errorf("docs: page %s: %w", name, err)
		}
		src = b
	}
	rep := strings.NewReplacer(
		"{{ROOT}}", publicURL, "{{BASE}}", publicURL+"/v1", "{{DOCS}}", publicURL+"/developers",
		"<!-- codes -->", codesTable(publicURL), "<!-- scopes -->", scopesTable(routes),
		"<!-- versions -->", versionsTable(), "<!-- windows -->", windowsTable(),
		"<!-- operations -->", operationsTable(routes),
	)
	return []byte(rep.Replace(string(src))), nil
}

// mirrorIndexKey is the Markdown mirror's index among a site's pages.
const mirrorIndexKey = "md/"

// MirrorIndex is the Markdown of /developers/md/: a listing of every page of the
// mirror, then every problem code's page.
func MirrorIndex(publicURL string) []byte {
	mdURL := publicURL + "/developers/md/"
	var b strings.Builder
	b.WriteString("# Developer pages in Markdown\n\n")
	fmt.Fprintf(&b, "The Markdown mirror of the developer pages at %s/developers (documentation only, not part of the API).\n\n", publicURL)
	for _, p := range Pages {
		fmt.Fprintf(&b, "- [%s](%s%s.md)\n", p.Title, mdURL, p.Name)
	}
	b.WriteString("\n## Error codes\n\n")
	for _, c := range problem.Codes() {
		fmt.Fprintf(&b, "- [`%s`](%serrors/%s.md): %s\n", c, mdURL, c, problem.Table[c].Title)
	}
	return []byte(b.String())
}

// ErrorPageURL is the page of code at publicURL: what a problem's type and doc_url name.
func ErrorPageURL(publicURL string, c problem.Code) string {
	return publicURL + "/developers/errors/" + string(c)
}

// ErrorMarkdown is the page of one problem code, generated from problem.Table.
func ErrorMarkdown(c problem.Code, publicURL string) []byte {
	e := problem.Table[c]
	var b strings.Builder
	fmt.Fprintf(&b, "# %s\n\n", c)
	fmt.Fprintf(&b, "**%s** — HTTP %d. Retryable: **%s**.", e.Title, e.Status, yesNo(e.Retryable))
	if e.Added {
		b.WriteString(" Added, unversioned (see the [changelog](" + publicURL + "/developers/changelog)).")
	}
	b.WriteString("\n\n")
	fmt.Fprintf(&b, "## When\n\n%s\n\n## What to do\n\n%s\n\n", mdText(e.Condition), mdText(e.SuggestedAction))
	if e.Retryable {
		b.WriteString("Retry with the same request (and the same `Idempotency-Key` on writes). Wait at least `Retry-After` seconds when the response carries it; otherwise back off exponentially.\n\n")
	} else {
		b.WriteString("Retrying the same request gives the same answer: change what `suggested_action` says first.\n\n")
	}
	b.WriteString("## Example\n\n```http\n")
	fmt.Fprintf(&b, "HTTP/1.1 %d\nContent-Type: application/problem+json\n", e.Status)
	if e.Status == 429 || c == problem.ServiceUnavailable || c == problem.IdempotencyKeyInUse {
		b.WriteString("Retry-After: 30\n")
	}
	ex, _ := json.MarshalIndent(exampleProblem(publicURL+"/developers", c), "", "  ")
	b.WriteString("\n")
	b.Write(ex)
	b.WriteString("\n```\n\n")
	fmt.Fprintf(&b, "This page's address is the problem's `type` and `doc_url`: %s. All codes: [errors](%s/developers/errors).\n",
		ErrorPageURL(publicURL, c), publicURL)
	return []byte(b.String())
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func codesTable(publicURL string) string {
	var b strings.Builder
	b.WriteString("| Status | Code | Retryable | When | What to do |\n|---|---|---|---|---|\n")
	codes := problem.Codes()
	sort.SliceStable(codes, func(i, j int) bool { return problem.Table[codes[i]].Status < problem.Table[codes[j]].Status })
	for _, c := range codes {
		e := problem.Table[c]
		fmt.Fprintf(&b, "| %d | [`%s`](%s) | %s | %s | %s |\n", e.Status, c, ErrorPageURL(publicURL, c), yesNo(e.Retryable),
			cell(mdText(e.Condition)), cell(mdText(e.SuggestedAction)))
	}
	return b.String()
}

// mdText escapes text for Markdown: "<API key>" would otherwise be raw HTML.
func mdText(s string) string { return strings.ReplaceAll(s, "<", `\<`) }

func cell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

func scopesTable(routes []httpserver.Route) string {
	ops := map[string][]string{}
	for _, r := range routes {
		if !r.Public {
			s := r.Scope
			if s == "" {
				s = "(any valid key)"
			}
			ops[s] = append(ops[s], "`"+Key(r)+"`")
		}
	}
	var b strings.Builder
	b.WriteString("| Scope | What it allows | Operations |\n|---|---|---|\n")
	for _, s := range append(append([]string(nil), apikey.Scopes...), "(any valid key)") {
		sort.Strings(ops[s])
		text := scopeText[s]
		if s == "(any valid key)" {
			text = "No scope beyond a valid key."
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", s, text, strings.Join(ops[s], ", "))
	}
	return b.String()
}

func versionsTable() string {
	var b strings.Builder
	b.WriteString("| Version | Status | Released | Alias |\n|---|---|---|---|\n")
	for _, v := range httpserver.Served {
		alias := ""
		switch v.Version {
		case httpserver.Stable:
			alias = "`stable`"
		case httpserver.Next:
			alias = "`next`"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", v.Version, v.Status, v.Released, alias)
	}
	return b.String()
}

func windowsTable() string {
	bw, dw := limits.Windows(apikey.DefaultBurst, apikey.DefaultDaily)
	return fmt.Sprintf("| Window | Name in policy | Quota | Seconds | Counted |\n|---|---|---|---|---|\n"+
		"| Burst | `%s` | %d | %d | per key |\n| Daily (rolling) | `%s` | %d | %d | per key, not per workspace |\n\n"+
		"A default key's `RateLimit-Policy` is `%s`.\n", bw.Name, bw.Quota, bw.Seconds, dw.Name, dw.Quota, dw.Seconds, limits.Policy(bw, dw))
}

func operationsTable(routes []httpserver.Route) string {
	sorted := append([]httpserver.Route(nil), routes...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Path+sorted[i].Method < sorted[j].Path+sorted[j].Method })
	var b strings.Builder
	b.WriteString("| Operation | Scope | What it does |\n|---|---|---|\n")
	for _, r := range sorted {
		scope := "`" + r.Scope + "`"
		switch {
		case r.Public:
			scope = "none (public)"
		case r.Scope == "":
			scope = "any valid key"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", Key(r), scope, cell(mdText(r.Summary)))
	}
	return b.String()
}

var md = goldmark.New(goldmark.WithExtensions(extension.GFM), goldmark.WithParserOptions(parser.WithAutoHeadingID()))

func renderHTML(title string, src []byte, name, publicURL string) ([]byte, error) {
	var body bytes.Buffer
	if err := md.Convert(src, &body); err != nil {
		return nil, err
	}
	mdURL := publicURL + "/developers/md/" + name + ".md"
	var b bytes.Buffer
	b.WriteString("<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n")
	b.WriteString("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n")
	fmt.Fprintf(&b, "<title>%s · svc developers</title>\n", html.EscapeString(title))
	fmt.Fprintf(&b, "<link rel=\"alternate\" type=\"text/markdown\" href=\"%s\">\n", html.EscapeString(mdURL))
	fmt.Fprintf(&b, "<link rel=\"service-desc\" type=\"application/vnd.oai.openapi+json\" href=\"%s/openapi.json\">\n", html.EscapeString(publicURL))
	b.WriteString(`<style>body{font:16px/1.55 system-ui,sans-serif;margin:0;color:#1b1f24}` +
		`nav{background:#f4f5f7;padding:.8em 1.2em;border-bottom:1px solid #dde}nav a{margin-right:.9em;white-space:nowrap}` +
		`main{max-width:52em;padding:1em 1.2em}pre{background:#f6f8fa;padding:.8em;overflow:auto}code{font-size:.92em}` +
		`table{border-collapse:collapse}td,th{border:1px solid #dde;padding:.3em .5em;vertical-align:top}</style>` + "\n")
	b.WriteString("</head><body>\n<nav>")
	for _, p := range Pages {
		href := publicURL + "/developers/" + p.Name
		if p.Name == "index" {
			href = publicURL + "/developers"
		}
		label := p.Name
		if p.Name == "index" {
			label = "home"
		}
		fmt.Fprintf(&b, "<a href=\"%s\">%s</a>", html.EscapeString(href), html.EscapeString(label))
	}
	b.WriteString("</nav>\n<main>\n")
	b.Write(body.Bytes())
	fmt.Fprintf(&b, "<hr><p><small>Markdown of this page: <a href=\"%s\">%s</a> · <a href=\"%s/openapi.json\">OpenAPI</a> · <a href=\"%s/.well-known/svc\">discovery</a></small></p>\n",
		html.EscapeString(mdURL), html.EscapeString(mdURL), html.EscapeString(publicURL), html.EscapeString(publicURL))
	b.WriteString("</main></body></html>\n")
	return b.Bytes(), nil
}

func serveOpenAPI(r *httpserver.Request) error {
	s, err := siteOf(r)
	if err != nil {
		return err
	}
	r.Raw(200, "application/vnd.oai.openapi+json;version=3.1", s.openapi)
	if strings.Contains(string(r.Ctx.Request.Header.Peek("Accept")), "application/json") {
		r.Ctx.SetContentType("application/json")
	}
	return nil
}

func serveDiscovery(r *httpserver.Request) error {
	s, err := siteOf(r)
	if err != nil {
		return err
	}
	b, err := json.MarshalIndent(ForKey(s.discovery, r), "", "  ")
	if err != nil {
		return err
	}
	r.Raw(200, "application/json", b)
	return nil
}

func serveCatalog(r *httpserver.Request) error {
	s, err := siteOf(r)
	if err != nil {
		return err
	}
	r.Raw(200, CatalogContentType, s.catalog)
	r.Ctx.Response.Header.Set("Link", "<"+r.Server().Config.PublicURL+"/.well-known/api-catalog>; rel=\"api-catalog\"")
	return nil
}

func servePage(r *httpserver.Request) error {
	name := r.Param("page")
	if name == "" {
		name = "index"
	}
	return serveFrom(r, name, false)
}

func serveErrorPage(r *httpserver.Request) error {
	return serveFrom(r, "errors/"+r.Param("code"), false)
}

func serveMarkdown(r *httpserver.Request) error {
	f := r.Param("file")
	if !strings.HasSuffix(f, ".md") {
		return problem.New(problem.NotFound, "No page %s: the mirror names pages <page>.md.", f)
	}
	return serveFrom(r, strings.TrimSuffix(f, ".md"), true)
}

func serveMirrorIndex(r *httpserver.Request) error { return serveFrom(r, mirrorIndexKey, true) }

func serveErrorMarkdown(r *httpserver.Request) error {
	f := r.Param("file")
	if !strings.HasSuffix(f, ".md") {
		return problem.New(problem.NotFound, "No page %s: the mirror names pages <code>.md.", f)
	}
	return serveFrom(r, "errors/"+strings.TrimSuffix(f, ".md"), true)
}

func serveFrom(r *httpserver.Request, key string, markdown bool) error {
	s, err := siteOf(r)
	if err != nil {
		return err
	}
	if markdown {
		b, ok := s.md[key]
		if !ok {
			return problem.New(problem.NotFound, "No developer page %s.", key)
		}
		r.Raw(200, "text/markdown; charset=utf-8", b)
		return nil
	}
	b, ok := s.html[key]
	if !ok {
		return problem.New(problem.NotFound, "No developer page %s.", key)
	}
	r.Raw(200, "text/html; charset=utf-8", b)
	return nil
}
