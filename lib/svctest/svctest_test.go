package svctest

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// FreeAddr never names one port twice while its reservations last, though no process
// binds the ports in between (as when a test starts several processes).
func TestFreeAddrHandsOutEachPortOnce(t *testing.T) {
	seen := map[string]bool{}
	for range 300 {
		a := FreeAddr(t)
		if seen[a] {
			t.Fatalf("%s handed out twice", a)
		}
		seen[a] = true
	}
}

// A reservation holds for portHold, across processes (a file), and is taken over after.
func TestReservePortHoldsThenEnds(t *testing.T) {
	const port = 1 // below every drawn port: no draw of a running test meets it
	name := filepath.Join(os.TempDir(), "svctest-ports", strconv.Itoa(port))
	os.Remove(name)
	defer os.Remove(name)
	if !reservePort(port) {
		t.Fatal("a free port was not reserved")
	}
	if reservePort(port) {
		t.Fatal("a reserved port was reserved again")
	}
	old := time.Now().Add(-portHold - time.Minute)
	if err := os.Chtimes(name, old, old); err != nil {
		t.Fatal(err)
	}
	if !reservePort(port) {
		t.Fatal("a reservation past portHold was not taken over")
	}
	if reservePort(port) {
		t.Fatal("the taken-over reservation does not hold")
	}
}
