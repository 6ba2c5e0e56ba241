package main

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestNoPlainLoggingInRoles: outside the tools (svc admin, migrate, config, bench,
// deploy/, the settings table's printer) and lib/logs, no source file imports the standard log package or writes to stderr or
// stdout itself: every line goes through the process's slog logger.
func TestNoPlainLoggingInRoles(t *testing.T) {
	tools := []string{"bench/", "deploy/", "admin", "lib/logs/", "schema/migrations/command.go", "main.go", "configcmd.go", "lib/settings/print.go"}
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() && path != "." && strings.HasPrefix(d.Name(), ".") {
			return filepath.SkipDir // .data and the like
		}
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		for _, tool := range tools {
			if strings.HasPrefix(path, tool) {
				return nil
			}
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, bad := range []string{"\t\"log\"\n", "os.Stderr", "os.Stdout", "fmt.Print", "println("} {
			if bytes.Contains(src, []byte(bad)) {
				t.Errorf("%s uses %q: log through the role's *slog.Logger (lib/logs)", path, strings.TrimSpace(bad))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
