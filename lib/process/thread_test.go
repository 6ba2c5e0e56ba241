//go:build linux

package process_test

import (
	"runtime"
	"syscall"
	"testing"

	"svc/lib/process"
)

// TestLowerThreadPriority: the goroutine keeps one thread of its own, at the nice value
// given, through many reschedules; once it returns, no other goroutine runs at that nice
// value (Go ends the thread rather than reuse it).
func TestLowerThreadPriority(t *testing.T) {
	type seen struct {
		tids map[int]bool
		nice int
		err  error
	}
	done := make(chan seen)
	go func() {
		s := seen{tids: map[int]bool{}}
		s.err = process.LowerThreadPriority(7)
		for range 1000 {
			s.tids[syscall.Gettid()] = true
			runtime.Gosched()
		}
		var err error
		s.nice, err = threadNice()
		if s.err == nil {
			s.err = err
		}
		done <- s
	}()
	s := <-done
	if s.err != nil {
		t.Fatal(s.err)
	}
	if len(s.tids) != 1 || s.nice != 7 {
		t.Fatalf("threads %v, nice %d; want one thread at nice 7", s.tids, s.nice)
	}
	nices := make(chan int)
	for range 200 {
		go func() {
			runtime.Gosched()
			n, _ := threadNice()
			nices <- n
		}()
	}
	for range 200 {
		if n := <-nices; n != 0 {
			t.Fatalf("a later goroutine ran at nice %d", n)
		}
	}
}

// threadNice is the calling thread's nice value (getpriority's system call answers
// 20 - nice; the C library's wrapper undoes that, Go's does not).
func threadNice() (int, error) {
	prio, err := syscall.Getpriority(syscall.PRIO_PROCESS, syscall.Gettid())
	return 20 - prio, err
}
