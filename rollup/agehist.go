package rollup

import (
	"svc/schema/sink"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// ageHistogram is svc_rollup_event_age_seconds{clock}: two observations per event, so
// it counts in plain integers under one lock per flush and is exposed as constant
// histograms on each scrape (a prometheus.Histogram's atomic Observe per event took
// about a tenth of the consumer's CPU). Bucket semantics are Prometheus's: an
// observation v counts in every bucket whose upper bound is >= v.
type ageHistogram struct {
	desc   *prometheus.Desc
	bounds []float64 // upper bounds, ascending

	mu     sync.Mutex
	clocks [2]ageCounts // received, occurred
}

var ageClocks = [2]string{"received", "occurred"}

type ageCounts struct {
	buckets []uint64 // per bucket, not cumulative; the last one is +Inf
	count   uint64
	sum     float64
}

func newAgeHistogram(name, help string, bounds []float64) *ageHistogram {
	h := &ageHistogram{desc: prometheus.NewDesc(name, help, []string{"clock"}, nil), bounds: bounds}
	for i := range h.clocks {
		h.clocks[i].buckets = make([]uint64, len(bounds)+1)
	}
	return h
}

func (c *ageCounts) add(bounds []float64, v float64) {
	i := 0
	for i < len(bounds) && v > bounds[i] {
		i++
	}
	c.buckets[i]++
	c.count++
	c.sum += v
}

// observeAll records the ages at now of every event buffered in s.
func (h *ageHistogram) observeAll(s *sink.Sink, now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s.EachAge(now, func(sinceReceived, sinceOccurred time.Duration) {
		h.clocks[0].add(h.bounds, sinceReceived.Seconds())
		h.clocks[1].add(h.bounds, sinceOccurred.Seconds())
	})
}

func (h *ageHistogram) Describe(ch chan<- *prometheus.Desc) { ch <- h.desc }

func (h *ageHistogram) Collect(ch chan<- prometheus.Metric) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for i, c := range h.clocks {
		cum := make(map[float64]uint64, len(h.bounds))
		var n uint64
		for j, b := range h.bounds {
			n += c.buckets[j]
			cum[b] = n
		}
		ch <- prometheus.MustNewConstHistogram(h.desc, c.count, c.sum, cum, ageClocks[i])
	}
}
