package bench

import (
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
)

// Resamples is how many bootstrap resamples RatioInterval draws.
const Resamples = 10000

// RatioInterval is a bootstrap interval of median(bs)/median(as) at the given level
// (0.9: the 5th and 95th percentiles of the ratio): each of Resamples rounds draws
// len(as) values from as and len(bs) from bs, with replacement, and takes the ratio of
// their medians. The seed is fixed, so the same runs always print the same interval.
// It says how far the ratio of a few runs' medians can be trusted: with four runs a
// side of a p99 that moves by a third from run to run, an interval from 0.8× to 1.6× is
// usual, and a target of "within 10%" is met only when the whole interval is under 1.10.
// NaN, NaN when either side is empty or a resampled median of as is zero.
func RatioInterval(as, bs []float64, level float64) (lo, hi float64) {
	if len(as) == 0 || len(bs) == 0 {
		return math.NaN(), math.NaN()
	}
	rng := rand.New(rand.NewPCG(1, 2))
	ra, rb := make([]float64, len(as)), make([]float64, len(bs))
	ratios := make([]float64, Resamples)
	for i := range ratios {
		for j := range ra {
			ra[j] = as[rng.IntN(len(as))]
		}
		for j := range rb {
			rb[j] = bs[rng.IntN(len(bs))]
		}
		ma := median(ra)
		if ma == 0 {
			return math.NaN(), math.NaN()
		}
		ratios[i] = median(rb) / ma
	}
	slices.Sort(ratios)
	tail := (1 - level) / 2
	return quantile(ratios, tail), quantile(ratios, 1-tail)
}

// quantile is the q-quantile of the sorted values s (the nearest rank).
func quantile(s []float64, q float64) float64 {
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// printRatioInterval writes the 90% bootstrap interval of the p99s' ratio of medians.
func printRatioInterval(w io.Writer, as, bs []*Report) {
	pa, pb := p99s(as), p99s(bs)
	lo, hi := RatioInterval(pa, pb, 0.9)
	if math.IsNaN(lo) {
		return
	}
	fmt.Fprintf(w, "\nlatency p99, B/A of the medians: %.2fx; 90%% bootstrap interval %.2fx to %.2fx (%d resamples of each side's runs)\n",
		median(pb)/median(pa), lo, hi, Resamples)
}

// p99s is each report's latency p99.
func p99s(reps []*Report) []float64 {
	v := make([]float64, len(reps))
	for i, r := range reps {
		v[i] = r.Latency.P99
	}
	return v
}
