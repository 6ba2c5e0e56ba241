package rollup

import (
	"encoding/binary"
	"io"
	"unsafe"

	"svc/schema"
)

// nativeColumn is one buffered column whose rows are kept in ClickHouse's Native wire
// format, so that a flush hands them over without encoding.
type nativeColumn interface {
	// native returns the rows' Native bytes; valid until the column changes.
	native() []byte
	reset()
	// compact keeps the rows i with keep[i] (len(keep) is the row count).
	compact(keep []bool)
}

// littleEndian reports the host's byte order: the Native format is little-endian, so
// on such hosts a slice of integers is already its own encoding.
var littleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// fixedColumn holds a fixed-width integer column (UInt8, Date, DateTime, Int32, Int64,
// Decimal64).
type fixedColumn[T uint8 | uint16 | uint32 | int32 | int64] struct{ v []T }

func (c *fixedColumn[T]) native() []byte {
	if len(c.v) == 0 {
		return nil
	}
	var zero T
	size := int(unsafe.Sizeof(zero))
	raw := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(c.v))), len(c.v)*size)
	if littleEndian || size == 1 {
		return raw
	}
	out := append([]byte(nil), raw...) // big-endian host: reverse each value
	for i := 0; i < len(out); i += size {
		for a, b := i, i+size-1; a < b; a, b = a+1, b-1 {
			out[a], out[b] = out[b], out[a]
		}
	}
	return out
}

func (c *fixedColumn[T]) reset()              { c.v = c.v[:0] }
func (c *fixedColumn[T]) compact(keep []bool) { c.v = compact(c.v, keep) }

// fixedBytesColumn holds size bytes per row (FixedString(size)).
type fixedBytesColumn struct {
	b    []byte
	size int
}

func (c *fixedBytesColumn) native() []byte { return c.b }
func (c *fixedBytesColumn) reset()         { c.b = c.b[:0] }

func (c *fixedBytesColumn) compact(keep []bool) {
	out := c.b[:0]
	for i, k := range keep {
		if k {
			out = append(out, c.b[i*c.size:(i+1)*c.size]...) // never ahead of the source
		}
	}
	c.b = out
}

// uuidColumn holds UUIDs in their Native layout (see nativeUUID).
type uuidColumn struct{ fixedBytesColumn }

func newUUIDColumn() uuidColumn { return uuidColumn{fixedBytesColumn{size: 16}} }

func (c *uuidColumn) append(u *[16]byte) { c.b = append(c.b, u[:]...) }

// rows is the number of UUIDs held.
func (c *uuidColumn) rows() int { return len(c.b) / 16 }

// at returns row i as a UUID (the inverse of nativeUUID).
func (c *uuidColumn) at(i int) [16]byte {
	w := c.b[i*16 : i*16+16]
	var u [16]byte
	binary.BigEndian.PutUint64(u[:8], binary.LittleEndian.Uint64(w[:8]))
	binary.BigEndian.PutUint64(u[8:], binary.LittleEndian.Uint64(w[8:]))
	return u
}

// nativeUUID is u as the Native format sends a UUID: its two 8-byte halves, each as a
// little-endian integer.
func nativeUUID(u *schema.UUID) [16]byte {
	var w [16]byte
	binary.LittleEndian.PutUint64(w[:8], binary.BigEndian.Uint64(u[:8]))
	binary.LittleEndian.PutUint64(w[8:], binary.BigEndian.Uint64(u[8:]))
	return w
}

// stringColumn holds a String column: per row, the length (unsigned varint) and bytes.
type stringColumn struct{ b []byte }

func (c *stringColumn) append(s string) {
	c.b = binary.AppendUvarint(c.b, uint64(len(s)))
	c.b = append(c.b, s...)
}

func (c *stringColumn) appendBytes(s []byte) {
	c.b = binary.AppendUvarint(c.b, uint64(len(s)))
	c.b = append(c.b, s...)
}

func (c *stringColumn) native() []byte { return c.b }
func (c *stringColumn) reset()         { c.b = c.b[:0] }

func (c *stringColumn) compact(keep []bool) {
	out := make([]byte, 0, len(c.b))
	off := 0
	for _, k := range keep {
		n, w := binary.Uvarint(c.b[off:])
		end := off + w + int(n)
		if k {
			out = append(out, c.b[off:end]...)
		}
		off = end
	}
	c.b = out
}

// partsReader reads byte slices one after the other.
type partsReader struct {
	parts [][]byte
	i     int
}

func (r *partsReader) reset() { r.parts, r.i = r.parts[:0], 0 }

func (r *partsReader) Read(p []byte) (int, error) {
	for r.i < len(r.parts) && len(r.parts[r.i]) == 0 {
		r.i++
	}
	if r.i == len(r.parts) {
		return 0, io.EOF
	}
	n := copy(p, r.parts[r.i])
	r.parts[r.i] = r.parts[r.i][n:]
	return n, nil
}
