//go:build !linux

package rollup

// mapZeroed maps nothing off Linux: the tables stay in Go's heap.
func mapZeroed(int) ([]byte, bool) { return nil, false }

// unmap is never called off Linux (nothing is mapped).
func unmap([]byte) {}
