package rollup

import (
	"os"
	"sync/atomic"
	"unsafe"
)

// Where the claim tables' slots live. A table of mappedMin bytes or more is mapped
// outside Go's heap (claimmem_linux.go: an anonymous private mapping, advised to be
// backed by transparent huge pages), while the process holds fewer than maxMapped such
// tables; a smaller one, or one past that many, is an ordinary slice.
//
// Why outside the heap: the tables are a consumer's largest memory by far (a partition
// of 100 million claims holds gigabytes), and they hold no pointers. In the heap, Go's
// collector lets the heap grow by GOGC percent of everything live (200%, main.go)
// before it collects again, so a consumer holding 1 GB of claims ran at up to 3 GB
// resident (2.5 GB measured after four bench runs with ids, bench/HISTORY.md), three
// times the capacity model's 20–40 B a claim. Mapped, they cost their own size, and the
// heap's growth is paced by the consumer's short-lived buffers alone. Huge pages let a
// probe into a table of megabytes miss the TLB less.
//
// Lifetime: a rebuilt table's old slots are released at once (nothing else refers to
// them); the tables of a set no longer used (a partition revoked, a consumer stopped)
// are released by a cleanup when the set is collected (newClaimSet).

const (
	// mappedMin: tables of at least this many bytes are mapped (1,024 slots). A
	// partition's 256 tables hold at most 4 MiB in the heap below it.
	mappedMin = 16 << 10
	// maxMapped bounds the tables mapped at once, each one mapping of the process: a
	// quarter of Linux's default vm.max_map_count (65,530), which Go's runtime and the
	// libraries need too (the tables of 64 partitions). Past it, tables are slices.
	maxMapped = 16384
)

// slotBytes is the size of a claimSlot.
const slotBytes = int(unsafe.Sizeof(claimSlot{}))

// pageBytes is the unit of a mapping: a mapped table fills whole pages.
var pageBytes = os.Getpagesize()

var (
	// claimTableBytes is the size of every claim table of the process not released yet,
	// mapped or not (the metric svc_rollup_claim_table_bytes).
	claimTableBytes atomic.Int64
	// mappedTables is the number of tables mapped now (at most maxMapped).
	mappedTables atomic.Int64
)

// newSlots returns at least n zeroed slots and whether they are mapped (then as many as
// fill whole pages); releaseSlots gives them back.
func newSlots(n int) ([]claimSlot, bool) {
	if n*slotBytes >= mappedMin {
		if s, ok := mapSlots(n); ok {
			return s, true
		}
	}
	claimTableBytes.Add(int64(n * slotBytes))
	return make([]claimSlot, n), false
}

// mapSlots maps at least n zeroed slots, as many as fill whole pages, unless maxMapped
// tables are mapped already or the mapping fails.
func mapSlots(n int) ([]claimSlot, bool) {
	if mappedTables.Add(1) > maxMapped {
		mappedTables.Add(-1)
		return nil, false
	}
	size := (n*slotBytes + pageBytes - 1) / pageBytes * pageBytes
	b, ok := mapZeroed(size)
	if !ok {
		mappedTables.Add(-1)
		return nil, false
	}
	claimTableBytes.Add(int64(size))
	return unsafe.Slice((*claimSlot)(unsafe.Pointer(unsafe.SliceData(b))), size/slotBytes), true
}

// releaseSlots gives back slots from newSlots, unmapping mapped ones: they must not be
// used after.
func releaseSlots(s []claimSlot, mapped bool) {
	claimTableBytes.Add(-int64(len(s) * slotBytes))
	if mapped {
		mappedTables.Add(-1)
		unmap(unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), len(s)*slotBytes))
	}
}

// releaseTables releases the slots of every table of a set that is no longer used (the
// cleanup newClaimSet registers).
func releaseTables(ts *[256]idTable) {
	for i := range ts {
		releaseSlots(ts[i].slots, ts[i].mapped)
	}
}
