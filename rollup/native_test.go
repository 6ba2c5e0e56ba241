package rollup

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/ch-go/proto"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"svc/schema"
)

func TestCompactColumn(t *testing.T) {
	var s proto.ColStr
	f := proto.ColFixedStr{Size: 2}
	var dt proto.ColDateTime
	var u proto.ColUUID
	for i, v := range []string{"a", "", "ccc", "dd"} {
		s.Append(v)
		f.Buf = append(f.Buf, byte(i), byte(i))
		dt.Data = append(dt.Data, proto.DateTime(i))
		u = append(u, uuid.UUID{byte(i)})
	}
	keep := []bool{false, true, true, false}
	for _, c := range []proto.Column{&s, &f, &dt, &u} {
		if err := compactColumn(c, keep); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	_ = s.ForEach(func(_ int, v string) error { got = append(got, v); return nil })
	if len(got) != 2 || got[0] != "" || got[1] != "ccc" {
		t.Fatalf("strings after compact: %q", got)
	}
	s.Append("e") // the buffer stays consistent for the rows that follow
	if s.Rows() != 3 || s.Row(2) != "e" || s.Row(1) != "ccc" {
		t.Fatalf("append after compact: %d rows, %q %q", s.Rows(), s.Row(1), s.Row(2))
	}
	if !bytes.Equal(f.Buf, []byte{1, 1, 2, 2}) {
		t.Fatalf("fixed bytes after compact: %v", f.Buf)
	}
	if len(dt.Data) != 2 || dt.Data[0] != 1 || dt.Data[1] != 2 || len(u) != 2 || u[0][0] != 1 || u[1][0] != 2 {
		t.Fatalf("fixed-width after compact: %v %v", dt.Data, u)
	}
	var ip proto.ColIPv4
	if err := compactColumn(&ip, nil); err == nil {
		t.Fatal("compact of a column type without a rule: no error")
	}
}

// The event-age histogram counts like a prometheus.Histogram with the same buckets.
func TestAgeHistogramMatchesPrometheus(t *testing.T) {
	bounds := []float64{.05, .1, .25, .5, 1, 2}
	h := newAgeHistogram("age", "h", bounds)
	ref := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "age", Help: "h", Buckets: bounds}, []string{"clock"})
	s := NewSink(nil, "events", schema.TopicEvents)
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
