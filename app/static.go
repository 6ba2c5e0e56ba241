package app

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"mime"
	"path"
)

// static holds the application's scripts, styles and the vendored uPlot build
// (app/npm, `make app-assets`), built into the binary.
//
//go:embed static
var staticFS embed.FS

type staticFile struct {
	body        []byte
	contentType string
	version     string // the first 12 hex digits of its SHA-256: its URLs' ?v=
}

var staticFiles = func() map[string]staticFile {
	out := map[string]staticFile{}
	entries, err := fs.ReadDir(staticFS, "static")
	if err != nil {
		panic(err)
	}
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		b, err := staticFS.ReadFile("static/" + e.Name())
		if err != nil {
			panic(err)
		}
		sum := sha256.Sum256(b)
		ct := mime.TypeByExtension(path.Ext(e.Name()))
		if ct == "" {
			ct = "application/octet-stream"
		}
		out[e.Name()] = staticFile{body: b, contentType: ct, version: hex.EncodeToString(sum[:6])}
	}
	return out
}()

// staticURL is the URL of a static file, versioned by its content so that it can be
// cached for good.
func staticURL(name string) string {
	return "/app/static/" + name + "?v=" + staticFiles[name].version
}

// static serves a static file: cached for a year when asked by its current version.
func (a *App) static(c *call) error {
	f, ok := staticFiles[c.Param("file")]
	if !ok {
		return c.notFound("file")
	}
	if c.Query("v") == f.version {
		c.Ctx.Response.Header.Set("Cache-Control", "public, max-age=31536000, immutable")
	} else {
		c.Ctx.Response.Header.Set("Cache-Control", "public, max-age=300")
	}
	c.Raw(200, f.contentType, f.body)
	return nil
}
