package webhooks

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"
)

// An endpoint that takes the whole timeout to answer holds one of the worker's slots,
// not the others' deliveries (pool.go). Two slots; a hanging endpoint's delivery is due
// first, three deliveries to a quick endpoint a second later: the three are made while
// the first still hangs. (When the worker waited for a whole batch of claims, the
// quick endpoint got one request until the hanging one timed out.)
func TestSlowEndpointHoldsOneSlot(t *testing.T) {
	e := newEnv(t)
	e.cfg.Concurrency = 2
	e.cfg.Timeout = 20 * time.Second
	e.cfg.Lease = 30 * time.Second
	ctx := context.Background()
	release := make(chan struct{})
	slow := newReceiver(t, e.clock, func(w http.ResponseWriter, n int) {
		select {
		case <-release:
		case <-time.After(25 * time.Second):
		}
		w.WriteHeader(200)
	})
	quick := newReceiver(t, e.clock, func(w http.ResponseWriter, n int) { w.WriteHeader(200) })
	st := e.store()
	hanging, waiting := uuid.New(), uuid.New()
	if _, err := st.CreateEndpoint(ctx, hanging, slow.URL, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := st.CreateEndpoint(ctx, waiting, quick.URL, nil); err != nil {
		t.Fatal(err)
	}
	em := e.emitter()
	if n, err := em.Emit(ctx, keyEvent(hanging)); err != nil || n != 1 {
		t.Fatalf("Emit = %d, %v", n, err)
	}
	e.clock.Add(time.Second)
	for i := 0; i < 3; i++ {
		if n, err := em.Emit(ctx, keyEvent(waiting)); err != nil || n != 1 {
			t.Fatalf("Emit = %d, %v", n, err)
		}
	}
	w := e.worker("w")
	rctx, stop := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- w.Run(rctx) }()
	deadline := time.Now().Add(5 * time.Second)
	for len(quick.Hits()) < 3 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	quickHits, slowHits := len(quick.Hits()), len(slow.Hits())
	close(release)
	stop()
	select {
	case <-ran:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after its attempts ended")
	}
	if slowHits != 1 || quickHits != 3 {
		t.Fatalf("while one endpoint hung: the quick endpoint got %d of its 3 deliveries, the hanging one %d requests (want 1)",
			quickHits, slowHits)
	}
	if got := len(slow.Hits()); got != 1 {
		t.Fatalf("the hanging endpoint got %d requests, want 1", got)
	}
}
