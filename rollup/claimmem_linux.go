package rollup

import "golang.org/x/sys/unix"

// mapZeroed maps n bytes of zeroed memory outside Go's heap, advised to be backed by
// transparent huge pages (honoured where /sys/kernel/mm/transparent_hugepage/enabled is
// "madvise" or "always"), then populated: a table is written all over as it is built,
// and faulting its pages in one call costs less than one fault a page (the growth of
// 4 million claims into an empty index, BenchmarkClaimIndexGrowth: 128–134 ns a claim
// populated, 154–163 not, 110–120 with every table in the heap, which reuses the memory
// the collector freed). A kernel without the populate advice (before Linux 5.14) faults
// as it goes.
func mapZeroed(n int) ([]byte, bool) {
	b, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
	if err != nil {
		return nil, false
	}
	_ = unix.Madvise(b, unix.MADV_HUGEPAGE) // advice, like the next
	_ = unix.Madvise(b, unix.MADV_POPULATE_WRITE)
	return b, true
}

// unmap releases memory mapZeroed mapped.
func unmap(b []byte) { _ = unix.Munmap(b) }
