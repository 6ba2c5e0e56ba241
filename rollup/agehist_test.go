package rollup

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"svc/schema"
	"svc/schema/sink"
)

// The event-age histogram counts like a prometheus.Histogram with the same buckets.
func TestAgeHistogramMatchesPrometheus(t *testing.T) {
	bounds := []float64{.05, .1, .25, .5, 1, 2}
	h := newAgeHistogram("age", "h", bounds)
	ref := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "age", Help: "h", Buckets: bounds}, []string{"clock"})
	s := sink.New(nil, "events", schema.TopicEvents)
	now := time.UnixMilli(10_000_000)
	b := schema.Batch{ReceivedAt: now.UnixMilli() - 1500}
	for _, ms := range []int64{0, 50, 51, 100, 2000, 2001, 999_999} {
		b.Events = append(b.Events, schema.Event{OccurredAt: now.UnixMilli() - ms})
	}
	s.Add(&b, 0, 1)
	h.observeAll(s, now)
	s.EachAge(now, func(r, o time.Duration) {
		ref.WithLabelValues("received").Observe(r.Seconds())
		ref.WithLabelValues("occurred").Observe(o.Seconds())
	})
	got, want := gather(t, h), gather(t, ref)
	if got != want {
		t.Fatalf("age histogram:\n%s\nwant (prometheus.Histogram):\n%s", got, want)
	}
}

func gather(t *testing.T, c prometheus.Collector) string {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			fmt.Fprintf(&out, "%v count=%d sum=%.6f", m.GetLabel()[0].GetValue(), m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum())
			for _, b := range m.GetHistogram().GetBucket() {
				fmt.Fprintf(&out, " le%v=%d", b.GetUpperBound(), b.GetCumulativeCount())
			}
			out.WriteString("\n")
		}
	}
	return out.String()
}
