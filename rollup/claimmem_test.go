package rollup

import (
	"encoding/binary"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"
)

// A table that grows to mappedMin bytes or more is mapped outside Go's heap: the heap
// does not grow with it, svc_rollup_claim_table_bytes counts it, its claims are found
// after the rebuilds that moved them from the heap into mappings, and the mappings are
// released when the set is collected (the count back where it was).
func TestClaimTablesLeaveTheHeapAndAreReleased(t *testing.T) {
	runtime.GC()
	before, mappedBefore := claimTableBytes.Load(), mappedTables.Load()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	s := newClaimSet(0)
	s.horizon = 1_800_000_000 - 3600 // as claimIndex.claim sets it
	const n = 200_000                // into table 7 alone: 3.2 MB of slots or more
	field := func(i int) (f eventField) {
		f[0] = 7
		binary.LittleEndian.PutUint64(f[1:9], uint64(i+1)*0x9E3779B97F4A7C15)
		f[9] = byte(i)
		return f
	}
	for i := range n {
		f := field(i)
		s.put(&f, 1_800_000_000, uint64(i))
	}
	tbl := &s.tables[7]
	if !tbl.mapped || len(tbl.slots)*slotBytes < mappedMin {
		t.Fatalf("a table of %d slots: mapped %v, want mapped", len(tbl.slots), tbl.mapped)
	}
	small := &s.tables[8]
	f8 := eventField{8, 1}
	s.put(&f8, 1_800_000_000, 1)
	if small.mapped {
		t.Fatal("a table of one claim is mapped")
	}
	if got, want := claimTableBytes.Load()-before, int64((len(tbl.slots)+len(small.slots))*slotBytes); got != want {
		t.Fatalf("svc_rollup_claim_table_bytes grew by %d, want %d", got, want)
	}
	for i := range n {
		f := field(i)
		if _, pos, ok := s.get(&f); !ok || pos != uint32(i) {
			t.Fatalf("claim %d: found %v at %d", i, ok, pos)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&m1)
	if grew := int64(m1.HeapAlloc) - int64(m0.HeapAlloc); grew > int64(len(tbl.slots)*slotBytes)/4 {
		t.Fatalf("the heap grew by %d B with a mapped table of %d B", grew, len(tbl.slots)*slotBytes)
	}
	runtime.KeepAlive(s) // the last use: collected by the loop's collections
	for range 50 {
		runtime.GC()
		if claimTableBytes.Load() == before && mappedTables.Load() == mappedBefore {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("after the set was collected: svc_rollup_claim_table_bytes %d, want %d; %d tables mapped, want %d",
		claimTableBytes.Load(), before, mappedTables.Load(), mappedBefore)
}

// Past maxMapped tables mapped at once, a table is a slice of the heap, and works as
// one: the process keeps mappings for Go's runtime.
func TestClaimTablesPastTheMappingBudgetStayInTheHeap(t *testing.T) {
	taken := maxMapped - mappedTables.Load()
	mappedTables.Add(taken)
	defer mappedTables.Add(-taken)
	s := newClaimSet(0)
	s.horizon = 1_800_000_000 - 3600
	for i := range 20_000 { // table 3: 320 KB of slots or more
		var f eventField
		f[0] = 3
		binary.LittleEndian.PutUint64(f[1:9], uint64(i+1)*0x9E3779B97F4A7C15)
		s.put(&f, 1_800_000_000, uint64(i))
		if _, _, ok := s.get(&f); !ok {
			t.Fatalf("claim %d not found", i)
		}
	}
	if tbl := &s.tables[3]; tbl.mapped || len(tbl.slots)*slotBytes < mappedMin {
		t.Fatalf("a table of %d slots past the budget: mapped %v, want a slice", len(tbl.slots), tbl.mapped)
	}
	if got := mappedTables.Load(); got != maxMapped {
		t.Fatalf("%d tables mapped, want the budget's %d", got, maxMapped)
	}
}

// BenchmarkClaimIndexGrowth is the index's cost a claim while it grows: 4 million fresh
// claims into an empty partition's index, as the consumer claims records of 50 events,
// every table rebuilt as it doubles (its slots mapped and faulted in, or allocated and
// zeroed in the heap). ns/claim is per claim.
func BenchmarkClaimIndexGrowth(b *testing.B) {
	rng := rand.New(rand.NewPCG(5, 6))
	fields := make([]eventField, 4_000_000)
	for i := range fields {
		fields[i] = randomField(rng)
	}
	b.ResetTimer()
	for range b.N {
		ix := newClaimIndex(int64(DefaultEventIDWindow / time.Second))
		for i := 0; i < len(fields); i += 50 {
			batch := fields[i:min(i+50, len(fields))]
			ix.set.touch(batch)
			for j := range batch {
				ix.claim(batch[j], 1_800_000_000, uint64(i+j))
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(fields)), "ns/claim")
}
