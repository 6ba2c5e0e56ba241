package ingest

import (
	"bytes"
	"flag"
	"fmt"
	"go/format"
	"os"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"svc/schema"
)

var update = flag.Bool("update", false, "rewrite members_gen.go from schema.EventFields")

// TestEventMembersGenerated: members_gen.go is what schema.EventFields gives. A member
// declared there and not here fails; `go generate ./ingest/` (this test with -update)
// rewrites the file, which then calls a reader the parser may not have yet
// (read<Path>: write it, or the package does not compile).
func TestEventMembersGenerated(t *testing.T) {
	want, err := renderMembers(schema.EventFields)
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile("members_gen.go", want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile("members_gen.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("members_gen.go does not follow schema.EventFields (run go generate ./ingest/):\n%s", lineDiff(got, want))
	}
}

// lineDiff lists the lines to remove from a (-) and add (+) to get b, with b's line
// numbers (a longest-common-subsequence diff).
func lineDiff(a, b []byte) string {
	x, y := strings.Split(string(a), "\n"), strings.Split(string(b), "\n")
	lcs := make([][]int, len(x)+1) // lcs[i][j]: of x[i:] and y[j:]
	for i := range lcs {
		lcs[i] = make([]int, len(y)+1)
	}
	for i := len(x) - 1; i >= 0; i-- {
		for j := len(y) - 1; j >= 0; j-- {
			if x[i] == y[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var out strings.Builder
	i, j := 0, 0
	for i < len(x) || j < len(y) {
		switch {
		case i < len(x) && j < len(y) && x[i] == y[j]:
			i, j = i+1, j+1
		case j < len(y) && (i == len(x) || lcs[i][j+1] >= lcs[i+1][j]):
			fmt.Fprintf(&out, "%4d + %s\n", j+1, y[j])
			j++
		default:
			fmt.Fprintf(&out, "%4d - %s\n", j+1, x[i])
			i++
		}
	}
	return out.String()
}

// camel is a JSON path as a Go name: consent.measurement → ConsentMeasurement,
// event_id → EventID.
func camel(path string) string {
	var b strings.Builder
	for _, w := range strings.FieldsFunc(path, func(r rune) bool { return r == '_' || r == '.' }) {
		if w == "id" {
			b.WriteString("ID")
			continue
		}
		b.WriteString(strings.ToUpper(w[:1]) + w[1:])
	}
	return b.String()
}

// parentOf splits a JSON path into its object's path ("" for the event) and its name.
func parentOf(path string) (string, string) {
	if i := strings.LastIndexByte(path, '.'); i >= 0 {
		return path[:i], path[i+1:]
	}
	return "", path
}

// membersFunc is the generated function reading the members of the object at path.
func membersFunc(path string) string {
	if path == "" {
		return "eventMembers"
	}
	c := camel(path)
	return strings.ToLower(c[:1]) + c[1:] + "Members"
}

// renderMembers writes members_gen.go: the bits of the members seen, one function per
// object of the event reading its members (a switch on the name, calling each member's
// reader), and missing (the required members, in the declaration's order, then the
// members required with another).
func renderMembers(fields []schema.Field) ([]byte, error) {
	var members []schema.Field
	byPath := map[string]schema.Field{}
	children := map[string][]schema.Field{}
	objects := []string{""}
	for _, f := range fields {
		if f.JSON == "" {
			continue
		}
		parent, _ := parentOf(f.JSON)
		if _, ok := byPath[parent]; parent != "" && (!ok || byPath[parent].Kind != schema.Object) {
			return nil, fmt.Errorf("%s: declare the object %s before its members", f.JSON, parent)
		}
		if _, dup := byPath[f.JSON]; dup {
			return nil, fmt.Errorf("%s: declared twice", f.JSON)
		}
		byPath[f.JSON] = f
		members = append(members, f)
		children[parent] = append(children[parent], f)
		if f.Kind == schema.Object {
			objects = append(objects, f.JSON)
		}
	}
	if len(members) > 32 {
		return nil, fmt.Errorf("%d members: eventState.seen holds 32", len(members))
	}
	var w bytes.Buffer
	p := func(format string, args ...any) { fmt.Fprintf(&w, format+"\n", args...) }
	p("// Code generated from schema.EventFields by TestEventMembersGenerated (go generate ./ingest/). DO NOT EDIT.")
	p("")
	p("package ingest")
	p("")
	p(`import "svc/schema"`)
	p("")
	p("// Bits of eventState.seen: the members an event has shown with a valid value.")
	p("const (")
	for i, f := range members {
		if i == 0 {
			p("seen%s = 1 << iota", camel(f.JSON))
		} else {
			p("seen%s", camel(f.JSON))
		}
	}
	p(")")
	for _, obj := range objects {
		p("")
		if obj == "" {
			p("// %s reads the members of an event object into e.", membersFunc(obj))
		} else {
			p("// %s reads the members of an event's %s object into e.", membersFunc(obj), obj)
		}
		p("func (p *Parser) %s(b *Batch, st *eventState, idx int, e *schema.Event) {", membersFunc(obj))
		p("s := &p.sc")
		p("if !s.objectStart() {")
		p("return")
		p("}")
		p("for {")
		p("name := s.member()")
		leaves := false
		for _, c := range children[obj] {
			leaves = leaves || c.Kind != schema.Object
		}
		if leaves {
			p("from := s.i")
		}
		p("switch string(name) {")
		for _, c := range children[obj] {
			_, name := parentOf(c.JSON)
			p("case %q:", name)
			p("if st.met&seen%s != 0 {", camel(c.JSON))
			p("p.duplicate(b, st, idx, %q)", c.JSON)
			p("break")
			p("}")
			p("st.met |= seen%s", camel(c.JSON))
			if c.Kind != schema.Object {
				p("if p.read%s(b, st, idx, e, from) {", camel(c.JSON))
				p("st.seen |= seen%s", camel(c.JSON))
				p("}")
				continue
			}
			if c.Required {
				p("if p.required(b, st, idx, %q, kObject) {", c.JSON)
			} else {
				p("if p.optional(b, st, idx, %q, kObject, %v) {", c.JSON, !c.Secret)
			}
			p("st.seen |= seen%s", camel(c.JSON))
			p("p.%s(b, st, idx, e)", membersFunc(c.JSON))
			p("}")
		}
		p("default:")
		p("s.skip(0)")
		p("}")
		p("if !s.next('}') {")
		p("return")
		p("}")
		p("}")
		p("}")
	}
	p("")
	p("// missing rejects an event without a required member (the first in the")
	p("// declaration's order), or without a member required with another that it has.")
	p("func (p *Parser) missing(b *Batch, st *eventState, idx int) {")
	p("switch {")
	for _, f := range members {
		if !f.Required {
			continue
		}
		cond := fmt.Sprintf("st.seen&seen%s == 0", camel(f.JSON))
		if parent, _ := parentOf(f.JSON); parent != "" && !byPath[parent].Required {
			cond = fmt.Sprintf("st.seen&seen%s != 0 && %s", camel(parent), cond)
		}
		p("case %s:", cond)
		p("p.reject(b, st, idx, %q, \"required\", nil)", f.JSON)
	}
	for _, f := range members {
		if f.RequiredWith == "" {
			continue
		}
		if _, ok := byPath[f.RequiredWith]; !ok {
			return nil, fmt.Errorf("%s: required with %s, which is not a member", f.JSON, f.RequiredWith)
		}
		p("case st.seen&seen%s != 0 && st.seen&seen%s == 0:", camel(f.RequiredWith), camel(f.JSON))
		p("p.reject(b, st, idx, %q, %q, nil)", f.JSON, "required_with_"+strings.ReplaceAll(f.RequiredWith, ".", "_"))
	}
	p("}")
	p("}")
	return format.Source(w.Bytes())
}

// absent marks a member left out of declaredEvent's event.
const absent = "\x00"

// declaredEvent is an event object of the declared members with their examples, where
// over[path] replaces a member's or an object's value (raw JSON, or absent).
func declaredEvent(over map[string]string) string {
	var obj func(path string) string
	obj = func(path string) string {
		var parts []string
		for _, f := range schema.EventFields {
			if parent, name := parentOf(f.JSON); f.JSON == "" || parent != path {
				continue
			} else {
				v, ok := over[f.JSON]
				switch {
				case ok && v == absent:
					continue
				case !ok && f.Kind == schema.Object:
					v = obj(f.JSON)
				case !ok:
					v = f.Example
				}
				parts = append(parts, fmt.Sprintf("%q:%s", name, v))
			}
		}
		return "{" + strings.Join(parts, ",") + "}"
	}
	return obj("")
}

// TestParserFollowsTheDeclaration checks each member's reader against schema.EventFields:
// the declared examples are accepted and fill every declared field of schema.Event; a
// value of another type is rejected with rule type_<kind>; null counts as absent for
// an optional member and as a wrong type for a required one; an absent required member
// is rule required (required_with_<other> when the other has a value); strings of
// MaxLen bytes pass and one more byte does not, nor fewer than MinLen; a value off the
// Pattern is rejected; a Number takes its column's Decimal(P, S) exactly; a Secret
// member's value is never echoed.
func TestParserFollowsTheDeclaration(t *testing.T) {
	type outcome struct{ field, rule string } // field "" = accepted
	check := func(name string, over map[string]string, want outcome, secret string) {
		t.Helper()
		ev := declaredEvent(over)
		b, ok := parse(t, `{"pixel_id":"p","events":[`+ev+`]}`)
		if !ok {
			t.Errorf("%s: batch refused: %v\n%s", name, b.Envelope, ev)
			return
		}
		var got outcome
		if len(b.Rejections) > 0 {
			r := b.Rejections[0]
			got = outcome{r.Field, r.Rule}
			if secret != "" && strings.Contains(fmt.Sprint(r.Value), secret) {
				t.Errorf("%s: the rejection echoes a contact detail: %v", name, r.Value)
			}
		}
		if got != want && !(want.rule == "*" && got.field == want.field) {
			t.Errorf("%s: got %+v, want %+v\n%s", name, got, want, ev)
		}
	}
	isSecret := func(f schema.Field) bool {
		for p := f.JSON; p != ""; p, _ = parentOf(p) {
			for _, g := range schema.EventFields {
				if g.JSON == p && g.Secret {
					return true
				}
			}
		}
		return false
	}
	members := map[string]schema.Field{}
	for _, f := range schema.EventFields {
		if f.JSON != "" {
			members[f.JSON] = f
		}
	}

	// The examples: accepted, and every declared field of the event holds a value.
	b, ok := parse(t, `{"pixel_id":"p","events":[`+declaredEvent(nil)+`]}`)
	if !ok || len(b.Events) != 1 {
		t.Fatalf("the declared examples: %+v %+v\n%s", b.Rejections, b.Envelope, declaredEvent(nil))
	}
	ev := reflect.ValueOf(b.Events[0])
	for _, f := range schema.EventFields {
		if f.From != schema.FromEvent || f.Go == "" {
			continue
		}
		if fv := ev.FieldByName(f.Go); !fv.IsValid() {
			t.Errorf("%s: schema.Event has no field %s", f.Column, f.Go)
		} else if fv.IsZero() {
			t.Errorf("%s: the example of %s leaves schema.Event.%s empty", f.Column, f.JSON, f.Go)
		}
	}

	for _, f := range schema.EventFields {
		if f.JSON == "" {
			continue
		}
		wrong := map[schema.Kind]string{schema.String: "12", schema.Number: `"12"`, schema.Bool: `"yes"`, schema.Object: "12"}[f.Kind]
		secret, secretWrong := "", ""
		if isSecret(f) {
			secret, secretWrong = strings.Trim(f.Example, `"`), strings.Trim(wrong, `"`)
		}
		wantWrong := outcome{f.JSON, "type_" + f.Kind.String()}
		check(f.JSON+" of another type", map[string]string{f.JSON: wrong}, wantWrong, secretWrong)

		missing := outcome{}
		switch {
		case f.Required:
			missing = outcome{f.JSON, "required"}
		case f.RequiredWith != "":
			missing = outcome{f.JSON, "required_with_" + strings.ReplaceAll(f.RequiredWith, ".", "_")}
			check(f.JSON+" absent, and "+f.RequiredWith, map[string]string{f.JSON: absent, f.RequiredWith: absent}, outcome{}, "")
		}
		check(f.JSON+" absent", map[string]string{f.JSON: absent}, missing, "")
		if f.Required {
			check(f.JSON+" null", map[string]string{f.JSON: "null"}, wantWrong, "")
		} else {
			check(f.JSON+" null", map[string]string{f.JSON: "null"}, missing, "")
		}

		if f.Kind == schema.String {
			ex := strings.Trim(f.Example, `"`)
			sized := func(n int) string {
				return strconv.Quote(strings.Repeat("a", max(0, n-len(ex))) + ex[max(0, len(ex)-n):])
			}
			if f.MaxLen > 0 {
				check(f.JSON+" of MaxLen bytes", map[string]string{f.JSON: sized(f.MaxLen)}, outcome{}, "")
				check(f.JSON+" over MaxLen", map[string]string{f.JSON: sized(f.MaxLen + 1)}, outcome{f.JSON, "*"}, secret)
			}
			if f.MinLen > 0 {
				check(f.JSON+" under MinLen", map[string]string{f.JSON: sized(f.MinLen - 1)}, outcome{f.JSON, "*"}, secret)
			}
			if f.Pattern != "" {
				re := regexp.MustCompile(f.Pattern)
				if !re.MatchString(ex) {
					t.Errorf("%s: the example %s is off the pattern %s", f.JSON, ex, f.Pattern)
				}
				for _, off := range []string{ex + "#", "#" + ex, strings.ToLower(ex)} {
					if !re.MatchString(off) {
						check(f.JSON+" off the pattern", map[string]string{f.JSON: strconv.Quote(off)}, outcome{f.JSON, "*"}, secret)
						break
					}
				}
			}
		}
		if f.Kind == schema.Number {
			var prec, scale int
			if _, err := fmt.Sscanf(f.CHType, "Decimal(%d, %d)", &prec, &scale); err != nil {
				t.Fatalf("%s: a Number's column is a Decimal(P, S), not %s", f.JSON, f.CHType)
			}
			top := strings.Repeat("9", prec-scale) + "." + strings.Repeat("9", scale)
			check(f.JSON+" at its largest", map[string]string{f.JSON: top}, outcome{}, "")
			check(f.JSON+" at its smallest", map[string]string{f.JSON: "-" + top}, outcome{}, "")
			check(f.JSON+" past its largest", map[string]string{f.JSON: "1" + strings.Repeat("0", prec-scale)}, outcome{f.JSON, "*"}, "")
			check(f.JSON+" past its scale", map[string]string{f.JSON: "0." + strings.Repeat("0", scale) + "1"}, outcome{f.JSON, "*"}, "")
		}
		if parent, _ := parentOf(f.JSON); parent != "" && members[parent].Kind != schema.Object {
			t.Errorf("%s: its object %s is not declared", f.JSON, parent)
		}
	}
}
