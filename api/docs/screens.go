package docs

import (
	"io/fs"
	"path"
	"regexp"
	"sync"

	"svc/lib/httpserver"
	"svc/lib/problem"
)

// The application's screenshots, shown by the page "application": the browser tests
// save them (app/testdata/screens/, the one copy), and the svc command embeds that
// folder and hands it here at start-up, as it does CHANGELOG.md (embed cannot reach it
// from this package).
var (
	screensMu sync.RWMutex
	screens   fs.FS
)

// UseScreens sets the folder of the application's screenshots (NN-name.png files).
func UseScreens(fsys fs.FS) {
	screensMu.Lock()
	screens = fsys
	screensMu.Unlock()
}

// screenName is a screenshot's file name: nothing else is served.
var screenName = regexp.MustCompile(`^[0-9]{2}-[a-z0-9-]{1,60}\.png$`)

// serveScreen serves GET /developers/screens/{file}: one screenshot, or 404.
func serveScreen(r *httpserver.Request) error {
	name := r.Param("file")
	screensMu.RLock()
	fsys := screens
	screensMu.RUnlock()
	if fsys == nil || !screenName.MatchString(name) {
		return problem.New(problem.NotFound, "No screenshot %s.", cutName(name))
	}
	b, err := fs.ReadFile(fsys, path.Clean(name))
	if err != nil {
		return problem.New(problem.NotFound, "No screenshot %s.", cutName(name))
	}
	r.Ctx.Response.Header.Set("Cache-Control", "public, max-age=3600")
	r.Raw(200, "image/png", b)
	return nil
}

func cutName(s string) string {
	if len(s) > 64 {
		return s[:64]
	}
	return s
}
