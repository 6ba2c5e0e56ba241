package main

import "testing"

// TestDevProcs: svc dev runs twice Go's default of Ps, unless GOMAXPROCS says otherwise.
func TestDevProcs(t *testing.T) {
	for _, c := range []struct {
		env         string
		procs, want int
	}{{"", 2, 4}, {"", 16, 32}, {"3", 3, 3}, {"junk", 2, 4}, {"0", 2, 4}} {
		if got := devProcs(c.env, c.procs); got != c.want {
			t.Errorf("devProcs(%q, %d) = %d, want %d", c.env, c.procs, got, c.want)
		}
	}
}
