// Package settings is svc's configuration: the table of every SVC_* environment
// variable (table.go: name, kind, default, meaning, the commands that read it) and the
// Reader every Config.ConfigFromEnv reads through. The Reader takes defaults from the
// table and refuses a name the table lacks; parse errors are collected, not fatal one by
// one, so that a bad deployment reports every wrong variable at once.
package settings

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// Kind is how a setting's value is parsed.
type Kind int

// The kinds of settings.
const (
	String   Kind = iota
	Int           // base-10 integer
	Duration      // time.ParseDuration: 1s, 250ms, 24h
	Bool          // strconv.ParseBool: true, false, 1, 0
	List          // comma-separated, blanks trimmed, empties dropped
)

func (k Kind) String() string {
	return [...]string{"string", "integer", "duration", "boolean", "list"}[k]
}

// Setting is one SVC_* variable.
type Setting struct {
	Name  string
	Group string // the package that owns it (Group* constants)
	Kind  Kind
	// Default is the value used when the variable is unset or blank, parsed as a set
	// value would be ("" is the empty string, 0, false or an empty list).
	Default string
	// Shown is the default as documented when the code computes it from other values
	// (SVC_PUBLIC_URL); empty means Default.
	Shown string
	// ReadBy names the svc commands that read it (and "tests" or "scripts").
	ReadBy []string
	// Secret values are never printed.
	Secret  bool
	Meaning string
}

// Lookup returns the declared setting named name.
func Lookup(name string) (Setting, bool) {
	for _, s := range Table {
		if s.Name == name {
			return s, true
		}
	}
	return Setting{}, false
}

// Reader looks variables up, takes defaults from Table, and collects parse errors.
type Reader struct {
	// Lookup defaults to os.LookupEnv; tests may replace it.
	Lookup func(string) (string, bool)
	errs   []error
	read   []string // names read, in order, once each
}

// New returns a Reader over the process environment.
func New() *Reader { return &Reader{Lookup: os.LookupEnv} }

// Map returns a Reader over vars (tests; nil reads every default).
func Map(vars map[string]string) *Reader {
	return &Reader{Lookup: func(k string) (string, bool) { v, ok := vars[k]; return v, ok }}
}

// Defaults returns a Reader over an empty environment: every setting at its default.
func Defaults() *Reader { return Map(nil) }

// get returns the value of name (the table's default when unset or blank) after
// checking that name is declared as kind; ok is false when it is not (an error is
// recorded) and def then holds the zero value's text.
func (r *Reader) get(name string, kind Kind) (v string, set, ok bool) {
	s, declared := Lookup(name)
	switch {
	case !declared:
		r.errs = append(r.errs, fmt.Errorf("%s: not a declared setting (add it to lib/settings/table.go)", name))
		return "", false, false
	case s.Kind != kind:
		r.errs = append(r.errs, fmt.Errorf("%s: read as %s but declared %s", name, kind, s.Kind))
		return "", false, false
	}
	r.note(name)
	if r.Lookup != nil {
		if v, found := r.Lookup(name); found && strings.TrimSpace(v) != "" {
			return strings.TrimSpace(v), true, true
		}
	}
	return s.Default, false, true
}

func (r *Reader) note(name string) {
	for _, n := range r.read {
		if n == name {
			return
		}
	}
	r.read = append(r.read, name)
}

// defaultOf is the table's default of name.
func defaultOf(name string) string {
	s, _ := Lookup(name)
	return s.Default
}

func (r *Reader) fail(name, v string, set bool, want string) {
	if set {
		r.errs = append(r.errs, fmt.Errorf("%s: %q is not %s", name, v, want))
		return
	}
	r.errs = append(r.errs, fmt.Errorf("%s: the table's default %q is not %s", name, v, want))
}

// String returns the variable, or its default.
func (r *Reader) String(name string) string {
	v, _, _ := r.get(name, String)
	return v
}

// Int returns the variable parsed as a base-10 integer, or its default.
func (r *Reader) Int(name string) int {
	v, set, ok := r.get(name, Int)
	if !ok || v == "" {
		return 0
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		r.fail(name, v, set, "an integer")
		n, _ = strconv.Atoi(defaultOf(name)) // reported once, not again by Validate
	}
	return n
}

// Duration returns the variable parsed by time.ParseDuration, or its default.
func (r *Reader) Duration(name string) time.Duration {
	v, set, ok := r.get(name, Duration)
	if !ok || v == "" {
		return 0
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		r.fail(name, v, set, "a duration such as 1s or 250ms")
		d, _ = time.ParseDuration(defaultOf(name))
	}
	return d
}

// Bool returns the variable parsed by strconv.ParseBool, or its default.
func (r *Reader) Bool(name string) bool {
	v, set, ok := r.get(name, Bool)
	if !ok || v == "" {
		return false
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		r.fail(name, v, set, "a boolean")
		b, _ = strconv.ParseBool(defaultOf(name))
	}
	return b
}

// List returns the comma-separated variable with blanks trimmed and empties dropped, or
// its default.
func (r *Reader) List(name string) []string {
	v, _, ok := r.get(name, List)
	if !ok {
		return nil
	}
	return SplitList(v)
}

// SplitList splits a comma-separated value, trimming blanks and dropping empties.
func SplitList(v string) []string {
	var out []string
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// Read returns the names read so far, in the order first read.
func (r *Reader) Read() []string { return append([]string(nil), r.read...) }

// Value returns the value name has for this Reader (set or default) and whether the
// environment set it, without recording a read.
func (r *Reader) Value(name string) (string, bool) {
	s, _ := Lookup(name)
	if r.Lookup != nil {
		if v, ok := r.Lookup(name); ok && strings.TrimSpace(v) != "" {
			return strings.TrimSpace(v), true
		}
	}
	return s.Default, false
}

// Err returns every parse error seen so far, joined, or nil.
func (r *Reader) Err() error { return errors.Join(r.errs...) }
