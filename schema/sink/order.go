package sink

import (
	"bytes"
	"fmt"
	"slices"
	"strings"

	"github.com/ClickHouse/ch-go/proto"
	"github.com/google/uuid"
)

// ClickHouse sorts every block inserted into a MergeTree table by the table's sorting key
// before it writes the block's part, unless it finds the block sorted already (a check
// that gives up at the first rows out of order; such blocks count in the server's
// MergeTreeDataWriterBlocksAlreadySorted event). The sort and the permutation of every
// column that follows were most of an INSERT's cost: 1.94 M rows of a bench run inserted
// in blocks of about a million rows took the server 2.30–2.34 s of CPU in the consumer's
// order and 1.07–1.11 s sorted, materialized views included; in the whole pipeline, with
// the consumer's 200,000-row blocks, ClickHouse's CPU per event fell by about 0.3 µs
// (bench/HISTORY.md, stop 47).
//
// So a flush hands ClickHouse its rows in the events table's sorting key, (workspace_id,
// sandbox, pixel_id, event_date, event_name) (migrations/0001_events.sql), compared as
// ClickHouse compares them: a UUID by its last eight bytes, then its first eight (each
// half as a big-endian number, so bytewise: 18.16 and 26.x alike, TestOrderIsClickHouses),
// UInt8 and Date as numbers, a String bytewise. Rows of one key keep the order they were
// buffered in. The order of rows within a part changes nothing stored but the order:
// every table and view reads the part as a set (sums, counts, maxima and uniq states).
// Should the table's key ever differ from this one, ClickHouse sorts the block itself,
// as before: slower, never wrong.
//
// Sorting here is cheap because the key's values are few: the rows of one record share
// their (workspace, sandbox, pixel), and a flush holds few dates and event names. Each
// value gets its rank among the flush's distinct values, and a counting sort over the
// ranks orders the rows in two passes.

// rowOrder holds a flush's permutation and the buffers that compute it, kept across
// flushes.
type rowOrder struct {
	perm   []uint32 // perm[k]: the buffered row that goes k-th
	key    []uint32 // the rank of each buffered row's (group, date, name)
	group  []uint32 // each buffered row's (workspace, sandbox, pixel) by first appearance
	counts []uint32
	groups map[groupKey]uint32
	names  map[string]uint32
	gKeys  []groupKey
	nKeys  []string
	nameOf []uint32 // each buffered row's name by first appearance
	dates  []uint32 // rank+1 of each date - minimum date (0: absent)
}

// groupKey is what the rows of one record share of the sorting key.
type groupKey struct {
	ws, px  uuid.UUID
	sandbox uint8
}

// compareUUID compares a and b as ClickHouse compares UUIDs.
func compareUUID(a, b uuid.UUID) int {
	if c := bytes.Compare(a[8:], b[8:]); c != 0 {
		return c
	}
	return bytes.Compare(a[:8], b[:8])
}

func compareGroups(a, b groupKey) int {
	if c := compareUUID(a.ws, b.ws); c != 0 {
		return c
	}
	if a.sandbox != b.sandbox {
		return int(a.sandbox) - int(b.sandbox)
	}
	return compareUUID(a.px, b.px)
}

// order returns the permutation that sorts c's rows by the events table's sorting key,
// or nil when they are in that order already.
func (o *rowOrder) order(c *sinkColumns) []uint32 {
	n := len(c.offset)
	if n < 2 {
		return nil
	}
	gRank, nG := o.rankGroups(c)
	nRank, nN := o.rankNames(c)
	dRank, minDate, nD := o.rankDates(c)
	combos := uint64(nG) * uint64(nD) * uint64(nN)
	if combos > 2*uint64(n)+1<<16 { // a table of counts far larger than the rows
		return o.compareSort(c, gRank, nRank, dRank, minDate)
	}
	o.key = slices.Grow(o.key[:0], n)[:n]
	sorted := true
	for i := range n {
		d := dRank[int(c.date[i])-minDate] - 1
		k := (gRank[o.group[i]]*uint32(nD)+d)*uint32(nN) + nRank[o.nameOf[i]]
		o.key[i] = k
		sorted = sorted && (i == 0 || k >= o.key[i-1])
	}
	if sorted {
		return nil
	}
	return o.countingSort(int(combos))
}

// rankGroups gives each row its record's group (o.group) and returns each group's rank.
func (o *rowOrder) rankGroups(c *sinkColumns) (rank []uint32, n int) {
	if o.groups == nil {
		o.groups = map[groupKey]uint32{}
	}
	clear(o.groups)
	o.gKeys, o.group = o.gKeys[:0], o.group[:0]
	var last groupKey
	id := uint32(0)
	for i := range c.offset {
		k := groupKey{c.workspace[i], c.pixel[i], uint8(c.sandbox[i])}
		if i == 0 || k != last {
			g, ok := o.groups[k]
			if !ok {
				g = uint32(len(o.gKeys))
				o.groups[k] = g
				o.gKeys = append(o.gKeys, k)
			}
			id, last = g, k
		}
		o.group = append(o.group, id)
	}
	return ranks(o.gKeys, compareGroups), len(o.gKeys)
}

// rankNames gives each row its event name's id (o.nameOf) and returns each name's rank.
func (o *rowOrder) rankNames(c *sinkColumns) (rank []uint32, n int) {
	if o.names == nil {
		o.names = map[string]uint32{}
	}
	clear(o.names)
	o.nKeys, o.nameOf = o.nKeys[:0], o.nameOf[:0]
	for i := range c.offset {
		p := c.name.Pos[i]
		v := c.name.Buf[p.Start:p.End]
		id, ok := o.names[string(v)] // no allocation for a lookup
		if !ok {
			id = uint32(len(o.nKeys))
			s := string(v)
			o.names[s] = id
			o.nKeys = append(o.nKeys, s)
		}
		o.nameOf = append(o.nameOf, id)
	}
	return ranks(o.nKeys, strings.Compare), len(o.nKeys)
}

// rankDates returns, for each date from the rows' earliest on, its rank + 1 among the
// rows' dates (0 where no row has it), the earliest date, and the number of dates.
func (o *rowOrder) rankDates(c *sinkColumns) (rank []uint32, minDate, n int) {
	lo, hi := int(c.date[0]), int(c.date[0])
	for _, d := range c.date {
		lo, hi = min(lo, int(d)), max(hi, int(d))
	}
	o.dates = slices.Grow(o.dates[:0], hi-lo+1)[:hi-lo+1]
	clear(o.dates)
	for _, d := range c.date {
		o.dates[int(d)-lo] = 1
	}
	for i, seen := range o.dates {
		if seen != 0 {
			n++
			o.dates[i] = uint32(n)
		}
	}
	return o.dates, lo, n
}

// ranks returns the rank of each of keys (distinct) in cmp's order.
func ranks[K any](keys []K, cmp func(a, b K) int) []uint32 {
	idx := make([]uint32, len(keys))
	for i := range idx {
		idx[i] = uint32(i)
	}
	slices.SortFunc(idx, func(a, b uint32) int { return cmp(keys[a], keys[b]) })
	rank := make([]uint32, len(keys))
	for r, i := range idx {
		rank[i] = uint32(r)
	}
	return rank
}

// countingSort orders the rows by o.key (each below combos), stably.
func (o *rowOrder) countingSort(combos int) []uint32 {
	o.counts = slices.Grow(o.counts[:0], combos+1)[:combos+1]
	clear(o.counts)
	for _, k := range o.key {
		o.counts[k+1]++
	}
	for i := 1; i <= combos; i++ {
		o.counts[i] += o.counts[i-1]
	}
	o.perm = slices.Grow(o.perm[:0], len(o.key))[:len(o.key)]
	for i, k := range o.key {
		o.perm[o.counts[k]] = uint32(i)
		o.counts[k]++
	}
	return o.perm
}

// compareSort orders the rows by their ranks, stably, by comparison, or returns nil
// when they are in order.
func (o *rowOrder) compareSort(c *sinkColumns, gRank, nRank, dRank []uint32, minDate int) []uint32 {
	cmp := func(a, b uint32) int {
		ra := [3]uint32{gRank[o.group[a]], dRank[int(c.date[a])-minDate], nRank[o.nameOf[a]]}
		rb := [3]uint32{gRank[o.group[b]], dRank[int(c.date[b])-minDate], nRank[o.nameOf[b]]}
		return slices.Compare(ra[:], rb[:])
	}
	o.perm = o.perm[:0]
	for i := range c.offset {
		o.perm = append(o.perm, uint32(i))
	}
	if slices.IsSortedFunc(o.perm, cmp) {
		return nil
	}
	slices.SortStableFunc(o.perm, cmp)
	return o.perm
}

// gatherColumn sets dst to src's rows in perm's order. dst may be src when perm is
// ascending (a compaction: no row is written before it is read).
func gatherColumn(dst, src proto.Column, perm []uint32) error {
	switch d := dst.(type) {
	case *proto.ColUUID:
		*d = gather(*d, *src.(*proto.ColUUID), perm)
	case *proto.ColUInt8:
		*d = gather(*d, *src.(*proto.ColUInt8), perm)
	case *proto.ColDate:
		*d = gather(*d, *src.(*proto.ColDate), perm)
	case *proto.ColDecimal64:
		*d = gather(*d, *src.(*proto.ColDecimal64), perm)
	case *proto.ColInt32:
		*d = gather(*d, *src.(*proto.ColInt32), perm)
	case *proto.ColInt64:
		*d = gather(*d, *src.(*proto.ColInt64), perm)
	case *proto.ColDateTime:
		d.Data = gather(d.Data, src.(*proto.ColDateTime).Data, perm)
	case *proto.ColFixedStr:
		buf, size := src.(*proto.ColFixedStr).Buf, src.(*proto.ColFixedStr).Size
		d.Size, d.Buf = size, d.Buf[:0]
		for _, i := range perm {
			d.Buf = append(d.Buf, buf[int(i)*size:int(i+1)*size]...)
		}
	case *proto.ColStr:
		buf, pos := src.(*proto.ColStr).Buf, src.(*proto.ColStr).Pos
		d.Buf, d.Pos = d.Buf[:0], d.Pos[:0]
		for _, i := range perm {
			p := pos[i]
			d.AppendBytes(buf[p.Start:p.End])
		}
	default:
		return fmt.Errorf("gather: no rule for %T", dst)
	}
	return nil
}

func gather[S ~[]E, E any](dst, src S, perm []uint32) S {
	dst = slices.Grow(dst[:0], len(perm))[:len(perm)]
	for k, i := range perm {
		dst[k] = src[i]
	}
	return dst
}
