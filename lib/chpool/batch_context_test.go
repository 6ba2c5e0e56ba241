package chpool

import (
	"context"
	"errors"
	"testing"
	"time"
)

type ctxKey struct{}

// TestBatchContextFollowsItsParentUntilDetached: the batch context carries the parent's
// values and deadline and ends with the parent's error, until detached; after that the
// parent's end does not reach it.
func TestBatchContextFollowsItsParentUntilDetached(t *testing.T) {
	parent, cancel := context.WithTimeout(context.WithValue(context.Background(), ctxKey{}, "v"), time.Hour)
	c := newBatchContext(parent)
	if c.Value(ctxKey{}) != "v" {
		t.Fatal("the parent's value is lost")
	}
	if d, ok := c.Deadline(); !ok || time.Until(d) < 59*time.Minute {
		t.Fatalf("deadline = %v, %v; want the parent's", d, ok)
	}
	if c.Err() != nil {
		t.Fatalf("Err = %v before the parent ended", c.Err())
	}
	cancel()
	select {
	case <-c.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the parent ended, the batch context did not")
	}
	if !errors.Is(c.Err(), context.Canceled) {
		t.Fatalf("Err = %v, want the parent's (canceled)", c.Err())
	}
	c.detach() // an ended context stays ended
	if !errors.Is(c.Err(), context.Canceled) {
		t.Fatalf("Err after detach = %v", c.Err())
	}

	short, cancelShort := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancelShort()
	s := newBatchContext(short)
	<-s.Done()
	if !errors.Is(s.Err(), context.DeadlineExceeded) {
		t.Fatalf("Err = %v, want the parent's (deadline exceeded)", s.Err())
	}

	parent2, cancel2 := context.WithCancel(context.Background())
	d := newBatchContext(parent2)
	d.detach()
	cancel2()
	select {
	case <-d.Done():
		t.Fatal("a detached batch context ended with its parent")
	case <-time.After(50 * time.Millisecond):
	}
	if d.Err() != nil {
		t.Fatalf("Err = %v after detach", d.Err())
	}
}
