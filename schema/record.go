// Package schema is the contract between roles: the Kafka record format that the ingest
// edge writes and the rollup consumer reads, the topic names, and the ClickHouse
// migrations (migrations/*.sql) that `svc migrate` applies.
//
// # Event batch record, version 1
//
// One Kafka record carries one accepted batch (1–50 events) for one pixel. The record key
// is the pixel's 16-byte UUID, so that a pixel's batches stay in order on one partition.
// The record carries the header "svc-schema" = "events.v1", and, from edges since issue
// 27, "svc-client-ids" = "1" when an event carries an id from a client's event_id, "0"
// when none does (HeaderClientIDs). The value is binary, all
// integers big-endian or unsigned varints (uv) / zig-zag varints (sv):
//
//	magic        2 bytes  'S' 'E'
//	version      1 byte   1
//	flags        1 byte   bit 0: sandbox
//	workspace    16 bytes workspace UUID
//	pixel        16 bytes pixel UUID
//	key          16 bytes UUID of the API key that sent the batch
//	received_at  sv       unix milliseconds when the edge accepted the batch
//	request_id   uv len + bytes
//	count        uv       number of events, 1..MaxEvents
//	count × event:
//	  event_id    16 bytes  UUID: version 8 when derived from the client's event_id
//	                        (ClientEventID), version 4 when the edge assigned it
//	  name        uv len + bytes (UTF-8, 1..MaxNameBytes: MaxNameLen characters)
//	  occurred_at sv        unix milliseconds
//	  eflags      1 byte    bit 0: has value; bit 1: consent.measurement; bit 2: has email hash
//	  value       sv        only with bit 0: value × 10^4 (Decimal(18,4))
//	  currency    3 bytes   ISO 4217 code, or three zero bytes when absent
//	  email_sha   32 bytes  only with bit 2: SHA-256 of the normalised email
//
// Raw contact details never appear in a record: the edge hashes them, and drops them
// entirely when consent.measurement is false. Decoders must reject (not guess at) a
// record with another magic or version; the consumer sends such records to the
// dead-letter topic.
package schema

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"
	"unsafe"
)

// Topic names. The dead-letter topic receives records the consumer could not decode,
// with the reason in the "svc-dlq-reason" header.
const (
	TopicEvents    = "events.v1"
	TopicDeadEvent = "events.dlq"

	HeaderSchema    = "svc-schema"
	SchemaEventsV1  = "events.v1"
	HeaderDLQReason = "svc-dlq-reason"
	// HeaderBatchID carries 16 bytes identifying the client's logical batch when the
	// request had an Idempotency-Key (SHA-256 of key id and Idempotency-Key). Two records
	// with the same batch id are the same batch sent twice (an edge died between
	// Kafka's acknowledgement and recording the response); the consumer stores the
	// first and skips the other.
	HeaderBatchID = "svc-batch"
	// HeaderClientIDs says whether any event of the record carries an id from a
	// client's event_id (schema.UUID.FromClient): "1" when some do, "0" when none does.
	// Edges write it since issue 27; the consumer claims event ids only of records that
	// may hold one ("1", or no header: an edge before it).
	HeaderClientIDs = "svc-client-ids"
)

// InsertQueryPrefix starts the query id of every INSERT of the consumer (rollup): the
// consumer's read-back and the privacy fence find the consumer's inserts running on a
// server by it (chpool.RunningQueries).
const InsertQueryPrefix = "svc-rollup-"

// Topics are the topics of the contract, which an embedded broker creates at start.
var Topics = []string{TopicEvents, TopicDeadEvent, TopicRejections}

// MaxEventAge is how late an event may arrive: the edge refuses an occurred_at older
// than this, so a day's rollup can change only until MaxEventAge after the day ends
// (plus the pipeline's lag); after that it is final.
const MaxEventAge = 7 * 24 * time.Hour

// Limits that the edge enforces and the decoder checks again. MaxNameLen counts
// characters (the edge's check, and JSON Schema's maxLength); a name's encoding is at
// most MaxNameBytes, four bytes a character in UTF-8.
const (
	MaxEvents    = 50
	MaxNameLen   = 128
	MaxNameBytes = 4 * MaxNameLen
	ValueScale   = 10000 // value is stored as an integer count of 1/10^4 units
)

const (
	flagSandbox = 1 << 0

	evHasValue   = 1 << 0
	evConsent    = 1 << 1
	evHasEmail   = 1 << 2
	recordMagic0 = 'S'
	recordMagic1 = 'E'
	recordV1     = 1
	// recordVersion is the version AppendBatch writes, the newest DecodeBatch reads
	// (it reads every version from recordV1 on; EventFields' Since says which fields each
	// carries).
	recordVersion = recordV1
)

// UUID is a raw 16-byte UUID.
type UUID [16]byte

// Batch is the decoded form of one record.
type Batch struct {
	Sandbox    bool
	Workspace  UUID
	Pixel      UUID
	Key        UUID
	ReceivedAt int64 // unix ms
	RequestID  string
	Events     []Event
}

// Event is one accepted event. Strings alias the decoded buffer in DecodeBatch: copy
// them if they must outlive it.
type Event struct {
	ID         UUID
	Name       string
	OccurredAt int64 // unix ms, UTC
	HasValue   bool
	Value      int64 // × 10^4
	Currency   [3]byte
	Consent    bool
	HasEmail   bool
	EmailSHA   [32]byte
}

// AppendBatch appends the encoding of b to dst and returns the extended slice. It never
// fails: the edge validates before encoding.
func AppendBatch(dst []byte, b *Batch) []byte {
	var flags byte
	if b.Sandbox {
		flags |= flagSandbox
	}
	dst = append(dst, recordMagic0, recordMagic1, recordVersion, flags)
	dst = append(dst, b.Workspace[:]...)
	dst = append(dst, b.Pixel[:]...)
	dst = append(dst, b.Key[:]...)
	dst = binary.AppendVarint(dst, b.ReceivedAt)
	dst = binary.AppendUvarint(dst, uint64(len(b.RequestID)))
	dst = append(dst, b.RequestID...)
	dst = binary.AppendUvarint(dst, uint64(len(b.Events)))
	for i := range b.Events {
		dst = AppendEvent(dst, &b.Events[i])
	}
	return dst
}

// AppendEvent appends one event's encoding; AppendBatch uses it for each event.
func AppendEvent(dst []byte, e *Event) []byte {
	dst = append(dst, e.ID[:]...)
	dst = binary.AppendUvarint(dst, uint64(len(e.Name)))
	dst = append(dst, e.Name...)
	dst = binary.AppendVarint(dst, e.OccurredAt)
	var f byte
	if e.HasValue {
		f |= evHasValue
	}
	if e.Consent {
		f |= evConsent
	}
	if e.HasEmail {
		f |= evHasEmail
	}
	dst = append(dst, f)
	if e.HasValue {
		dst = binary.AppendVarint(dst, e.Value)
	}
	dst = append(dst, e.Currency[:]...)
	if e.HasEmail {
		dst = append(dst, e.EmailSHA[:]...)
	}
	return dst
}

// ErrRecord is wrapped by every decoding error.
var ErrRecord = errors.New("schema: bad event record")

type reader struct {
	b   []byte
	off int
	err error
}

func (r *reader) fail(what string) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: %s at byte %d", ErrRecord, what, r.off)
	}
}

func (r *reader) bytes(n int, what string) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || len(r.b)-r.off < n {
		r.fail("truncated " + what)
		return nil
	}
	p := r.b[r.off : r.off+n]
	r.off += n
	return p
}

func (r *reader) uvarint(what string) uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b[r.off:])
	if n <= 0 {
		r.fail("bad " + what)
		return 0
	}
	r.off += n
	return v
}

func (r *reader) varint(what string) int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b[r.off:])
	if n <= 0 {
		r.fail("bad " + what)
		return 0
	}
	r.off += n
	return v
}

// DecodeBatch decodes a record value into b, reusing b.Events. Strings in b alias
// value (no copy, no allocation): value must not change while they are in use. On
// error b is unspecified and the error wraps ErrRecord.
func DecodeBatch(value []byte, b *Batch) error { return decode(value, b, nil) }

// header reads the record's first 4 bytes and checks its magic and version.
func (r *reader) header() ([]byte, error) {
	head := r.bytes(4, "header")
	if r.err != nil {
		return nil, r.err
	}
	if head[0] != recordMagic0 || head[1] != recordMagic1 {
		return nil, fmt.Errorf("%w: bad magic", ErrRecord)
	}
	if head[2] < recordV1 || head[2] > recordVersion {
		return nil, fmt.Errorf("%w: unsupported version %d", ErrRecord, head[2])
	}
	return head, nil
}

// ReceivedAt reads a record value's received_at (unix ms) without decoding the rest:
// the consumer's batch claims need only it. It checks the magic and version as
// DecodeBatch does; a value that passes may still fail DecodeBatch further on.
func ReceivedAt(value []byte) (int64, error) {
	r := reader{b: value}
	if _, err := r.header(); err != nil {
		return 0, err
	}
	r.bytes(3*16, "ids")
	ms := r.varint("received_at")
	return ms, r.err
}

// decode decodes value into b; with ids set, it does not keep b.Events but notes the
// events whose id came from the client in ids (ScanClientIDs). Either way it checks
// the whole record alike: a record one accepts, the other does.
func decode(value []byte, b *Batch, ids *ClientIDs) error {
	r := reader{b: value}
	head, err := r.header()
	if err != nil {
		return err
	}
	b.Sandbox = head[3]&flagSandbox != 0
	copy(b.Workspace[:], r.bytes(16, "workspace"))
	copy(b.Pixel[:], r.bytes(16, "pixel"))
	copy(b.Key[:], r.bytes(16, "key"))
	b.ReceivedAt = r.varint("received_at")
	b.RequestID = alias(r.bytes(int(min(r.uvarint("request_id length"), 1<<16)), "request_id"))
	n := r.uvarint("count")
	if r.err != nil {
		return r.err
	}
	if n == 0 || n > MaxEvents {
		return fmt.Errorf("%w: event count %d out of range", ErrRecord, n)
	}
	b.Events = b.Events[:0]
	if ids != nil {
		ids.start()
	}
	for i := uint64(0); i < n; i++ {
		var e Event
		if err := readEvent(&r, &e); err != nil {
			return err
		}
		if ids != nil {
			ids.add(&e, int(i))
			continue
		}
		b.Events = append(b.Events, e)
	}
	if r.off != len(value) {
		return fmt.Errorf("%w: %d trailing bytes", ErrRecord, len(value)-r.off)
	}
	return nil
}

// readEvent reads one event into e; its name aliases r's bytes.
func readEvent(r *reader, e *Event) error {
	copy(e.ID[:], r.bytes(16, "event_id"))
	ln := r.uvarint("name length")
	if ln == 0 || ln > MaxNameBytes {
		r.fail("name length out of range")
	}
	e.Name = alias(r.bytes(int(ln), "name"))
	e.OccurredAt = r.varint("occurred_at")
	f := r.bytes(1, "event flags")
	if r.err != nil {
		return r.err
	}
	e.HasValue, e.Consent, e.HasEmail = f[0]&evHasValue != 0, f[0]&evConsent != 0, f[0]&evHasEmail != 0
	if e.HasValue {
		e.Value = r.varint("value")
	}
	copy(e.Currency[:], r.bytes(3, "currency"))
	if e.HasEmail {
		copy(e.EmailSHA[:], r.bytes(32, "email_sha"))
	}
	return r.err
}

// alias returns p's bytes as a string without copying: p must not change afterwards.
func alias(p []byte) string {
	if len(p) == 0 {
		return ""
	}
	return unsafe.String(&p[0], len(p))
}
