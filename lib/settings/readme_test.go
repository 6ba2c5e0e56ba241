package settings

import (
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// root is the repository, two folders up from lib/settings.
const root = "../.."

var update = flag.Bool("update", false, "rewrite the generated settings tables in the READMEs")

// clientVariables are the shell variables the developer pages and the Go client's README
// give a customer for their key and base URL: not settings of svc.
var clientVariables = map[string]bool{"SVC_KEY": true, "SVC_URL": true}

// mentionRE finds SVC_* names; a trailing * makes it a family (SVC_CLICKHOUSE_*).
var mentionRE = regexp.MustCompile(`SVC_[A-Z0-9_]*[A-Z0-9](?:_?\*)?`)

// scanned says which files are read for SVC_* names: the Go sources (tests included),
// shell scripts, the Makefile, deployment files and the Markdown (but the changelog, which
// records history).
func scanned(path string) bool {
	base := filepath.Base(path)
	switch {
	case base == "CHANGELOG.md":
		return false
	case base == "Makefile" || strings.HasPrefix(base, "Dockerfile"):
		return true
	}
	switch filepath.Ext(path) {
	case ".go", ".sh", ".yaml", ".yml", ".md", ".xml", ".cfg":
		return true
	}
	return false
}

// mentions returns every SVC_* name in the repository's scanned files, with a file that
// mentions it.
func mentions(t *testing.T) map[string]string {
	t.Helper()
	found := map[string]string{}
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", ".data", "bin", "node_modules", "results":
				return filepath.SkipDir
			}
			return nil
		}
		if !scanned(path) {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		for _, m := range mentionRE.FindAllString(string(b), -1) {
			if _, ok := found[m]; !ok {
				found[m] = rel
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}

// Every SVC_* name the sources, scripts, deployment files and READMEs mention is a
// declared setting (or a family of them): a setting read in code cannot go undocumented.
// And every declared setting is mentioned somewhere besides this package: none is stale.
func TestEverySettingMentionedIsDeclared(t *testing.T) {
	found := mentions(t)
	var missing []string
	for m, file := range found {
		if family, ok := strings.CutSuffix(m, "*"); ok {
			if len(withPrefix(family)) == 0 {
				missing = append(missing, m+" (in "+file+": no setting has this prefix)")
			}
			continue
		}
		if _, ok := Lookup(m); !ok && !clientVariables[m] {
			missing = append(missing, m+" (in "+file+")")
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("SVC_* names missing from lib/settings/table.go:\n  %s", strings.Join(missing, "\n  "))
	}
	for _, s := range Table {
		if f, ok := found[s.Name]; !ok || strings.HasPrefix(f, filepath.Join("lib", "settings")) {
			t.Errorf("%s is declared but nothing reads it", s.Name)
		}
	}
}

// withPrefix returns the settings whose names start with prefix.
func withPrefix(prefix string) []Setting {
	var out []Setting
	for _, s := range Table {
		if strings.HasPrefix(s.Name, prefix) {
			out = append(out, s)
		}
	}
	return out
}

// tableRE finds a generated table: <!-- settings: GROUP --> … <!-- /settings -->.
var tableRE = regexp.MustCompile(`(?s)(<!-- settings: ([a-z]+) -->\n)(.*?)(<!-- /settings -->)`)

// The README tables are generated from the table: README.md lists every setting and who
// reads it; each folder README lists its own group. Run with -update to rewrite them.
func TestREADMETablesMatchTheTable(t *testing.T) {
	groups := map[string]string{}
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() && (d.Name() == ".git" || d.Name() == ".data") {
			return err
		}
		if d.IsDir() || d.Name() != "README.md" {
			return nil
		}
		checkREADME(t, path, groups)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range Table {
		if _, ok := groups[s.Group]; !ok {
			t.Errorf("group %s (%s) has no table in any README (<!-- settings: %s -->)", s.Group, s.Name, s.Group)
		}
	}
	if _, ok := groups["all"]; !ok {
		t.Error("README.md has no table of every setting (<!-- settings: all -->)")
	}
}

func checkREADME(t *testing.T, path string, groups map[string]string) {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	out := tableRE.ReplaceAllStringFunc(text, func(block string) string {
		m := tableRE.FindStringSubmatch(block)
		groups[m[2]] = path
		var w strings.Builder
		Markdown(&w, InGroup(m[2]), m[2] == "all")
		if m[3] != w.String() && !*update {
			t.Errorf("%s: the %s settings table differs from lib/settings/table.go; run go test ./lib/settings -run README -update\nwant:\n%s", path, m[2], w.String())
		}
		return m[1] + w.String() + m[4]
	})
	if *update && out != text {
		if err := os.WriteFile(path, []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
