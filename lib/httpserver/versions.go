package httpserver

import (
	"slices"

	"svc/lib/problem"
)

// Version is one served API version. Versions are dates (YYYY-MM-DD); the aliases
// stable and next name the newest stable one and the preview.
type Version struct {
	Version  string `json:"version"`
	Status   string `json:"status"` // "stable", "deprecated" or "preview"
	Released string `json:"released"`
}

// Served lists every version this build serves, oldest first. All of v1's changes so far
// are additive, so every dated version behaves the same today.
var Served = []Version{
	{"2026-03-01", "stable", "2026-03-01"},
	{"2026-09-01", "stable", "2026-09-01"},
	{"2026-12-01", "preview", "2026-11-20"},
}

// Aliases of dated versions.
const (
	Stable = "2026-09-01"
	Next   = "2026-12-01"
)

// ResolveVersion picks the version of a request: the version parameter, then the
// SVC-Version header, then the key's pin, then stable. A value that is not served is
// unsupported_version.
func ResolveVersion(param, header, pin string) (string, *problem.Problem) {
	for _, c := range []struct{ v, from string }{{param, "version parameter"}, {header, "SVC-Version header"}, {pin, "version pinned on the key"}} {
		if c.v == "" {
			continue
		}
		switch c.v {
		case "stable":
			return Stable, nil
		case "next":
			return Next, nil
		}
		if slices.ContainsFunc(Served, func(v Version) bool { return v.Version == c.v }) {
			return c.v, nil
		}
		return "", problem.New(problem.UnsupportedVersion,
			"The %s names %q, which is not served. Served: %s, or the aliases stable and next.", c.from, c.v, servedList())
	}
	return Stable, nil
}

func servedList() string {
	s := ""
	for i, v := range Served {
		if i > 0 {
			s += ", "
		}
		s += v.Version
	}
	return s
}
