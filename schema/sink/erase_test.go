package sink

import (
	"reflect"
	"testing"
	"time"

	"github.com/google/uuid"

	"svc/schema"
	"svc/schema/erasure"
)

// TestSlicesAreTheRowsDistinctPixelDays: one slice per (workspace, environment, pixel,
// UTC day) of the buffered rows, in order of first appearance, however the rows repeat.
func TestSlicesAreTheRowsDistinctPixelDays(t *testing.T) {
	s := New(nil, "events", "events.v1")
	bs := sinkTestBatches()
	for i, b := range append(bs, bs[0], bs[2]) {
		s.Add(&b, 0, int64(i))
	}
	day := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	sl := func(ws schema.UUID, sandbox bool, px schema.UUID, d time.Time) erasure.Slice {
		return erasure.Slice{Workspace: uuid.UUID(ws), Sandbox: sandbox, PixelDay: erasure.PixelDay{Pixel: uuid.UUID(px), Date: d}}
	}
	want := []erasure.Slice{
		sl(schema.UUID{1, 2}, false, schema.UUID{3}, day), // both events of the first record: the day's first and last ms
		sl(schema.UUID{1, 2}, true, schema.UUID{5}, day.AddDate(0, 0, 1)),
		sl(schema.UUID{9}, false, schema.UUID{3}, day),
	}
	if got := s.Slices(); !reflect.DeepEqual(got, want) {
		t.Fatalf("slices %v, want %v", got, want)
	}
	s.Reset()
	if got := s.Slices(); len(got) != 0 {
		t.Fatalf("an empty sink has slices %v", got)
	}
}

// BenchmarkSinkSlices is the consumer's cost, per row, of listing a flush's slices
// before its INSERT: 50,000 rows of 50-event records over 8 pixels, the records on
// alternate days (rows of one record on one day: the common case, which skips the map).
func BenchmarkSinkSlices(b *testing.B) {
	s := New(nil, "events", "events.v1")
	day := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	for r := range 1000 {
		batch := schema.Batch{Workspace: schema.UUID{1}, Pixel: schema.UUID{byte(r % 8)}, ReceivedAt: day, Events: make([]schema.Event, 50)}
		for i := range batch.Events {
			batch.Events[i] = schema.Event{Name: "purchase", OccurredAt: day + int64(r/8%2)*86_400_000}
		}
		s.Add(&batch, 0, int64(r))
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if len(s.Slices()) != 16 {
			b.Fatal("want 16 slices")
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*s.Len()), "ns/row")
}
