package rollup

import "syscall"

// mapZeroed maps n bytes of zeroed memory outside Go's heap, advised to be backed by
// transparent huge pages (honoured where /sys/kernel/mm/transparent_hugepage/enabled is
// "madvise" or "always").
func mapZeroed(n int) ([]byte, bool) {
	b, err := syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		return nil, false
	}
	_ = syscall.Madvise(b, syscall.MADV_HUGEPAGE) // advice: without it, 4 KiB pages
	return b, true
}

// unmap releases memory mapZeroed mapped.
func unmap(b []byte) { _ = syscall.Munmap(b) }
