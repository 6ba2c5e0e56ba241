package rollup

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/ch-go/proto"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"svc/schema"
)

// The sink's buffers must hold exactly what ch-go's Native encoders write for the same
// values, since the driver decodes them as such.
func TestNativeColumnsMatchChGoEncoding(t *testing.T) {
	ids := []schema.UUID{{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}, {0xff, 0, 0xee}}
	ours := newUUIDColumn()
	var theirs proto.ColUUID
	for i := range ids {
		w := nativeUUID(&ids[i])
		ours.append(&w)
		theirs.Append(uuid.UUID(ids[i]))
	}
	expectNative(t, "UUID", &ours, theirs)

	var dt fixedColumn[uint32]
	var chDT proto.ColDateTime
	var i64 fixedColumn[int64]
	var chDec proto.ColDecimal64
	var d fixedColumn[uint16]
	var chDate proto.ColDate
	var i32 fixedColumn[int32]
	var chI32 proto.ColInt32
	for _, v := range []int64{0, 1, -5, 1 << 40, 4102444799} {
		dt.v = append(dt.v, uint32(v))
		chDT.Data = append(chDT.Data, proto.DateTime(uint32(v)))
		i64.v = append(i64.v, v)
		chDec = append(chDec, proto.Decimal64(v))
		d.v = append(d.v, uint16(v))
		chDate = append(chDate, proto.Date(uint16(v)))
		i32.v = append(i32.v, int32(v))
		chI32 = append(chI32, int32(v))
	}
	expectNative(t, "DateTime", &dt, chDT)
	expectNative(t, "Decimal64", &i64, chDec)
	expectNative(t, "Date", &d, chDate)
	expectNative(t, "Int32", &i32, chI32)

	var str stringColumn
	var chStr proto.ColStr
	for _, v := range []string{"", "purchase", string(bytes.Repeat([]byte("x"), 300))} {
		str.append(v)
		chStr.Append(v)
	}
	expectNative(t, "String", &str, chStr)
}

func expectNative(t *testing.T, name string, ours nativeColumn, theirs proto.ColInput) {
	t.Helper()
	var b proto.Buffer
	theirs.EncodeColumn(&b)
	if !bytes.Equal(ours.native(), b.Buf) {
		t.Errorf("%s: sink %x, ch-go %x", name, ours.native(), b.Buf)
	}
}

func TestNativeColumnsCompact(t *testing.T) {
	var s stringColumn
	var f fixedBytesColumn
	f.size = 2
	for i, v := range []string{"a", "", "ccc", "dd"} {
		s.append(v)
		f.b = append(f.b, byte(i), byte(i))
	}
	keep := []bool{false, true, true, false}
	s.compact(keep)
	f.compact(keep)
	if got := s.rows(); len(got) != 2 || got[0] != "" || got[1] != "ccc" {
		t.Fatalf("strings after compact: %q", got)
	}
	if !bytes.Equal(f.b, []byte{1, 1, 2, 2}) {
		t.Fatalf("fixed bytes after compact: %v", f.b)
	}
}

func TestPartsReader(t *testing.T) {
	r := partsReader{parts: [][]byte{[]byte("ab"), nil, []byte("cde")}}
	got, err := io.ReadAll(&r)
	if err != nil || string(got) != "abcde" {
		t.Fatalf("read %q, %v", got, err)
	}
}

// rows returns the column's rows as strings .
func (c *stringColumn) rows() []string {
	var out []string
	for off := 0; off < len(c.b); {
		n, w := binary.Uvarint(c.b[off:])
		out = append(out, string(c.b[off+w:off+w+int(n)]))
		off += w + int(n)
	}
	return out
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
