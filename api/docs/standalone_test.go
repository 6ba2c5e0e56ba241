package docs_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"svc/api/docs"
)

// repoRoot is the repository's root: the nearest parent holding go.mod.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}

// TestRepositoryStandsOnItsOwn: a clone has no ../shared, so no file a user reads (code,
// docs, scripts, configuration) may point there. Tests and CI may read fixtures from it.
func TestRepositoryStandsOnItsOwn(t *testing.T) {
	root := repoRoot(t)
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			switch d.Name() {
			case ".git", ".ci", ".data", "bin", "results", "testdata", "node_modules":
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(rel, "_test.go") || !d.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if strings.Contains(string(b), "../shared") {
			t.Errorf("%s refers to ../shared, which a clone of the repository does not have", rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestReadmeNamesWhatARepositoryReaderNeeds: the README sends readers to documents that
// exist in the repository: the design document, the changelog and the decisions page.
func TestReadmeNamesWhatARepositoryReaderNeeds(t *testing.T) {
	root := repoRoot(t)
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range []string{"DESIGN.md", "CHANGELOG.md", "api/docs/pages/decisions.md"} {
		if _, err := os.Stat(filepath.Join(root, doc)); err != nil {
			t.Errorf("%s: %v", doc, err)
		}
		if !strings.Contains(string(readme), filepath.Base(doc)) {
			t.Errorf("README.md does not name %s", doc)
		}
	}
	found := false
	for _, p := range docs.Pages {
		found = found || p.Name == "decisions"
	}
	if !found {
		t.Error("the decisions page is not among the served developer pages")
	}
}
