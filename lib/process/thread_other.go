//go:build !linux

package process

import "errors"

// LowerThreadPriority is Linux's only (thread_linux.go): elsewhere it changes nothing.
func LowerThreadPriority(nice int) error {
	return errors.New("a thread's priority is set on Linux only")
}
