package schema

import (
	"encoding/hex"
	"errors"
	"testing"
)

// TestClientEventIDVector pins the mapping of a client's event_id (the dedup key of
// every stored event since the first edge): sha256("order-1")[:16], version 8.
func TestClientEventIDVector(t *testing.T) {
	u := ClientEventID([]byte("order-1"))
	if got := hex.EncodeToString(u[:]); got != "0bafe22156d2898c943b86040446d366" || !u.FromClient() {
		t.Fatalf("ClientEventID(order-1) = %x, FromClient %v", u, u.FromClient())
	}
	if u != ClientEventID([]byte("order-1")) || u == ClientEventID([]byte("order-2")) {
		t.Fatal("ClientEventID is not a function of the event_id alone")
	}
	// The developer pages' example (events.md, "The id it maps to").
	if u := ClientEventID([]byte("order-10045")); hex.EncodeToString(u[:]) != "6244b57bed338ea18be1cd820353f3b4" {
		t.Fatalf("ClientEventID(order-10045) = %x, the pages say 6244b57b-ed33-8ea1-8be1-cd820353f3b4", u)
	}
	assigned := UUID{6: 0x4a, 8: 0x80}
	if assigned.FromClient() {
		t.Fatal("a version 4 id taken for a client's")
	}
}

// TestScanClientIDs: the scan finds the client-given ids by their index, reads the
// header and the occurred_at range, and refuses every value DecodeBatch refuses (each
// truncation of a record included).
func TestScanClientIDs(t *testing.T) {
	b := *ptr(goldenBatches["sandbox_full"])
	b.Events = append([]Event(nil), b.Events...)
	b.Events[0].ID = ClientEventID([]byte("a"))
	b.Events[2].ID = ClientEventID([]byte("c"))
	v := AppendBatch(nil, &b)
	var s ClientIDs
	if err := ScanClientIDs(v, &s); err != nil {
		t.Fatal(err)
	}
	if len(s.IDs) != 2 || s.Index[0] != 0 || s.Index[1] != 2 || s.IDs[0] != b.Events[0].ID || s.IDs[1] != b.Events[2].ID {
		t.Fatalf("ids %x at %v", s.IDs, s.Index)
	}
	if s.Pixel != b.Pixel || s.ReceivedAt != b.ReceivedAt || s.MinOccurred != 0 || s.MaxOccurred != b.Events[0].OccurredAt || len(s.Events) != 0 {
		t.Fatalf("header %x %d, occurred %d..%d, %d events kept", s.Pixel, s.ReceivedAt, s.MinOccurred, s.MaxOccurred, len(s.Events))
	}
	for n := 0; n <= len(v); n++ {
		var d Batch
		errD, errS := DecodeBatch(v[:n], &d), ScanClientIDs(v[:n], &s)
		if (errD == nil) != (errS == nil) || errS != nil && !errors.Is(errS, ErrRecord) {
			t.Fatalf("first %d bytes: DecodeBatch %v, ScanClientIDs %v", n, errD, errS)
		}
	}
}

// TestReceivedAt: ReceivedAt reads what DecodeBatch reads for received_at, for every
// golden batch, and refuses a value cut before it or of another magic.
func TestReceivedAt(t *testing.T) {
	for name, b := range goldenBatches {
		v := AppendBatch(nil, ptr(b))
		var d Batch
		if err := DecodeBatch(v, &d); err != nil {
			t.Fatal(name, err)
		}
		got, err := ReceivedAt(v)
		if err != nil || got != d.ReceivedAt {
			t.Fatalf("%s: ReceivedAt %d, %v; DecodeBatch %d", name, got, err, d.ReceivedAt)
		}
		for n := 0; n < 4+3*16+1; n++ {
			if _, err := ReceivedAt(v[:n]); !errors.Is(err, ErrRecord) {
				t.Fatalf("%s: the first %d bytes read as %v", name, n, err)
			}
		}
		bad := append([]byte("XX"), v[2:]...)
		if _, err := ReceivedAt(bad); !errors.Is(err, ErrRecord) {
			t.Fatalf("%s: another magic read as %v", name, err)
		}
	}
}
