package httpserver

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"svc/lib/idempotency"
	"svc/lib/limits"
)

// The batcher sends a request alone while a call slot is free; requests that find every
// slot taken wait, and go out together, in their order, as the next call, sent by the
// first of them; a key's requests with other windows than the call's wait for a later
// call; an error reaches every request of its call.
func TestGateBatcherGathersWaitingRequests(t *testing.T) {
	release := make(chan error)
	var mu sync.Mutex
	var calls [][]string
	b := &gateBatcher{inFlight: 1, run: func(batch []*gateCall) error {
		mu.Lock()
		ids := make([]string, len(batch))
		for i, c := range batch {
			ids[i] = c.rec.Dir
		}
		calls = append(calls, ids)
		mu.Unlock()
		return <-release
	}}
	burst, daily := limits.Windows(10, 100)
	other, _ := limits.Windows(20, 100)
	mk := func(dir, kid string, burst limits.Window) *gateCall {
		return &gateCall{kid: kid, rec: idempotency.PendingRecord{Dir: dir}, burst: burst, daily: daily}
	}
	all := []*gateCall{mk("first", "a", burst), mk("q1", "a", burst), mk("q2", "b", burst), mk("q3", "a", other), mk("q4", "b", burst)}
	errs := make([]error, len(all))
	var wg sync.WaitGroup
	start := func(i int) {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = b.do(all[i]) }()
	}
	queued := func(n int) {
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
			b.mu.Lock()
			l := len(b.queue)
			b.mu.Unlock()
			if l == n {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("queue holds %d, want %d", l, n)
			}
		}
	}
	start(0)
	queued(0)
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		mu.Lock()
		n := len(calls)
		mu.Unlock()
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the first request was not sent alone at once")
		}
	}
	for i := 1; i < len(all); i++ {
		start(i)
		queued(i)
	}
	release <- nil                      // the first call returns: q1 q2 q4 go out, q3 waits
	release <- errors.New("redis down") // that call fails
	release <- nil                      // q3's own call
	wg.Wait()
	want := [][]string{{"first"}, {"q1", "q2", "q4"}, {"q3"}}
	if len(calls) != len(want) {
		t.Fatalf("calls %v, want %v", calls, want)
	}
	for i := range want {
		if len(calls[i]) != len(want[i]) {
			t.Fatalf("calls %v, want %v", calls, want)
		}
		for j := range want[i] {
			if calls[i][j] != want[i][j] {
				t.Fatalf("calls %v, want %v", calls, want)
			}
		}
	}
	for i, err := range errs {
		if failed := err != nil; failed != (i == 1 || i == 2 || i == 4) {
			t.Errorf("request %s: error %v", all[i].rec.Dir, err)
		}
	}
	if b.sending != 0 || len(b.queue) != 0 {
		t.Fatalf("after the calls: %d sending, %d queued", b.sending, len(b.queue))
	}
}

// A call that panics fails its requests with an error and frees its slot: the next
// request is sent.
func TestGateBatcherSurvivesAPanic(t *testing.T) {
	b := &gateBatcher{inFlight: 1, run: func(batch []*gateCall) error {
		if batch[0].rec.Dir == "boom" {
			panic("boom")
		}
		return nil
	}}
	if err := b.do(&gateCall{rec: idempotency.PendingRecord{Dir: "boom"}}); err == nil {
		t.Fatal("a panicking call returned no error")
	}
	done := make(chan error)
	go func() { done <- b.do(&gateCall{rec: idempotency.PendingRecord{Dir: "next"}}) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the request after a panicking call was never sent")
	}
}

// reserve_gate's arguments: what a call's requests share sent once (now, the tables'
// timing, each key's windows, each directory), a request's indices as two bytes, its
// field and reservation only with a directory; and no call of more requests than a byte
// can index.
func TestReserveGateArgsLayout(t *testing.T) {
	burst, daily := limits.Windows(100, 1000)
	now := time.UnixMilli(1_800_000_000_000)
	table := []any{int64(86_400_000), int64(21_600_000), int64(60_000)}
	rec := func(dir, f string) idempotency.PendingRecord {
		return idempotency.PendingRecord{Dir: dir, Field: f, Value: "P" + f}
	}
	calls := []*gateCall{
		{kid: "a", burst: burst, daily: daily, rec: rec("d1", "f1")},
		{kid: "b", burst: burst, daily: daily},
		{kid: "a", burst: burst, daily: daily, rec: rec("d2", "f2")},
		{kid: "b", burst: burst, daily: daily, rec: rec("d1", "f3")},
	}
	keys, args := reserveGateArgs(calls, now, table)
	wantKeys := append(append([]string{"d1", "d2"}, limits.Keys("a")...), limits.Keys("b")...)
	if !slices.Equal(keys, wantKeys) {
		t.Errorf("keys %q, want %q", keys, wantKeys)
	}
	want := []any{4, 2, 2, now.UnixMilli(), table[0], table[1], table[2]}
	want = append(append(want, limits.Args(now, burst, daily)[1:]...), limits.Args(now, burst, daily)[1:]...)
	want = append(want, "\x01\x01", "f1", "Pf1", "\x00\x02", "\x02\x01", "f2", "Pf2", "\x01\x02", "f3", "Pf3")
	if fmt.Sprint(args) != fmt.Sprint(want) {
		t.Errorf("args\n%q\nwant\n%q", args, want)
	}
	many := make([]*gateCall, maxGateCall+1)
	for i := range many {
		many[i] = &gateCall{kid: "a", burst: burst, daily: daily}
	}
	if err := runReserveGate(context.Background(), nil, many, now, table); err == nil {
		t.Errorf("a call of %d requests was sent", len(many))
	}
}

// BenchmarkGateBatcher: what gathering costs a request beside its Redis call: 64
// callers at once through one call slot whose call returns at once (so every request
// but the leaders' waits and is woken). batch/call is the requests per call.
func BenchmarkGateBatcher(b *testing.B) {
	var calls, reqs int64
	var mu sync.Mutex
	g := &gateBatcher{inFlight: 1, run: func(batch []*gateCall) error {
		mu.Lock()
		calls, reqs = calls+1, reqs+int64(len(batch))
		mu.Unlock()
		return nil
	}}
	b.SetParallelism(32)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := g.do(&gateCall{kid: "k"}); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(reqs)/float64(max(calls, 1)), "batch/call")
}
