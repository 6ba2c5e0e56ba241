package settings

import (
	"fmt"
	"io"
	"slices"
	"strings"
)

// InGroup returns the settings of group in table order; every setting for "all".
func InGroup(group string) []Setting {
	var out []Setting
	for _, s := range Table {
		if group == "all" || s.Group == group {
			out = append(out, s)
		}
	}
	return out
}

// ShownDefault is the default as documented: Shown, else Default, else "empty".
func (s Setting) ShownDefault() string {
	switch {
	case s.Shown != "":
		return s.Shown
	case s.Default != "":
		return s.Default
	}
	return "empty"
}

// ReadByText names the readers: "every role" for the five role commands, then the rest.
func (s Setting) ReadByText() string {
	rest := slices.Clone(s.ReadBy)
	var parts []string
	if containsAll(rest, roles) {
		parts = append(parts, "every role")
		rest = slices.DeleteFunc(rest, func(n string) bool { return slices.Contains(roles, n) })
	}
	return strings.Join(append(parts, rest...), ", ")
}

func containsAll(list, want []string) bool {
	for _, w := range want {
		if !slices.Contains(list, w) {
			return false
		}
	}
	return true
}

// Masked returns v as it may be printed: a secret's value hidden, the password of a URL
// with credentials (redis://user:password@host) replaced by xxxxx, also in a URL that
// does not parse (a password holding '/' unencoded): all before its last '@'.
func (s Setting) Masked(v string) string {
	if s.Secret {
		if v == "" {
			return ""
		}
		return "(set, hidden)"
	}
	// Everything before the last '@' after the scheme is credentials, however the URL
	// parses: a password holding an unencoded '/' or '@' can parse as a host and a path
	// (redis://svc:1234/ter4@host) or as another user (redis://u:p@ss/w@host).
	if scheme, rest, ok := strings.Cut(v, "://"); ok && strings.Contains(rest, "@") {
		return scheme + "://xxxxx@" + rest[strings.LastIndex(rest, "@")+1:]
	}
	return v
}

// Markdown writes ss as a Markdown table: variable, default, (read by,) meaning.
func Markdown(w io.Writer, ss []Setting, readBy bool) {
	if readBy {
		fmt.Fprintln(w, "| variable | default | read by | meaning |\n|---|---|---|---|")
	} else {
		fmt.Fprintln(w, "| variable | default | meaning |\n|---|---|---|")
	}
	for _, s := range ss {
		def := "`" + s.ShownDefault() + "`"
		if s.ShownDefault() == "empty" {
			def = "empty"
		}
		if readBy {
			fmt.Fprintf(w, "| `%s` | %s | %s | %s |\n", s.Name, def, s.ReadByText(), s.Meaning)
		} else {
			fmt.Fprintf(w, "| `%s` | %s | %s |\n", s.Name, def, s.Meaning)
		}
	}
}

// Effective writes one line per name: NAME=value (masked), whether it is set or the
// default, and its meaning.
func Effective(w io.Writer, r *Reader, names []string) {
	for _, n := range names {
		s, ok := Lookup(n)
		if !ok {
			continue
		}
		v, set := r.Value(n)
		src := "default"
		if set {
			src = "set"
		} else if s.Shown != "" && v == "" {
			v = s.Shown
		}
		fmt.Fprintf(w, "%s=%s\t# %s; %s\n", n, s.Masked(v), src, s.Meaning)
	}
}
