package sink

import (
	"bytes"
	"testing"

	"github.com/ClickHouse/ch-go/proto"
	"github.com/google/uuid"
)

func TestCompactColumn(t *testing.T) {
	var s proto.ColStr
	f := proto.ColFixedStr{Size: 2}
	var dt proto.ColDateTime
	var u proto.ColUUID
	for i, v := range []string{"a", "", "ccc", "dd"} {
		s.Append(v)
		f.Buf = append(f.Buf, byte(i), byte(i))
		dt.Data = append(dt.Data, proto.DateTime(i))
		u = append(u, uuid.UUID{byte(i)})
	}
	kept := []uint32{1, 2} // in place, as Drop compacts
	for _, c := range []proto.Column{&s, &f, &dt, &u} {
		if err := gatherColumn(c, c, kept); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	_ = s.ForEach(func(_ int, v string) error { got = append(got, v); return nil })
	if len(got) != 2 || got[0] != "" || got[1] != "ccc" {
		t.Fatalf("strings after compact: %q", got)
	}
	s.Append("e") // the buffer stays consistent for the rows that follow
	if s.Rows() != 3 || s.Row(2) != "e" || s.Row(1) != "ccc" {
		t.Fatalf("append after compact: %d rows, %q %q", s.Rows(), s.Row(1), s.Row(2))
	}
	if !bytes.Equal(f.Buf, []byte{1, 1, 2, 2}) {
		t.Fatalf("fixed bytes after compact: %v", f.Buf)
	}
	if len(dt.Data) != 2 || dt.Data[0] != 1 || dt.Data[1] != 2 || len(u) != 2 || u[0][0] != 1 || u[1][0] != 2 {
		t.Fatalf("fixed-width after compact: %v %v", dt.Data, u)
	}
	var ip proto.ColIPv4
	if err := gatherColumn(&ip, &ip, nil); err == nil {
		t.Fatal("compact of a column type without a rule: no error")
	}
}
