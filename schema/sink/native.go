package sink

import (
	"bytes"
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
