package rollup

import (
	"encoding/binary"
	"math/bits"
	"runtime"
)

// claimSet holds one partition's claims on client event ids, of every epoch: 256
// open-addressing hash tables with linear probing, keyed by the claim's field. The
// field's bytes are uniform (a SHA-256 XOR a pixel id): its first byte picks the table
// (and is not stored), its bytes 1 to 8 are the hash within it. A slot is 16 bytes, four
// to a 64-byte cache line, and a probe starts at the first slot of a line: a lookup reads
// one line unless the four slots there are taken (in a table at its fullest, about one
// lookup in three reads a second line). A slot holds
//
//	key   bytes 1 to 8 of the field
//	meta  byte 9 of the field (bits 0-7), the acceptance time as seconds since the
//	      table's base plus one (bits 8-31; 0 marks an empty slot), and the low 32 bits
//	      of the position, offset × 64 + index (bits 32-63)
//
// so a claim is known by 80 bits of its field: within one partition two events are
// taken for one with a chance of about n²/2^81 for n claims held (4 × 10^-9 for 100 million).
// The position is compared only with a claim accepted in the same second: two records of
// one partition accepted in the same second and 2^26 records apart cannot be told apart,
// and a partition takes nowhere near 2^26 records in the seconds edges' clocks differ.
//
// A table's base is the horizon when it was last rebuilt (or created): every claim it
// holds was accepted at or after it, and the window (at most MaxEventIDWindow) and the
// margin are far below 2^24 seconds, so a claim accepted past that many seconds after the
// base first rebuilds the table.
//
// Claims are not removed one by one: a claim accepted before the horizon (set by the
// caller, advancing with time) is expired; a lookup passes over it, and an insertion may
// reuse its slot. A table that fills to 13/16 (expired slots included) is rebuilt with
// its live claims only, at twice their number or more: a lookup reads one or two cache
// lines whatever the window, and a rebuild moves 1/256 of the claims (a pause of
// milliseconds, not seconds, in a partition of 100 million claims). The tables take 20
// to 40 bytes a claim (TestEventClaimFootprint).
//
// A table's sizes are idTableMin × (1 + k/256) × 2^n slots, k its index plus the set's
// spread (sizeOf; the line of a key is picked by a multiply, not a mask): the fields are
// uniform, so a partition's 256 tables (and the partitions, alike) fill at the same
// pace, and with one size for all they all doubled within a few percent of their growth,
// bursts of the consumer's CPU (tens of milliseconds a partition at a million claims)
// that the edge's requests waited behind; with staggered sizes the doublings spread
// evenly over the growth (TestRebuildsOfAPartitionsTablesAreStaggered).
type claimSet struct {
	tables  *[256]idTable
	horizon uint32 // claims accepted before it are expired
	spread  uint8  // added to a table's index to pick its sizes (newClaimSet)
	touched uint64 // what touch read (kept so that the reads are made)
}

// newClaimSet returns an empty set whose tables' sizes are staggered by spread (a random
// byte: partitions' sets are staggered against one another too). Its tables' mapped
// slots (claimmem.go) are released when the set is collected.
func newClaimSet(spread uint8) *claimSet {
	s := &claimSet{tables: new([256]idTable), spread: spread}
	runtime.AddCleanup(s, releaseTables, s.tables)
	return s
}

type idTable struct {
	slots  []claimSlot // sizeOf slots or more, whole cache lines
	base   uint32      // a slot's time counts seconds from it
	used   int         // slots not empty, expired ones included
	live   int         // claims not expired at the last rebuild, plus those inserted since
	mapped bool        // slots are mapped outside Go's heap (newSlots)
}

type claimSlot struct{ key, meta uint64 }

const (
	idTableMin  = 64
	lineSlots   = 4         // slots in a cache line
	maxRelative = 1<<24 - 1 // the largest stored time, seconds since the base plus one
	fullNum     = 13        // a table is rebuilt past fullNum/fullDen
	fullDen     = 16        //
)

// keyOf is the part of f a slot keeps besides byte 9.
func keyOf(f *eventField) uint64 { return binary.LittleEndian.Uint64(f[1:9]) }

// rel is the slot's stored time: 0 for an empty slot.
func (sl *claimSlot) rel() uint32 { return uint32(sl.meta>>8) & maxRelative }

// sec is the slot's acceptance time (Unix seconds) in table t.
func (t *idTable) sec(k int) uint32 { return t.base + t.slots[k].rel() - 1 }

// home is the first slot of f's probe sequence: the first of a cache line, the line
// picked by the key's high bits (a multiply: a table's size need not be a power of two).
func (t *idTable) home(key uint64) uint64 {
	line, _ := bits.Mul64(key, uint64(len(t.slots)/lineSlots))
	return line * lineSlots
}

// get returns f's live claim: acceptance time and the low 32 bits of its position.
func (s *claimSet) get(f *eventField) (sec uint32, pos uint32, ok bool) {
	t := &s.tables[f[0]]
	if t.used == 0 {
		return 0, 0, false
	}
	i, _, found := t.find(f, s.horizon)
	if !found {
		return 0, 0, false
	}
	return t.sec(int(i)), uint32(t.slots[i].meta >> 32), true
}

// touch reads the cache line where each field's probe sequence starts, so that the
// lookups that follow find it in the cache: the reads do not depend on one another, and
// the CPU waits for their cache misses (a table of millions of claims is far larger
// than the caches) together instead of one after another, as a loop of lookups would.
func (s *claimSet) touch(fs []eventField) {
	var x uint64
	for k := range fs {
		t := &s.tables[fs[k][0]]
		if len(t.slots) > 0 {
			x ^= t.slots[t.home(keyOf(&fs[k]))].meta
		}
	}
	s.touched ^= x
}

// put sets f's claim, accepted at sec, replacing a live one held. A claim accepted
// before the horizon is expired already and is not kept.
func (s *claimSet) put(f *eventField, sec uint32, pos uint64) {
	if sec < s.horizon {
		return
	}
	t := &s.tables[f[0]]
	if (t.used+1)*fullDen > len(t.slots)*fullNum || sec-t.base+1 > maxRelative {
		t.rebuild(s.horizon, f[0]+s.spread)
	}
	i, free, found := t.find(f, s.horizon)
	if !found {
		i = free
		if t.slots[i].rel() == 0 {
			t.used++
		}
		t.live++
	}
	t.slots[i] = claimSlot{key: keyOf(f), meta: uint64(f[9]) | uint64(sec-t.base+1)<<8 | pos<<32}
}

// find returns the slot holding f's live claim, or (found false) the slot to put it in:
// the first expired slot on its probe sequence, or the empty slot that ends it.
func (t *idTable) find(f *eventField, horizon uint32) (i, free uint64, found bool) {
	end := uint64(len(t.slots))
	key, b9 := keyOf(f), uint64(f[9])
	i = t.home(key)
	free = ^uint64(0)
	for {
		sl := &t.slots[i]
		rel := sl.rel()
		if rel == 0 {
			if free == ^uint64(0) {
				free = i
			}
			return i, free, false
		}
		if t.base+rel-1 < horizon {
			if free == ^uint64(0) {
				free = i
			}
		} else if sl.key == key && sl.meta&0xff == b9 {
			return i, i, true
		}
		if i++; i == end {
			i = 0
		}
	}
}

// sizeOf is the size of a table rebuilt with live claims, k its index plus the set's
// spread: idTableMin × (1 + k/256) × 2^n slots (whole cache lines), at least twice live
// plus one.
func sizeOf(live int, k uint8) int {
	size := idTableMin * (256 + int(k)) / 256 / lineSlots * lineSlots
	for size < 2*(live+1) {
		size *= 2
	}
	return size
}

// rebuild moves the live claims into a table of sizeOf their number and k (or a little
// more: newSlots fills whole pages) whose base is the horizon, dropping the expired ones.
func (t *idTable) rebuild(horizon uint32, k uint8) {
	live := 0
	for k := range t.slots {
		if t.slots[k].rel() != 0 && t.sec(k) >= horizon {
			live++
		}
	}
	old, oldBase, oldMapped := t.slots, t.base, t.mapped
	t.slots, t.mapped = newSlots(sizeOf(live, k))
	t.base = horizon
	size := uint64(len(t.slots))
	defer releaseSlots(old, oldMapped)
	for k := range old {
		sl := old[k]
		rel := sl.rel()
		if rel == 0 || oldBase+rel-1 < horizon {
			continue
		}
		sec := oldBase + rel - 1
		sl.meta = sl.meta&^(maxRelative<<8) | uint64(sec-horizon+1)<<8
		i := t.home(sl.key)
		for t.slots[i].rel() != 0 {
			if i++; i == size {
				i = 0
			}
		}
		t.slots[i] = sl
	}
	t.used, t.live = live, live
}

// held is the number of claims held: live at the last rebuild or inserted since (some
// may have expired meanwhile).
func (s *claimSet) held() int {
	n := 0
	for i := range s.tables {
		n += s.tables[i].live
	}
	return n
}
