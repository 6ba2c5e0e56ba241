package docs_test

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"svc/api/mcp"
)

// TestMCPPageListsEveryToolWithItsOperationAndScope: the MCP page's table (pages/mcp.md,
// "## Tools": "| Tool | REST operation | Scope |") names every tool of mcp.Tools exactly
// once and no other, each beside its REST operation (GET and the tool's path, in the
// order of the row's names) and the scope that operation's served route requires ("any
// valid key" for none). Dropping a tool or its row, or moving a tool to another
// operation or scope on one side only, fails.
func TestMCPPageListsEveryToolWithItsOperationAndScope(t *testing.T) {
	md, err := os.ReadFile("pages/mcp.md")
	if err != nil {
		t.Fatal(err)
	}
	sec := regexp.MustCompile("(?s)## Tools\n\n(\\| Tool \\| REST operation \\| Scope \\|\n.*?)\n\n").FindSubmatch(md)
	if sec == nil {
		t.Fatal("pages/mcp.md has no | Tool | REST operation | Scope | table under ## Tools")
	}
	code := regexp.MustCompile("`([^`]*)`")
	type row struct{ path, scope string }
	documented := map[string]row{}
	for _, line := range strings.Split(string(sec[1]), "\n")[2:] {
		cells := strings.Split(line, "|")
		if len(cells) != 5 {
			t.Fatalf("pages/mcp.md: a tools row of %d cells: %q", len(cells)-2, line)
		}
		var names, paths []string
		for _, m := range code.FindAllStringSubmatch(cells[1], -1) {
			names = append(names, m[1])
		}
		for _, m := range code.FindAllStringSubmatch(cells[2], -1) {
			if p := strings.TrimPrefix(m[1], "GET "); strings.HasPrefix(p, "/") {
				paths = append(paths, p)
			}
		}
		if len(names) == 0 || len(paths) != len(names) {
			t.Errorf("pages/mcp.md: row %q names tools %v and operations %v: want one operation per tool", line, names, paths)
			continue
		}
		scope := strings.Trim(strings.TrimSpace(cells[3]), "`")
		for i, n := range names {
			if _, dup := documented[n]; dup {
				t.Errorf("pages/mcp.md lists the tool %s twice", n)
			}
			documented[n] = row{paths[i], scope}
		}
	}
	scopes := map[string]string{}
	for _, r := range devRoutes() {
		if r.Method == "GET" {
			scopes[r.Path] = r.Scope
			if r.Scope == "" {
				scopes[r.Path] = "any valid key"
			}
		}
	}
	for _, tl := range mcp.Tools {
		scope, served := scopes[tl.Path]
		if !served {
			t.Errorf("tool %s: no served GET %s", tl.Name, tl.Path)
		}
		want := row{tl.Path, scope}
		if got, ok := documented[tl.Name]; !ok {
			t.Errorf("pages/mcp.md does not list the tool %s (GET %s, %s)", tl.Name, tl.Path, scope)
		} else if got != want {
			t.Errorf("pages/mcp.md lists the tool %s as GET %s, %s; it is GET %s, %s", tl.Name, got.path, got.scope, want.path, want.scope)
		}
		delete(documented, tl.Name)
	}
	for n := range documented {
		t.Errorf("pages/mcp.md lists the tool %s, which mcp.Tools does not have", n)
	}
}
