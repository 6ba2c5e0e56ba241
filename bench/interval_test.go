package bench

import (
	"bytes"
	"math"
	"strings"
	"testing"
)

// TestRatioInterval: the bootstrap interval of a ratio of medians is exact for constant
// runs, the same on every call, holds the point ratio, narrows with more runs, and
// holds 1 for two samples of one spread.
func TestRatioInterval(t *testing.T) {
	if lo, hi := RatioInterval([]float64{10, 10, 10}, []float64{20, 20}, 0.9); lo != 2 || hi != 2 {
		t.Errorf("constant runs: %v to %v, want 2 to 2", lo, hi)
	}
	if lo, hi := RatioInterval(nil, []float64{1}, 0.9); !math.IsNaN(lo) || !math.IsNaN(hi) {
		t.Errorf("no runs of A: %v to %v, want NaN", lo, hi)
	}
	if lo, _ := RatioInterval([]float64{0, 0}, []float64{1}, 0.9); !math.IsNaN(lo) {
		t.Errorf("A's median zero: %v, want NaN", lo)
	}
	// run AV's p99s (bench/HISTORY.md, stop 49)
	a := []float64{9.01, 9.69, 8.77, 17.7, 12.6, 29.4, 36.9, 26.4, 25.4, 23.0}
	b := []float64{10.6, 8.74, 22.5, 27.1, 27.8, 23.3, 9.95, 28.5, 169, 61.7}
	lo, hi := RatioInterval(a, b, 0.9)
	lo2, hi2 := RatioInterval(a, b, 0.9)
	if lo != lo2 || hi != hi2 {
		t.Errorf("two calls: %v–%v and %v–%v", lo, hi, lo2, hi2)
	}
	point := median(b) / median(a)
	if !(lo <= point && point <= hi) || hi-lo < 0.1 {
		t.Errorf("interval %v–%v around %v", lo, hi, point)
	}
	// four runs a side make a wider interval than twelve of the same spread
	a4, b4 := []float64{8, 10, 12, 14}, []float64{9, 11, 13, 15}
	var a12, b12 []float64
	for range 3 {
		a12, b12 = append(a12, a4...), append(b12, b4...)
	}
	l4, h4 := RatioInterval(a4, b4, 0.9)
	l12, h12 := RatioInterval(a12, b12, 0.9)
	if h4-l4 <= h12-l12 {
		t.Errorf("four runs %v–%v not wider than twelve %v–%v", l4, h4, l12, h12)
	}
	// one spread, sampled twice: the interval holds 1
	x := []float64{9, 10, 11, 12, 13, 14, 15, 16, 30}
	y := []float64{16, 15, 14, 13, 12, 11, 10, 9, 31}
	if lo, hi := RatioInterval(x, y, 0.9); !(lo < 1 && hi > 1) {
		t.Errorf("one spread: %v–%v does not hold 1", lo, hi)
	}
	// a higher level, a wider interval
	if l99, h99 := RatioInterval(a, b, 0.99); !(l99 <= lo && h99 >= hi) {
		t.Errorf("99%%: %v–%v inside 90%%: %v–%v", l99, h99, lo, hi)
	}
}

// TestCompareRunsPrintsTheInterval: the comparison of several runs prints the p99's
// ratio of medians with its interval.
func TestCompareRunsPrintsTheInterval(t *testing.T) {
	rep := func(p99 float64) *Report { return &Report{Title: "t", Latency: Summary{P99: p99}} }
	var buf bytes.Buffer
	PrintCompareRuns(&buf, []*Report{rep(10), rep(10)}, []*Report{rep(15), rep(15)}, []string{"a1", "a2"}, []string{"b1", "b2"})
	if want := "B/A of the medians: 1.50x; 90% bootstrap interval 1.50x to 1.50x"; !strings.Contains(buf.String(), want) {
		t.Errorf("compare of runs lacks %q:\n%s", want, buf.String())
	}
}
