package sink

import (
	"bytes"
	"fmt"
	"reflect"
	"unsafe"

	"github.com/ClickHouse/ch-go/proto"
	"github.com/ClickHouse/clickhouse-go/v2/lib/column"
)

// The sink buffers its rows in ch-go's column types (proto.ColUUID, proto.ColStr, ...),
// the layer beneath clickhouse-go that encodes ClickHouse's Native format. clickhouse-go
// keeps each column of a prepared INSERT in such a ch-go column, in an unexported field
// named "col", and offers no way to hand one over: its typed Append converts every row
// (a time.Time per DateTime, a big.Int per Decimal), and Decode of Native bytes reads
// every String row through three layers of readers (a quarter of the consumer's CPU).
//
// handOver sets that field to the sink's column. The reflect checks make it exact: the
// field must exist and hold the sink's ch-go type (or, for an interface field, a pointer
// to it), else handOver declines and the sink decodes instead (decodeInto), so another
// driver version is at worst slower, never wrong. TestSinkHandsEveryColumnOver fails
// when that happens, so an upgrade that loses the fast path is noticed.

// handOver makes dst, a column of a prepared INSERT, hold src's rows without copying
// them: dst's ch-go column becomes a copy of src's header, whose slices still point into
// the sink's buffers. The driver only reads them, while Send encodes the block; nothing
// of dst survives the batch. It reports false, changing nothing, when dst does not keep
// its rows as src's type.
func handOver(dst column.Interface, src proto.Column) bool {
	d := reflect.ValueOf(dst)
	s := reflect.ValueOf(src)
	if d.Kind() != reflect.Pointer || d.Elem().Kind() != reflect.Struct || s.Kind() != reflect.Pointer {
		return false
	}
	f := d.Elem().FieldByName("col")
	if !f.IsValid() {
		return false
	}
	f = reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem() // settable
	switch {
	case f.Type() == s.Elem().Type():
		f.Set(s.Elem())
	case f.Kind() == reflect.Interface && !f.IsNil() && f.Elem().Type() == s.Type():
		header := reflect.New(s.Elem().Type()) // dst may Reset its column: not ours
		header.Elem().Set(s.Elem())
		f.Set(header)
	default:
		return false
	}
	return true
}

// decodeInto fills dst with src's rows the documented way: src's Native encoding,
// decoded by dst.
func decodeInto(dst column.Interface, src proto.Column) error {
	var b proto.Buffer
	src.EncodeColumn(&b)
	return dst.Decode(proto.NewReader(bytes.NewReader(b.Buf)), src.Rows())
}

// compactColumn keeps the rows i of col with keep[i] (len(keep) is the row count).
func compactColumn(col proto.Column, keep []bool) error {
	switch c := col.(type) {
	case *proto.ColUUID:
		*c = compact(*c, keep)
	case *proto.ColUInt8:
		*c = compact(*c, keep)
	case *proto.ColDate:
		*c = compact(*c, keep)
	case *proto.ColDecimal64:
		*c = compact(*c, keep)
	case *proto.ColInt32:
		*c = compact(*c, keep)
	case *proto.ColInt64:
		*c = compact(*c, keep)
	case *proto.ColDateTime:
		c.Data = compact(c.Data, keep)
	case *proto.ColFixedStr:
		out := c.Buf[:0]
		for i, k := range keep {
			if k {
				out = append(out, c.Buf[i*c.Size:(i+1)*c.Size]...) // never ahead of the source
			}
		}
		c.Buf = out
	case *proto.ColStr:
		compactStrings(c, keep)
	default:
		return fmt.Errorf("compact: no rule for %T", col)
	}
	return nil
}

// compactStrings keeps the strings i of c with keep[i], in place.
func compactStrings(c *proto.ColStr, keep []bool) {
	end, w := 0, 0
	for i, k := range keep {
		if !k {
			continue
		}
		p := c.Pos[i]
		start := end
		end += copy(c.Buf[end:], c.Buf[p.Start:p.End]) // never ahead of the source
		c.Pos[w] = proto.Position{Start: start, End: end}
		w++
	}
	c.Buf, c.Pos = c.Buf[:end], c.Pos[:w]
}

func compact[S ~[]E, E any](s S, keep []bool) S {
	out := s[:0]
	for i, k := range keep {
		if k {
			out = append(out, s[i])
		}
	}
	return out
}
