package main

import (
	"bufio"
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// maxSourceLines bounds a non-test Go file: past it, a file mixes concerns and is split
// by concern, with names that say what each part is.
const maxSourceLines = 500

// sourceFiles returns the repository's Go files (skipping .data and other hidden
// folders), test files included when tests is true.
func sourceFiles(t *testing.T, tests bool) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() && path != "." && strings.HasPrefix(d.Name(), ".") {
			return filepath.SkipDir
		}
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || !tests && strings.HasSuffix(path, "_test.go") {
			return err
		}
		out = append(out, path)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// No non-test Go file is over maxSourceLines lines.
func TestNoSourceFileOver500Lines(t *testing.T) {
	for _, path := range sourceFiles(t, false) {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if n := bytes.Count(b, []byte("\n")); n > maxSourceLines {
			t.Errorf("%s has %d lines (at most %d: split it by concern)", path, n, maxSourceLines)
		}
	}
}

// Every folder README names each non-test Go file of its folder: a README says what
// each file is, so a new file cannot go undescribed.
func TestFolderREADMEsNameTheirFiles(t *testing.T) {
	for _, path := range sourceFiles(t, false) {
		dir := filepath.Dir(path)
		readme, err := os.ReadFile(filepath.Join(dir, "README.md"))
		if os.IsNotExist(err) || dir == "." {
			continue // main.go and its neighbours are described in the top-level README
		}
		if err != nil {
			t.Fatal(err)
		}
		if !mentionsFile(readme, filepath.Base(path)) {
			t.Errorf("%s/README.md does not name %s", dir, filepath.Base(path))
		}
	}
}

// mentionsFile reports whether a README names file (as `file` or a bare word).
func mentionsFile(readme []byte, file string) bool {
	sc := bufio.NewScanner(bytes.NewReader(readme))
	for sc.Scan() {
		if strings.Contains(sc.Text(), file) {
			return true
		}
	}
	return false
}
