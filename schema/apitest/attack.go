package apitest

import (
	"net"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// HeapInuse is the process's heap in use after two collections (the second frees what
// the first left in sync.Pool victim caches).
func HeapInuse() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}

// StallBodies opens n connections to s that each send the head of POST path announcing
// a body of announced bytes (with secret as the bearer token, none when empty), then
// one body byte, then nothing: the slow-body attack of issue 13. It returns the
// connections, open until the test ends.
func (s *Server) StallBodies(t testing.TB, path, secret string, n, announced int) []net.Conn {
	t.Helper()
	head := "POST " + path + " HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\nContent-Length: " +
		strconv.Itoa(announced) + "\r\n"
	if secret != "" {
		head += "Authorization: Bearer " + secret + "\r\n"
	}
	return s.open(t, head+"\r\n{", n, true)
}

// Flood opens n connections to s that each send msg (typically a request's head and part
// of its body) and then nothing. It returns the connections, open until the test ends.
// A write the server cut short (it answered and closed first) is not a failure.
func (s *Server) Flood(t testing.TB, msg string, n int) []net.Conn {
	t.Helper()
	return s.open(t, msg, n, false)
}

// open opens n connections that each write msg, in waves (the listen backlog is finite);
// with strict, a failed write fails the test.
func (s *Server) open(t testing.TB, msg string, n int, strict bool) []net.Conn {
	t.Helper()
	addr := strings.TrimPrefix(s.URL, "http://")
	conns := make([]net.Conn, n)
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for i := range conns {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			c, err := net.DialTimeout("tcp", addr, 5*time.Second)
			if err != nil {
				errs <- err
				return
			}
			conns[i] = c
			if _, err := c.Write([]byte(msg)); err != nil && strict {
				errs <- err
			}
		}(i)
		if i%64 == 63 {
			wg.Wait()
		}
	}
	wg.Wait()
	t.Cleanup(func() {
		for _, c := range conns {
			if c != nil {
				c.Close()
			}
		}
	})
	select {
	case err := <-errs:
		t.Fatalf("opening attack connections: %v", err)
	default:
	}
	return conns
}

// PeakHeapGrowth samples the heap three times, 250 ms apart (time for the server to read
// what connections sent), and returns the largest growth over base.
func PeakHeapGrowth(base uint64) uint64 {
	var peak uint64
	for i := 0; i < 3; i++ {
		time.Sleep(250 * time.Millisecond)
		if h := HeapInuse(); h > base && h-base > peak {
			peak = h - base
		}
	}
	return peak
}
