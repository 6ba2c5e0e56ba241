package schema

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// recordFields are the declared fields of one section of the record (the header for
// FromBatch, an event for FromEvent) that version carries, by position.
func recordFields(from Origin, version uint8) map[int][]Field {
	out := map[int][]Field{}
	for _, f := range EventFields {
		if f.From == from && f.Wire != NotInRecord && max(f.Since, 1) <= version {
			out[f.Pos] = append(out[f.Pos], f)
		}
	}
	return out
}

// declaredRecord encodes b at version as EventFields describes the record, by
// reflection: the reference AppendBatch and DecodeBatch are checked against.
func declaredRecord(b *Batch, version uint8) []byte {
	out := []byte{recordMagic0, recordMagic1, version}
	out = declaredSection(out, reflect.ValueOf(b).Elem(), FromBatch, version)
	out = binary.AppendUvarint(out, uint64(len(b.Events)))
	for i := range b.Events {
		out = declaredSection(out, reflect.ValueOf(&b.Events[i]).Elem(), FromEvent, version)
	}
	return out
}

func declaredSection(out []byte, v reflect.Value, from Origin, version uint8) []byte {
	byPos := recordFields(from, version)
	for pos := 1; pos <= len(byPos); pos++ {
		at := byPos[pos]
		if at[0].Wire == Flag {
			var flags byte
			for _, f := range at {
				if v.FieldByName(f.Go).Bool() {
					flags |= 1 << f.Bit
				}
			}
			out = append(out, flags)
			continue
		}
		f := at[0]
		if f.If != "" && !v.FieldByName(f.If).Bool() {
			continue
		}
		fv := v.FieldByName(f.Go)
		switch f.Wire {
		case Fixed:
			for i := range fv.Len() {
				out = append(out, byte(fv.Index(i).Uint()))
			}
		case Bytes:
			out = binary.AppendUvarint(out, uint64(fv.Len()))
			out = append(out, fv.String()...)
		case Varint:
			out = binary.AppendVarint(out, fv.Int())
		}
	}
	return out
}

// wireTypes is the Go kind each Wire carries.
var wireTypes = map[Wire]reflect.Kind{Fixed: reflect.Array, Bytes: reflect.String, Varint: reflect.Int64, Flag: reflect.Bool}

// TestEventAndBatchAreTheDeclaration: Event and Batch (but its Events) hold exactly the
// fields EventFields names, of the Go kind their Wire carries; each section's positions
// run 1, 2, 3… with one field per position but the flags byte's (distinct bits); If names
// a Flag of the same section.
func TestEventAndBatchAreTheDeclaration(t *testing.T) {
	for _, sec := range []struct {
		from Origin
		typ  reflect.Type
	}{{FromBatch, reflect.TypeFor[Batch]()}, {FromEvent, reflect.TypeFor[Event]()}} {
		declared := map[string]Field{}
		for _, f := range EventFields {
			if f.From != sec.from || f.Go == "" {
				continue
			}
			declared[f.Go] = f
			sf, ok := sec.typ.FieldByName(f.Go)
			if !ok {
				t.Errorf("%s (%s) is declared as %s.%s, which does not exist", f.Column, f.JSON, sec.typ.Name(), f.Go)
				continue
			}
			if k := wireTypes[f.Wire]; f.Wire != NotInRecord && sf.Type.Kind() != k {
				t.Errorf("%s.%s is %s; its Wire carries a %s", sec.typ.Name(), f.Go, sf.Type, k)
			}
			if f.Wire == Fixed && sf.Type.Elem().Kind() != reflect.Uint8 {
				t.Errorf("%s.%s is %s, not a byte array", sec.typ.Name(), f.Go, sf.Type)
			}
		}
		for _, f := range declared {
			if g, ok := declared[f.If]; f.If != "" && (!ok || g.Wire != Flag) {
				t.Errorf("%s.%s is only recorded with %s: declare that as a Flag of the same section", sec.typ.Name(), f.Go, f.If)
			}
		}
		for i := range sec.typ.NumField() {
			name := sec.typ.Field(i).Name
			if _, ok := declared[name]; !ok && name != "Events" {
				t.Errorf("%s.%s is not in schema.EventFields", sec.typ.Name(), name)
			}
		}
		for v := uint8(1); v <= recordVersion; v++ {
			byPos := recordFields(sec.from, v)
			for pos := 1; pos <= len(byPos); pos++ {
				at := byPos[pos]
				bits := map[uint8]bool{}
				for _, f := range at {
					if len(at) > 1 && f.Wire != Flag || bits[f.Bit] || f.Bit > 7 {
						t.Errorf("version %d: %s position %d holds %d fields (only Flags share one, with distinct bits 0–7)", v, sec.typ.Name(), pos, len(at))
					}
					bits[f.Bit] = true
				}
				if len(at) == 0 {
					t.Errorf("version %d: %s positions skip %d", v, sec.typ.Name(), pos)
				}
			}
		}
	}
}

// randomBatch fills every declared field of a batch of n events with random values, as
// the edge could send them (a value behind a false If flag left zero).
func randomBatch(rng *rand.Rand, n int) Batch {
	fill := func(v reflect.Value, from Origin) {
		for _, f := range EventFields {
			if f.From != from || f.Go == "" {
				continue
			}
			fv := v.FieldByName(f.Go)
			switch fv.Kind() {
			case reflect.Array:
				for i := range fv.Len() {
					fv.Index(i).SetUint(uint64(rng.IntN(256)))
				}
			case reflect.String:
				s := make([]byte, 1+rng.IntN(MaxNameLen))
				for i := range s {
					s[i] = byte(' ' + rng.IntN(95))
				}
				fv.SetString(string(s))
			case reflect.Int64:
				fv.SetInt(rng.Int64() >> rng.IntN(63))
			case reflect.Bool:
				fv.SetBool(rng.IntN(2) == 0)
			}
		}
		for _, f := range EventFields {
			if f.From == from && f.If != "" && !v.FieldByName(f.If).Bool() {
				fv := v.FieldByName(f.Go)
				fv.SetZero()
			}
		}
	}
	var b Batch
	fill(reflect.ValueOf(&b).Elem(), FromBatch)
	b.Events = make([]Event, n)
	for i := range b.Events {
		fill(reflect.ValueOf(&b.Events[i]).Elem(), FromEvent)
	}
	return b
}

// TestRecordCodecIsTheDeclaration: AppendBatch writes, byte for byte, what EventFields
// says the record holds (positions, wires, flag bits, the fields left out without their
// flag), for the golden batches and random ones; DecodeBatch reads it back into every
// declared field, and reads a record of each older version with the newer fields zero.
func TestRecordCodecIsTheDeclaration(t *testing.T) {
	rng := rand.New(rand.NewPCG(26, 2))
	batches := []Batch{goldenBatches["minimal"], goldenBatches["sandbox_full"]}
	for range 200 {
		batches = append(batches, randomBatch(rng, 1+rng.IntN(MaxEvents)))
	}
	for i := range batches {
		b := &batches[i]
		want := declaredRecord(b, recordVersion)
		if got := AppendBatch(nil, b); !bytes.Equal(got, want) {
			at := 0
			for at < min(len(got), len(want)) && got[at] == want[at] {
				at++
			}
			t.Fatalf("batch %d: AppendBatch is not the declared record (%d bytes, declared %d; first difference at byte %d):\n got %x\nwant %x",
				i, len(got), len(want), at, got, want)
		}
		for v := uint8(1); v <= recordVersion; v++ {
			old := asOfVersion(*b, v)
			var back Batch
			if err := DecodeBatch(declaredRecord(b, v), &back); err != nil {
				t.Fatalf("batch %d, version %d: %v", i, v, err)
			}
			if !reflect.DeepEqual(back, old) {
				t.Fatalf("batch %d, version %d: DecodeBatch does not read back the declared record: %s", i, v, firstDifference(back, old))
			}
		}
	}
}

// firstDifference names the first field where got and want differ.
func firstDifference(got, want Batch) string {
	diff := func(where string, g, w reflect.Value) string {
		for i := range g.NumField() {
			if name := g.Type().Field(i).Name; name != "Events" && !reflect.DeepEqual(g.Field(i).Interface(), w.Field(i).Interface()) {
				return fmt.Sprintf("%s%s is %v, want %v", where, name, g.Field(i), w.Field(i))
			}
		}
		return ""
	}
	if d := diff("", reflect.ValueOf(got), reflect.ValueOf(want)); d != "" {
		return d
	}
	if len(got.Events) != len(want.Events) {
		return fmt.Sprintf("%d events, want %d", len(got.Events), len(want.Events))
	}
	for j := range got.Events {
		if d := diff(fmt.Sprintf("Events[%d].", j), reflect.ValueOf(got.Events[j]), reflect.ValueOf(want.Events[j])); d != "" {
			return d
		}
	}
	return "equal"
}

// asOfVersion is b as a record of version v carries it: the fields of later versions
// zero.
func asOfVersion(b Batch, v uint8) Batch {
	b.Events = append([]Event(nil), b.Events...)
	for _, f := range EventFields {
		switch {
		case max(f.Since, 1) <= v || f.Go == "":
		case f.From == FromBatch:
			reflect.ValueOf(&b).Elem().FieldByName(f.Go).SetZero()
		case f.From == FromEvent:
			for j := range b.Events {
				reflect.ValueOf(&b.Events[j]).Elem().FieldByName(f.Go).SetZero()
			}
		}
	}
	return b
}

// TestREADMEDescribesEveryEventColumn: the events table of README.md (for analysts) names
// every declared column with its type, and no other.
func TestREADMEDescribesEveryEventColumn(t *testing.T) {
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	sec := regexp.MustCompile("(?s)### `events`.*?\n\n(\\|.*?)\n\n").FindSubmatch(b)
	if sec == nil {
		t.Fatal("README.md has no events table under ### `events`")
	}
	described := map[string]string{}
	for _, row := range strings.Split(string(sec[1]), "\n")[2:] {
		cells := strings.Split(row, "|")
		if len(cells) < 4 {
			continue
		}
		names, types := strings.Split(cells[1], ","), splitTypes(cells[2])
		for i, n := range names {
			if i < len(types) {
				described[strings.TrimSpace(n)] = types[i]
			}
		}
	}
	for _, f := range EventFields {
		if f.Column == "" {
			continue
		}
		if typ, ok := described[f.Column]; !ok {
			t.Errorf("README.md's events table does not describe %s %s", f.Column, f.CHType)
		} else if typ != f.CHType {
			t.Errorf("README.md's events table gives %s the type %s, declared %s", f.Column, typ, f.CHType)
		}
		delete(described, f.Column)
	}
	for c := range described {
		t.Errorf("README.md's events table describes %s, which schema.EventFields does not declare", c)
	}
}

// splitTypes splits a README cell of comma-separated types, keeping Decimal(18, 4) whole.
func splitTypes(cell string) []string {
	var out []string
	depth, start := 0, 0
	for i, c := range cell {
		switch c {
		case '(':
			depth++
		case ')':
			depth--
		case ',':
			if depth == 0 {
				out = append(out, strings.TrimSpace(cell[start:i]))
				start = i + 1
			}
		}
	}
	return append(out, strings.TrimSpace(cell[start:]))
}
