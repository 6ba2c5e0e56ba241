package main

import (
	"os/exec"
	"strings"
	"testing"
)

// The floors of the house (DESIGN.md, "Where things live"). Every import of a
// non-test file points down: lib/ imports only lib/; the domain (schema/) imports lib/
// and schema/; a role imports lib/, schema/ and its own folder, never another role;
// the command line (the root package), bench/ and deploy/ sit on top. There are no
// exceptions: a thing two roles share moves down a floor.
var floors = map[string]int{
	"lib": 1, "schema": 2,
	"ingest": 3, "rollup": 3, "api": 3, "webhooks": 3, "privacy": 3, "app": 3,
	"": 4, "bench": 4, "deploy": 4, "e2e": 4,
}

// top is the top-level folder of an import path of the module ("" for the root).
func top(path string) string {
	rest := strings.TrimPrefix(strings.TrimPrefix(path, "svc"), "/")
	top, _, _ := strings.Cut(rest, "/")
	return top
}

// harness reports whether path is a test harness (a package named …test): only test
// files may import one.
func harness(path string) bool { return strings.HasSuffix(path, "test") }

// imports lists each package of the module with its non-test imports of the module.
func imports(t *testing.T) map[string][]string {
	t.Helper()
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", "./...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	m := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		for _, imp := range f[1:] {
			if imp == "svc" || strings.HasPrefix(imp, "svc/") {
				m[f[0]] = append(m[f[0]], imp)
			}
		}
	}
	return m
}

// TestEveryImportPointsDown: no role imports another role, no floor imports one above
// it, no production code imports a test harness.
func TestEveryImportPointsDown(t *testing.T) {
	for from, tos := range imports(t) {
		ff, ok := floors[top(from)]
		if !ok {
			t.Errorf("%s: top-level folder %q has no floor (add it to floors and DESIGN.md)", from, top(from))
			continue
		}
		for _, to := range tos {
			ft := floors[top(to)]
			switch {
			case harness(to) && !harness(from):
				t.Errorf("%s imports the test harness %s", from, to)
			case ft > ff:
				t.Errorf("%s (floor %d) imports %s (floor %d): imports point down", from, ff, to, ft)
			case ft == ff && ff == 3 && top(from) != top(to):
				t.Errorf("%s imports %s: no role imports another role", from, to)
			}
		}
	}
}

// TestFloorsCatchAnUpwardImport: the rule above fails on the crossings it exists for.
func TestFloorsCatchAnUpwardImport(t *testing.T) {
	for _, c := range []struct{ from, to string }{
		{"svc/lib/httpserver", "svc/schema/workspace"}, {"svc/schema/erasure", "svc/privacy"},
		{"svc/rollup", "svc/privacy"}, {"svc/webhooks", "svc/api"},
	} {
		ff, ft := floors[top(c.from)], floors[top(c.to)]
		if !(ft > ff || ff == 3 && ft == 3 && top(c.from) != top(c.to)) {
			t.Errorf("%s -> %s passes the rule", c.from, c.to)
		}
	}
	if top("svc") != "" || top("svc/api/mcp") != "api" || !harness("svc/schema/apitest") {
		t.Error("top or harness misread a path")
	}
}

// TestNoHTTPStackBelowTheRoles: the consumer, the domain and the plumbing other than
// lib/httpserver do not depend on fasthttp; the HTTP conventions are one package roles
// choose to use.
func TestNoHTTPStackBelowTheRoles(t *testing.T) {
	for _, pkg := range []string{"svc/rollup", "svc/privacy", "svc/schema", "svc/schema/workspace", "svc/schema/erasure",
		"svc/schema/rollups", "svc/schema/catalog", "svc/lib/chpool", "svc/lib/process", "svc/lib/kafkabroker"} {
		out, err := exec.Command("go", "list", "-deps", pkg).CombinedOutput()
		if err != nil {
			t.Fatalf("go list %s: %v\n%s", pkg, err, out)
		}
		if strings.Contains(string(out), "github.com/valyala/fasthttp\n") {
			t.Errorf("%s depends on fasthttp", pkg)
		}
	}
}
