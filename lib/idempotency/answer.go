package idempotency

import (
	"bytes"
	"encoding/binary"
	"errors"
	"sort"
)

// The stored answer, packed. Most answers are a 202 of POST /events with no rejections,
// about 85 bytes of JSON of which a request id's 24 hex digits and a few digits vary;
// packed they take about 20, so that a record fits a hash field of a table (MaxValue).
// The packing is exact: Unpack(Pack(s)) is s, byte for byte, whatever s holds.
//
//	head     1 byte: a status and content type below (1..), or 0: status (2 bytes,
//	         big-endian), content type length (1 byte), content type
//	body     tokens to the end:
//	         0x00-0x3F  a literal run of 1-64 bytes, which follow
//	         0x40-0x7F  1-64 bytes that stand for twice as many lowercase hex digits
//	         0x80-0xFF  word 0-127 of the dictionary
//
// heads and words are part of the stored format: append, never change or reorder.
var heads = []struct {
	status      int
	contentType string
}{
	{}, // 0: spelled out
	{202, "application/json"},
	{200, "application/json"},
	{201, "application/json"},
	{422, "application/problem+json"},
	{404, "application/problem+json"},
}

var words = []string{
	`{"accepted":`,
	`,"rejected":0,"rejections":[],"request_id":"req_`,
	`,"rejected":`,
	`,"rejections":[],"request_id":"req_`,
	`,"rejections":[{"index":`,
	`}],"request_id":"req_`,
	`},{"index":`,
	`,"field":"`,
	`","rule":"`,
	`","value":`,
	`"}`,
	`,"request_id":"req_`,
	`{"rows":`,
	`,"upserted":`,
	`null`,
	`event_name`,
	`occurred_at`,
	`consent.measurement`,
	`consent`,
	`currency`,
	`value`,
	`event_id`,
	`identity.email`,
	`event`,
	`required_with_value`,
	`required`,
	`type_string`,
	`type_object`,
	`type_boolean`,
	`type_number`,
	`max_length`,
	`iso8601_utc`,
	`too_old`,
	`in_future`,
	`iso4217`,
	`printable`,
	`max_decimals`,
	`range`,
	`(withheld: contact details are never echoed)`,
	`normalised`, // the identity rules: with "normalised" spelled out, a 202 with two
	`email`,      // rejections took 67 bytes and went to a string of its own (MaxValue)
	// POST /events' "duplicates" (issue 27): without these a clean 202 took 38 bytes.
	`,"rejected":0,"duplicates":0,"rejections":[],"request_id":"req_`,
	`,"duplicates":0,"rejections":[],"request_id":"req_`,
	`,"duplicates":0,"rejections":[{"index":`,
	`,"duplicates":`,
	`duplicate_event_id`,
}

const (
	maxRun  = 64
	hexBase = 0x40
	dictTag = 0x80
)

// Pack returns s packed (see above).
func Pack(s Stored) []byte {
	out := make([]byte, 0, 16+len(s.Body)/2)
	out = appendHead(out, s.Status, s.ContentType)
	body := s.Body
	lit := -1 // start of the pending literal run, or -1
	flush := func(end int) {
		for lit >= 0 && lit < end {
			n := min(end-lit, maxRun)
			out = append(out, byte(n-1))
			out = append(out, body[lit:lit+n]...)
			lit += n
		}
		lit = -1
	}
	for i := 0; i < len(body); {
		if w := longestWord(body[i:]); w >= 0 {
			flush(i)
			out = append(out, byte(dictTag+w))
			i += len(words[w])
			continue
		}
		if n := hexRun(body[i:]); n >= 4 {
			flush(i)
			n = min(n, 2*maxRun)
			out = append(out, byte(hexBase+n/2-1))
			for j := i; j < i+n; j += 2 {
				out = append(out, unhex(body[j])<<4|unhex(body[j+1]))
			}
			i += n
			continue
		}
		if lit < 0 {
			lit = i
		}
		i++
	}
	flush(len(body))
	return out
}

func appendHead(out []byte, status int, contentType string) []byte {
	for i, h := range heads[1:] {
		if h.status == status && h.contentType == contentType {
			return append(out, byte(i+1))
		}
	}
	out = append(out, 0)
	out = binary.BigEndian.AppendUint16(out, uint16(status))
	out = append(out, byte(len(contentType)))
	return append(out, contentType...)
}

// longestWord is the longest dictionary word b starts with (the first in words among
// equally long ones), or -1.
func longestWord(b []byte) int {
	if len(b) == 0 {
		return -1
	}
	for _, w := range wordsByFirst[b[0]] {
		if bytes.HasPrefix(b, []byte(words[w])) {
			return int(w)
		}
	}
	return -1
}

// wordsByFirst lists, for each byte, the words of more than one byte that start with it,
// longest first (in words' order among equally long ones): Pack looks for a word at
// every byte of a body.
var wordsByFirst = func() (by [256][]uint8) {
	for w, s := range words {
		if len(s) > 1 {
			by[s[0]] = append(by[s[0]], uint8(w))
		}
	}
	for i := range by {
		sort.SliceStable(by[i], func(a, b int) bool { return len(words[by[i][a]]) > len(words[by[i][b]]) })
	}
	return by
}()

// hexRun is the length of the even run of lowercase hex digits b starts with.
func hexRun(b []byte) int {
	n := 0
	for n < len(b) && (b[n] >= '0' && b[n] <= '9' || b[n] >= 'a' && b[n] <= 'f') {
		n++
	}
	return n &^ 1
}

func unhex(c byte) byte {
	if c <= '9' {
		return c - '0'
	}
	return c - 'a' + 10
}

var errPacked = errors.New("idempotency: not a packed answer")

// Unpack reads what Pack wrote.
func Unpack(p []byte) (Stored, error) {
	var s Stored
	if len(p) < 1 {
		return s, errPacked
	}
	switch h := int(p[0]); {
	case h > 0 && h < len(heads):
		s.Status, s.ContentType = heads[h].status, heads[h].contentType
		p = p[1:]
	case h == 0 && len(p) >= 4 && len(p) >= 4+int(p[3]):
		s.Status = int(binary.BigEndian.Uint16(p[1:3]))
		s.ContentType = string(p[4 : 4+int(p[3])])
		p = p[4+int(p[3]):]
	default:
		return s, errPacked
	}
	body := make([]byte, 0, 2*len(p))
	const digits = "0123456789abcdef"
	for len(p) > 0 {
		c := int(p[0])
		p = p[1:]
		switch {
		case c >= dictTag:
			if c-dictTag >= len(words) {
				return s, errPacked
			}
			body = append(body, words[c-dictTag]...)
		case c >= hexBase:
			n := c - hexBase + 1
			if len(p) < n {
				return s, errPacked
			}
			for _, x := range p[:n] {
				body = append(body, digits[x>>4], digits[x&15])
			}
			p = p[n:]
		default:
			n := c + 1
			if len(p) < n {
				return s, errPacked
			}
			body = append(body, p[:n]...)
			p = p[n:]
		}
	}
	s.Body = body
	return s, nil
}
