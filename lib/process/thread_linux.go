package process

import (
	"runtime"
	"syscall"
)

// LowerThreadPriority gives the calling goroutine an OS thread of its own for the rest of
// its life, at the nice value nice (1..19: a lower priority than the process's other
// threads), so that the kernel runs the process's other goroutines first when the CPU is
// short: a background loop beside latency-bound handlers in one process (the rollup
// consumer beside the edge in `svc dev`). Go's scheduler has no priorities; the kernel's
// has, per thread. The thread is never handed back to other goroutines: it ends with the
// goroutine. It returns setpriority's error (the goroutine keeps its own thread either way).
func LowerThreadPriority(nice int) error {
	runtime.LockOSThread() // never unlocked: Go ends the thread when the goroutine returns
	return syscall.Setpriority(syscall.PRIO_PROCESS, syscall.Gettid(), nice)
}
