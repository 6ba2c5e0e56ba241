package docs_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"svc/api/docs"
)

// The page "application" shows every screenshot the browser tests saved
// (app/testdata/screens/), each served as a PNG; nothing else is served there.
func TestApplicationPageShowsEveryScreen(t *testing.T) {
	dir := filepath.Join("..", "..", "app", "testdata", "screens")
	docs.UseScreens(os.DirFS(dir))
	s := startDocs(t)
	page := string(s.Do(t, "GET", "/developers/md/application.md", "", "").Body)
	shots, err := filepath.Glob(filepath.Join(dir, "*.png"))
	if err != nil || len(shots) == 0 {
		t.Fatalf("no screenshots in %s: %v", dir, err)
	}
	for _, p := range shots {
		name := filepath.Base(p)
		if !strings.Contains(page, "/developers/screens/"+name+")") {
			t.Errorf("the page application does not show %s", name)
		}
		r := s.Do(t, "GET", "/developers/screens/"+name, "", "")
		if r.Status != 200 || r.Header.Get("Content-Type") != "image/png" {
			t.Errorf("%s: %d %s", name, r.Status, r.Header.Get("Content-Type"))
		}
	}
	for _, bad := range []string{"99-none.png", "..%2Fapp.go", "README.md"} {
		if r := s.Do(t, "GET", "/developers/screens/"+bad, "", ""); r.Status != 404 {
			t.Errorf("%s: %d", bad, r.Status)
		}
	}
}
