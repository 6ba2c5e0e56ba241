// Package rejection is what the service keeps of the events and batches it refused:
// the Kafka record the edge writes (topic schema.TopicRejections), the ClickHouse table
// `rejections` the consumer fills, the reads of GET /rejections and the table's
// retention. It is the domain's, below the roles: the edge encodes, the consumer
// decodes and inserts, the read API lists.
//
// # Rejection record, version 1
//
// One Kafka record per request with at least one rejection: a 202 that rejected some of
// its events, or a batch refused as a whole (422, 409, 429) whose key and pixel are
// known. Key: the pixel's 16-byte UUID. Header "svc-schema" = "rejections.v1". Value
// (integers big-endian, uv = unsigned varint, sv = zig-zag varint):
//
//	magic        2 bytes  'S' 'R'
//	version      1 byte   1
//	flags        1 byte   bit 0: sandbox
//	workspace    16 bytes
//	pixel        16 bytes
//	key          16 bytes the API key that sent the request
//	received_at  sv       unix milliseconds at the edge
//	request_id   uv len + bytes
//	status       uv       the answer's status: 202, 422, 409 or 429
//	events       uv       events in the batch as the edge counted them (0: not read)
//	count        uv       entries, 1..MaxEntries
//	count × entry:
//	  index      sv       the event's index in the batch; -1: the batch as a whole
//	  field      uv len + bytes
//	  rule       uv len + bytes
//	  value      uv len + bytes: the value received as JSON text, redacted (Redact)
//
// Identity values never appear: Redact withholds the value of every identity field and
// every value with an '@' in it, whatever the field, before it is encoded.
package rejection

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"

	json "github.com/goccy/go-json"

	"svc/lib/problem"
	"svc/schema"
)

// SchemaV1 is the "svc-schema" header value of a rejection record.
const SchemaV1 = "rejections.v1"

// MaxEntries bounds the entries of one record: 50 events plus the batch's own faults.
const MaxEntries = schema.MaxEvents + 8

// Bounds of an entry's strings (longer ones are cut, with "…").
const (
	maxField = 128
	maxRule  = 64
	maxValue = 256
)

// Withheld is the value stored for an identity field, and for any value with an '@'
// in it: an email, or anything that could be one, is never kept, not even its digest.
const Withheld = `"(withheld)"`

// WithheldEcho is what an answer says in errors[].value in place of a value that may
// hold contact details (problem.Echo); Redact keeps it as Withheld.
const WithheldEcho = problem.WithheldEcho

// Batch is the index of an entry about the batch as a whole.
const Batch = -1

// Entry is one rejection: an event's (Index ≥ 0) or the batch's (Index = Batch).
type Entry struct {
	Index int
	Field string
	Rule  string
	Value string // JSON text, redacted
}

// Record is one request's rejections.
type Record struct {
	Sandbox    bool
	Workspace  schema.UUID
	Pixel      schema.UUID
	Key        schema.UUID
	ReceivedAt int64 // unix ms
	RequestID  string
	Status     int
	Events     int
	Entries    []Entry
}

// Redact returns the JSON text to keep for value received in field: Withheld for an
// identity field ("identity", "identity.…"), for WithheldEcho and problem.WithheldSecret, and for
// any value whose JSON text holds an '@', written or escaped (a value kept as the raw JSON
// text received may hold "\u0040"), or what looks like a secret (problem.HoldsSecret);
// otherwise its JSON text, and when that is longer than maxValue bytes, the text
// cut and kept as a JSON string ending in "…" (at most maxValue bytes).
func Redact(field string, value any) string {
	if field == "identity" || strings.HasPrefix(field, "identity.") || value == WithheldEcho || value == problem.WithheldSecret {
		return Withheld
	}
	b, err := json.Marshal(value)
	if err != nil {
		return "null"
	}
	if problem.HoldsContact(string(b)) || problem.HoldsSecret(string(b)) {
		return Withheld
	}
	if len(b) <= maxValue {
		return string(b)
	}
	for n := maxValue - 8; n > 0; n /= 2 {
		if cut, err := json.Marshal(string(b[:n]) + "…"); err == nil && len(cut) <= maxValue {
			return string(cut)
		}
	}
	return "null"
}

const (
	magic0, magic1 = 'S', 'R'
	version1       = 1
	flagSandbox    = 1
)

// Append appends r's encoding to dst.
func Append(dst []byte, r *Record) []byte {
	var flags byte
	if r.Sandbox {
		flags |= flagSandbox
	}
	dst = append(dst, magic0, magic1, version1, flags)
	dst = append(dst, r.Workspace[:]...)
	dst = append(dst, r.Pixel[:]...)
	dst = append(dst, r.Key[:]...)
	dst = binary.AppendVarint(dst, r.ReceivedAt)
	dst = appendString(dst, r.RequestID, 64)
	dst = binary.AppendUvarint(dst, uint64(r.Status))
	dst = binary.AppendUvarint(dst, uint64(max(r.Events, 0)))
	n := min(len(r.Entries), MaxEntries)
	dst = binary.AppendUvarint(dst, uint64(n))
	for _, e := range r.Entries[:n] {
		dst = binary.AppendVarint(dst, int64(e.Index))
		dst = appendString(dst, e.Field, maxField)
		dst = appendString(dst, e.Rule, maxRule)
		dst = appendString(dst, e.Value, maxValue) // Redact keeps it within
	}
	return dst
}

func appendString(dst []byte, s string, limit int) []byte {
	if len(s) > limit {
		s = s[:limit]
	}
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

// ErrMalformed is returned for a value that is not a rejection record of version 1.
var ErrMalformed = errors.New("rejection: malformed record")

// Decode decodes b into r (r.Entries is reused). Strings are copied.
func Decode(b []byte, r *Record) error {
	if len(b) < 4+48 || b[0] != magic0 || b[1] != magic1 {
		return fmt.Errorf("%w: bad magic or short", ErrMalformed)
	}
	if b[2] != version1 {
		return fmt.Errorf("%w: version %d", ErrMalformed, b[2])
	}
	d := decoder{b: b, i: 4}
	r.Sandbox = b[3]&flagSandbox != 0
	copy(r.Workspace[:], b[4:20])
	copy(r.Pixel[:], b[20:36])
	copy(r.Key[:], b[36:52])
	d.i = 52
	r.ReceivedAt = d.varint()
	r.RequestID = d.str()
	r.Status = int(d.uvarint())
	r.Events = int(d.uvarint())
	n := d.uvarint()
	if d.err == nil && (n == 0 || n > MaxEntries) {
		return fmt.Errorf("%w: %d entries", ErrMalformed, n)
	}
	r.Entries = r.Entries[:0]
	for k := uint64(0); k < n && d.err == nil; k++ {
		r.Entries = append(r.Entries, Entry{Index: int(d.varint()), Field: d.str(), Rule: d.str(), Value: d.str()})
	}
	if d.err == nil && d.i != len(b) {
		d.err = fmt.Errorf("%w: %d trailing bytes", ErrMalformed, len(b)-d.i)
	}
	return d.err
}

type decoder struct {
	b   []byte
	i   int
	err error
}

func (d *decoder) fail() {
	if d.err == nil {
		d.err = fmt.Errorf("%w: truncated at byte %d", ErrMalformed, d.i)
	}
}

func (d *decoder) varint() int64 {
	v, n := binary.Varint(d.b[min(d.i, len(d.b)):])
	if n <= 0 {
		d.fail()
		return 0
	}
	d.i += n
	return v
}

func (d *decoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.b[min(d.i, len(d.b)):])
	if n <= 0 {
		d.fail()
		return 0
	}
	d.i += n
	return v
}

func (d *decoder) str() string {
	n := d.uvarint()
	if d.err != nil || n > uint64(len(d.b)-d.i) {
		d.fail()
		return ""
	}
	s := string(d.b[d.i : d.i+int(n)])
	d.i += int(n)
	return s
}
