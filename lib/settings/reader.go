// Package settings reads SVC_* environment variables into typed configuration fields. Every
// role's Config.FromEnv uses it; every variable it reads is documented in README.md.
// Parse errors are collected, not fatal one by one, so that a bad deployment reports
// every wrong variable at once.
package settings

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// Reader looks variables up and collects parse errors.
type Reader struct {
	errs []error
	// Lookup defaults to os.LookupEnv; tests may replace it.
	Lookup func(string) (string, bool)
}

// New returns a Reader over the process environment.
func New() *Reader { return &Reader{Lookup: os.LookupEnv} }

func (r *Reader) get(name string) (string, bool) {
	v, ok := r.Lookup(name)
	if !ok || strings.TrimSpace(v) == "" {
		return "", false
	}
	return strings.TrimSpace(v), true
}

// String returns the variable or def when unset or empty.
func (r *Reader) String(name, def string) string {
	if v, ok := r.get(name); ok {
		return v
	}
	return def
}

// Int returns the variable parsed as a base-10 integer, or def.
func (r *Reader) Int(name string, def int) int {
	v, ok := r.get(name)
	if !ok {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		r.errs = append(r.errs, fmt.Errorf("%s: %q is not an integer", name, v))
		return def
	}
	return n
}

// Duration returns the variable parsed by time.ParseDuration (e.g. "1s", "250ms"), or def.
func (r *Reader) Duration(name string, def time.Duration) time.Duration {
	v, ok := r.get(name)
	if !ok {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		r.errs = append(r.errs, fmt.Errorf("%s: %q is not a duration such as 1s or 250ms", name, v))
		return def
	}
	return d
}

// Bool returns the variable parsed by strconv.ParseBool, or def.
func (r *Reader) Bool(name string, def bool) bool {
	v, ok := r.get(name)
	if !ok {
		return def
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		r.errs = append(r.errs, fmt.Errorf("%s: %q is not a boolean", name, v))
		return def
	}
	return b
}

// List returns the comma-separated variable with blanks trimmed and empties dropped, or def.
func (r *Reader) List(name string, def []string) []string {
	v, ok := r.get(name)
	if !ok {
		return def
	}
	var out []string
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// Err returns every parse error seen so far, joined, or nil.
func (r *Reader) Err() error { return errors.Join(r.errs...) }
