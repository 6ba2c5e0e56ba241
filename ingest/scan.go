package ingest

import (
	"encoding/binary"
	"errors"
	"unicode/utf8"

	"svc/lib/problem"
)

// scanner is a minimal JSON reader over one request body, built for the batch format:
// it reads values in place without building a tree, so parsing a batch allocates
// nothing per event unless a string holds escapes. It checks JSON syntax as strictly as
// encoding/json (RFC 8259), except that it does not validate skipped values' UTF-8.
type scanner struct {
	b   []byte
	i   int
	err error
	// scratch holds unescaped string content; strings returned from it are only valid
	// until the next call that unescapes.
	scratch []byte
	// escaped says whether the last str() result lives in scratch (true) or aliases b.
	escaped bool
}

var errSyntax = errors.New("malformed JSON")

func (s *scanner) fail() {
	if s.err == nil {
		s.err = errSyntax
	}
	s.i = len(s.b)
}

func (s *scanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// peek returns the next non-space byte (0 at the end).
func (s *scanner) peek() byte {
	if s.i < len(s.b) && s.b[s.i] > ' ' {
		return s.b[s.i] // the common case: no whitespace between tokens
	}
	s.ws()
	if s.i >= len(s.b) {
		return 0
	}
	return s.b[s.i]
}

func (s *scanner) expect(c byte) bool {
	if s.peek() != c {
		s.fail()
		return false
	}
	s.i++
	return true
}

// objectStart consumes '{' and reports whether the object has members.
func (s *scanner) objectStart() bool {
	if !s.expect('{') {
		return false
	}
	if s.peek() == '}' {
		s.i++
		return false
	}
	return true
}

// member reads `"name":` and returns name (valid until the next string read).
func (s *scanner) member() []byte {
	if s.peek() != '"' {
		s.fail()
		return nil
	}
	name := s.str()
	s.expect(':')
	return name
}

// next consumes ',' or the closing c; it reports whether another member/element follows.
func (s *scanner) next(c byte) bool {
	switch s.peek() {
	case ',':
		s.i++
		return s.err == nil
	case c:
		s.i++
		return false
	}
	s.fail()
	return false
}

// str reads a string value; the returned bytes alias the body when the string has no
// escapes, else the scratch buffer. It rejects invalid UTF-8 and control characters.
func (s *scanner) str() []byte {
	s.escaped = false
	if !s.expect('"') {
		return nil
	}
	start := s.i
	for {
		s.i += plainRun(s.b[s.i:])
		if s.i >= len(s.b) {
			s.fail()
			return nil
		}
		switch c := s.b[s.i]; {
		case c == '"':
			out := s.b[start:s.i]
			s.i++
			return out
		case c == '\\':
			return s.strEscaped(start)
		case c < 0x20:
			s.fail()
			return nil
		default: // non-ASCII
			r, n := utf8.DecodeRune(s.b[s.i:])
			if r == utf8.RuneError && n == 1 {
				s.fail()
				return nil
			}
			s.i += n
		}
	}
}

// plainRun returns the length of b's prefix of bytes a string may hold as they are:
// printable ASCII other than '"' and '\\'. It tests eight bytes at a time.
func plainRun(b []byte) int {
	i := 0
	for ; i+8 <= len(b); i += 8 {
		if special8(binary.LittleEndian.Uint64(b[i:])) {
			break
		}
	}
	for ; i < len(b); i++ {
		if c := b[i]; c < 0x20 || c >= utf8.RuneSelf || c == '"' || c == '\\' {
			return i
		}
	}
	return i
}

const (
	ones = 0x0101010101010101
	high = 0x8080808080808080
)

// special8 reports whether any of the eight bytes of x is a control character,
// non-ASCII, '"' or '\\' (it has no false negatives; a positive is resolved byte by
// byte).
func special8(x uint64) bool {
	quote, backslash := x^(ones*'"'), x^(ones*'\\')
	return ((x-ones*0x20)&^x|(quote-ones)&^quote|(backslash-ones)&^backslash|x)&high != 0
}

func (s *scanner) strEscaped(start int) []byte {
	s.escaped = true
	out := append(s.scratch[:0], s.b[start:s.i]...)
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			s.i++
			s.scratch = out
			return out
		case c == '\\':
			if s.i+1 >= len(s.b) {
				s.fail()
				return nil
			}
			e := s.b[s.i+1]
			s.i += 2
			switch e {
			case '"', '\\', '/':
				out = append(out, e)
			case 'b':
				out = append(out, '\b')
			case 'f':
				out = append(out, '\f')
			case 'n':
				out = append(out, '\n')
			case 'r':
				out = append(out, '\r')
			case 't':
				out = append(out, '\t')
			case 'u':
				r, ok := s.hex4()
				if !ok {
					return nil
				}
				if r >= 0xD800 && r < 0xDC00 {
					if s.i+1 < len(s.b) && s.b[s.i] == '\\' && s.b[s.i+1] == 'u' {
						s.i += 2
						r2, ok := s.hex4()
						if !ok {
							return nil
						}
						if r2 >= 0xDC00 && r2 < 0xE000 {
							r = (r-0xD800)<<10 + (r2 - 0xDC00) + 0x10000
						} else {
							r = utf8.RuneError
						}
					} else {
						r = utf8.RuneError
					}
				} else if r >= 0xDC00 && r < 0xE000 {
					r = utf8.RuneError
				}
				out = utf8.AppendRune(out, r)
			default:
				s.fail()
				return nil
			}
		case c < 0x20:
			s.fail()
			return nil
		default:
			r, n := utf8.DecodeRune(s.b[s.i:])
			if r == utf8.RuneError && n == 1 {
				s.fail()
				return nil
			}
			out = append(out, s.b[s.i:s.i+n]...)
			s.i += n
		}
	}
	s.fail()
	return nil
}

func (s *scanner) hex4() (rune, bool) {
	if s.i+4 > len(s.b) {
		s.fail()
		return 0, false
	}
	var r rune
	for _, c := range s.b[s.i : s.i+4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			s.fail()
			return 0, false
		}
	}
	s.i += 4
	return r, true
}

// number reads a JSON number and returns its text.
func (s *scanner) number() []byte {
	s.ws()
	start := s.i
	if s.i < len(s.b) && s.b[s.i] == '-' {
		s.i++
	}
	if s.i >= len(s.b) {
		s.fail()
		return nil
	}
	if s.b[s.i] == '0' {
		s.i++
	} else if !s.digits() {
		return nil
	}
	if s.i < len(s.b) && s.b[s.i] == '.' {
		s.i++
		if !s.digits() {
			return nil
		}
	}
	if s.i < len(s.b) && (s.b[s.i] == 'e' || s.b[s.i] == 'E') {
		s.i++
		if s.i < len(s.b) && (s.b[s.i] == '+' || s.b[s.i] == '-') {
			s.i++
		}
		if !s.digits() {
			return nil
		}
	}
	return s.b[start:s.i]
}

func (s *scanner) digits() bool {
	start := s.i
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		s.i++
	}
	if s.i == start {
		s.fail()
		return false
	}
	return true
}

func (s *scanner) literal(word string) bool {
	if len(s.b)-s.i < len(word) || string(s.b[s.i:s.i+len(word)]) != word {
		s.fail()
		return false
	}
	s.i += len(word)
	return true
}

// kind is the JSON type of the next value.
type kind byte

const (
	kNone kind = iota
	kString
	kNumber
	kObject
	kArray
	kBool
	kNull
)

func (k kind) String() string {
	return [...]string{"nothing", "string", "number", "object", "array", "boolean", "null"}[k]
}

func (s *scanner) kind() kind {
	switch c := s.peek(); {
	case c == '"':
		return kString
	case c == '-' || c >= '0' && c <= '9':
		return kNumber
	case c == '{':
		return kObject
	case c == '[':
		return kArray
	case c == 't' || c == 'f':
		return kBool
	case c == 'n':
		return kNull
	}
	return kNone
}

// boolean reads true or false.
func (s *scanner) boolean() bool {
	if s.peek() == 't' {
		return s.literal("true")
	}
	s.literal("false")
	return false
}

// skip reads and discards any value, returning its kind. depth bounds nesting.
func (s *scanner) skip(depth int) kind {
	if depth > 64 {
		s.fail()
		return kNone
	}
	k := s.kind()
	switch k {
	case kString:
		s.str()
	case kNumber:
		s.number()
	case kBool:
		s.boolean()
	case kNull:
		s.literal("null")
	case kObject:
		if s.objectStart() {
			for {
				s.member()
				s.skip(depth + 1)
				if !s.next('}') {
					break
				}
			}
		}
	case kArray:
		s.i++
		if s.peek() == ']' {
			s.i++
			break
		}
		for {
			s.skip(depth + 1)
			if !s.next(']') {
				break
			}
		}
	default:
		s.fail()
	}
	return k
}

// raw returns up to problem.EchoLen bytes of the raw value starting at from, for
// errors[].value, or problem.WithheldEcho when the whole value holds an '@' (clip).
func (s *scanner) raw(from int) string {
	end := min(s.i, len(s.b))
	if from >= end {
		return ""
	}
	return clip(s.b[from:end], problem.EchoLen, "")
}

// withheldValue stands for a rejected value that may hold contact details.
const withheldValue = problem.WithheldEcho

// clip is problem.Echo of v: v cut to n bytes (marked with more when cut) for
// errors[].value and the rejection records, or withheld when it holds an '@'.
func clip(v []byte, n int, more string) string { return problem.Echo(string(v), n, more) }

// echo is the answer's copy of a rejected value: clip to problem.EchoLen, "…" marking a cut.
func echo(v []byte) string { return clip(v, problem.EchoLen, "…") }
