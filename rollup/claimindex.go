package rollup

import (
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"time"
)

// A partition's claims, of both kinds: on client event ids (eventdedup.go) and on batch
// ids (dedup.go). They are decided in the owning consumer's memory, in the partition's
// order, and logged (eventClaims.logClaim) before an INSERT relies on them; a new owner
// replays the log.

// claimIndex is one partition's claims: on client event ids, and on batch ids
// (dedup.go), told apart by their positions' index (batchClaimIndex for a batch).
type claimIndex struct {
	span   int64 // eventClaimSpan, seconds (the epochs of the logs)
	window int64 // seconds: a client event id's
	keep   int64 // seconds: the longer of window and batchWindow, what a claim is kept for
	set    *claimSet
	newest int64 // the latest acceptance time seen, seconds
}

func newClaimIndex(window int64) *claimIndex {
	return &claimIndex{span: int64(eventClaimSpan / time.Second), window: window,
		keep: claimKeep(window), set: newClaimSet(uint8(rand.Uint32()))}
}

// claimKeep is how long (seconds) a partition's claims are kept, in memory and in the
// logs, for the client event ids' window: the longer of it and batchWindow.
func claimKeep(window int64) int64 { return max(window, int64(batchWindow/time.Second)) }

// claimOutcome is what a claim decided.
type claimOutcome uint8

const (
	claimHeld   claimOutcome = iota // this record holds it already (its own redelivery)
	claimNew                        // claimed now: to be logged
	claimIsCopy                     // another record holds it within the window: a copy
)

// claim claims f for the event (or, at index batchClaimIndex, the batch) accepted at
// sec (Unix seconds, after 1970 and before 2106) at position pos: a copy is one
// accepted less than the window of its kind (the client event ids', or batchWindow)
// after the claim held.
func (ix *claimIndex) claim(f eventField, sec int64, pos uint64) claimOutcome {
	if sec > ix.newest {
		ix.newest = sec
		ix.set.horizon = uint32(max(sec-ix.keep-int64(eventIDLagMargin/time.Second), 1))
	}
	window := ix.window
	if pos&(1<<6-1) == batchClaimIndex {
		window = int64(batchWindow / time.Second)
	}
	held, p, ok := ix.set.get(&f)
	if ok {
		if int64(held) == sec && p == uint32(pos) {
			return claimHeld
		}
		if sec-int64(held) < window {
			return claimIsCopy
		}
	}
	ix.set.put(&f, uint32(max(sec, 1)), pos) // past the window: this copy claims it afresh
	return claimNew
}

// held is the number of claims held.
func (ix *claimIndex) held() int { return ix.set.held() }

// appendLogEntry appends one packed claim of a log: field, seconds into the epoch (2
// bytes), position (uvarint).
func appendLogEntry(dst []byte, f eventField, rel int64, pos uint64) []byte {
	dst = append(dst, f[:]...)
	dst = binary.BigEndian.AppendUint16(dst, uint16(rel))
	return binary.AppendUvarint(dst, pos)
}

// replay applies the claims of one log element of epoch e, in order, but those of
// records after offset upTo (see claimIndexOf).
func (ix *claimIndex) replay(e int64, blob []byte, upTo int64) error {
	for len(blob) > 0 {
		if len(blob) < len(eventField{})+3 {
			return errors.New("event claim log: truncated entry")
		}
		var f eventField
		copy(f[:], blob)
		rel := int64(binary.BigEndian.Uint16(blob[len(f):]))
		pos, n := binary.Uvarint(blob[len(f)+2:])
		if n <= 0 || rel >= ix.span {
			return errors.New("event claim log: bad entry")
		}
		blob = blob[len(f)+2+n:]
		if int64(pos>>6) <= upTo {
			ix.claim(f, e*ix.span+rel, pos)
		}
	}
	return nil
}
