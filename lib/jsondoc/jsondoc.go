// Package jsondoc checks what a JSON decoder does not: a member named twice in one
// object. RFC 8259 leaves which copy counts to the parser (Go's decoders keep the last),
// so a body that names a member twice says two things, and the service refuses it rather
// than guess (rule RuleDuplicate, as POST /events does for an event's members).
package jsondoc

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"

	"svc/lib/problem"
)

// RuleDuplicate is the errors[].rule of a member named twice.
const RuleDuplicate = "duplicate_member"

// frame is one open object or array of the document.
type frame struct {
	object  bool
	keys    map[string]struct{}
	key     string // the member whose value comes next (object)
	wantKey bool   // the next token is a member name (object)
	index   int    // the next element's index (array)
	at      Path
}

// Path names a place in a document twice over: as a JSON Pointer (RFC 6901,
// "/rows/1/date") and as errors[].field writes it ("rows[1].date").
type Path struct{ Pointer, Field string }

// member is the path of member k inside p.
func (p Path) member(k string) Path {
	f := k
	if p.Field != "" {
		f = p.Field + "." + k
	}
	return Path{p.Pointer + "/" + strings.NewReplacer("~", "~0", "/", "~1").Replace(k), f}
}

// element is the path of element i inside p.
func (p Path) element(i int) Path {
	return Path{p.Pointer + "/" + strconv.Itoa(i), p.Field + "[" + strconv.Itoa(i) + "]"}
}

// Duplicate returns the path of the first member named a second time in one object of
// b, and true. It returns false when no member is, and when b is not JSON: the caller's
// own parse says what is wrong with it then.
func Duplicate(b []byte) (Path, bool) {
	dec := json.NewDecoder(bytes.NewReader(b))
	var stack []*frame
	for {
		tok, err := dec.Token()
		if err != nil {
			return Path{}, false
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if d, ok := tok.(json.Delim); ok && (d == '}' || d == ']') {
			stack = stack[:len(stack)-1]
			if len(stack) == 0 {
				return Path{}, false
			}
			continue
		}
		if top != nil && top.object && top.wantKey {
			k, _ := tok.(string)
			if _, dup := top.keys[k]; dup {
				return top.at.member(k), true
			}
			top.keys[k], top.key, top.wantKey = struct{}{}, k, false
			continue
		}
		var at Path
		switch {
		case top == nil:
		case top.object:
			at, top.wantKey = top.at.member(top.key), true
		default:
			at = top.at.element(top.index)
			top.index++
		}
		if d, ok := tok.(json.Delim); ok {
			stack = append(stack, &frame{object: d == '{', keys: map[string]struct{}{}, wantKey: d == '{', at: at})
		} else if top == nil {
			return Path{}, false // a scalar document
		}
	}
}

// Check returns the 422 of a body that names a member twice in one object (field and
// pointer name the second copy; no value is echoed), or nil.
func Check(b []byte) *problem.Problem {
	at, dup := Duplicate(b)
	if !dup {
		return nil
	}
	return problem.Invalid("A member is named twice in one object; JSON does not say which copy counts. Send it once.",
		problem.FieldError{Field: at.Field, Rule: RuleDuplicate, Value: nil, Pointer: at.Pointer})
}
