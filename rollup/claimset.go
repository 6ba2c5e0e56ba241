package rollup

import "encoding/binary"

// claimSet holds one partition's claims on client event ids, of every epoch: 256
// open-addressing hash tables with linear probing, keyed by the claim's field. The
// field's bytes are uniform (a SHA-256 XOR a pixel id): its first byte picks the table,
// its bytes 1 to 8 are the hash within it. A slot is 22 bytes: the field (11), the
// acceptance time (4: Unix seconds; 0 marks an empty slot) and the position (7: offset
// × 64 + index, offsets below 2^50).
//
// Claims are not removed one by one: a claim accepted before the horizon (set by the
// caller, advancing with time) is expired; a lookup passes over it, and an insertion may
// reuse its slot. A table that fills to 3/4 (expired slots included) is rebuilt with
// its live claims only, at twice their number or more: a lookup probes a few slots
// (one cache miss for most), whatever the window, and a rebuild moves 1/256 of the
// claims (a pause of milliseconds, not seconds, in a partition of 100 million claims).
type claimSet struct {
	tables  [256]idTable
	horizon uint32 // claims accepted before it are expired
	touched byte   // what touch read (kept so that the reads are made)
}

type idTable struct {
	slots []claimSlot
	used  int // slots not empty, expired ones included
	live  int // claims not expired at the last rebuild, plus those inserted since
}

type claimSlot [22]byte

const idTableMin = 64

func (sl *claimSlot) sec() uint32 { return binary.LittleEndian.Uint32(sl[11:15]) }

func (sl *claimSlot) pos() uint64 {
	var b [8]byte
	copy(b[:7], sl[15:])
	return binary.LittleEndian.Uint64(b[:])
}

func (sl *claimSlot) set(f *eventField, sec uint32, pos uint64) {
	copy(sl[:11], f[:])
	binary.LittleEndian.PutUint32(sl[11:15], sec)
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], pos)
	copy(sl[15:], b[:7])
}

// get returns f's live claim: acceptance time and position.
func (s *claimSet) get(f *eventField) (sec uint32, pos uint64, ok bool) {
	t := &s.tables[f[0]]
	if t.used == 0 {
		return 0, 0, false
	}
	i, _, found := t.find(f, s.horizon)
	if !found {
		return 0, 0, false
	}
	return t.slots[i].sec(), t.slots[i].pos(), true
}

// touch reads the start of each field's probe sequence (its first slot, and the slot
// three further on: 66 bytes on, in the next cache line), so that the lookups that
// follow find them in the cache: the reads do not depend on one another, and the CPU
// waits for their cache misses (a table of millions of claims is far larger than the
// caches) together instead of one after another, as a loop of lookups would.
func (s *claimSet) touch(fs []eventField) {
	var x byte
	for k := range fs {
		t := &s.tables[fs[k][0]]
		if len(t.slots) > 0 {
			mask := uint64(len(t.slots) - 1)
			i := binary.LittleEndian.Uint64(fs[k][1:9]) & mask
			x ^= t.slots[i][11] ^ t.slots[(i+3)&mask][11]
		}
	}
	s.touched ^= x
}

// put sets f's claim, replacing a live one held.
func (s *claimSet) put(f *eventField, sec uint32, pos uint64) {
	t := &s.tables[f[0]]
	if (t.used+1)*4 > len(t.slots)*3 {
		t.rebuild(s.horizon)
	}
	i, free, found := t.find(f, s.horizon)
	if !found {
		i = free
		if t.slots[i].sec() == 0 {
			t.used++
		}
		t.live++
	}
	t.slots[i].set(f, sec, pos)
}

// find returns the slot holding f's live claim, or (found false) the slot to put it in:
// the first expired slot on its probe sequence, or the empty slot that ends it.
func (t *idTable) find(f *eventField, horizon uint32) (i, free uint64, found bool) {
	mask := uint64(len(t.slots) - 1)
	i = binary.LittleEndian.Uint64(f[1:9]) & mask
	free = ^uint64(0)
	for {
		sl := &t.slots[i]
		sec := sl.sec()
		if sec == 0 {
			if free == ^uint64(0) {
				free = i
			}
			return i, free, false
		}
		if sec < horizon {
			if free == ^uint64(0) {
				free = i
			}
		} else if [11]byte(sl[:11]) == *f {
			return i, i, true
		}
		i = (i + 1) & mask
	}
}

// rebuild moves the live claims into a table of at least twice their number (and at
// least idTableMin slots), dropping the expired ones.
func (t *idTable) rebuild(horizon uint32) {
	live := 0
	for k := range t.slots {
		if sec := t.slots[k].sec(); sec != 0 && sec >= horizon {
			live++
		}
	}
	size := idTableMin
	for size < 2*(live+1) {
		size *= 2
	}
	old := t.slots
	t.slots = make([]claimSlot, size)
	mask := uint64(size - 1)
	for k := range old {
		sl := &old[k]
		if sec := sl.sec(); sec == 0 || sec < horizon {
			continue
		}
		i := binary.LittleEndian.Uint64(sl[1:9]) & mask
		for t.slots[i].sec() != 0 {
			i = (i + 1) & mask
		}
		t.slots[i] = *sl
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
