package bench

import (
	"bytes"
	"strings"
	"testing"
)

// The probe measures something (a packed answer takes nanoseconds, not none and not
// milliseconds), reports carry it, and compare sets two runs' probes side by side.
func TestHostProbeInReportsAndCompare(t *testing.T) {
	p := HostProbe()
	if p <= 1 || p > 100_000 {
		t.Fatalf("probe %.1f ns/op: not a packed answer's time", p)
	}
	a := &Report{Title: "a", Machine: Machine{Probe: 66.6}}
	b := &Report{Title: "b", Machine: Machine{Probe: 105.2}}
	var found bool
	for _, m := range CompareMetrics(a, b) {
		if m.Name == "host probe (ns/op)" {
			found = true
			if m.A != 66.6 || m.B != 105.2 {
				t.Errorf("probe metric %+v", m)
			}
		}
	}
	if !found {
		t.Error("compare leaves the host probes out")
	}
	for _, m := range CompareMetrics(a, &Report{}) {
		if m.Name == "host probe (ns/op)" {
			t.Error("compare sets a probe against a report without one")
		}
	}
	var out bytes.Buffer
	PrintSummary(&out, b)
	if !strings.Contains(out.String(), "105.2 ns/op (BenchmarkPackClean202") {
		t.Errorf("summary without the probe:\n%s", out.String())
	}
}
