// Package ingest is the edge role: POST /events. It authenticates through the API's
// conventions (svc/api), parses and validates a batch, hashes contact details, encodes
// the accepted events as one schema record and answers 202 only once Kafka has
// acknowledged it.
package ingest

import (
	"encoding/binary"
	"strconv"
	"time"
	"unsafe"

	"svc/lib/jsondoc"
	"svc/lib/problem"
	"svc/schema"
)

// Bounds on event fields (documented on the developer pages).
const (
	MaxEventIDLen = schema.MaxEventIDLen
	MaxEmailLen   = schema.MaxEmailLen
	// MaxEventAge is how far in the past occurred_at may be: a late event lands on its
	// own day, up to this age (schema.MaxEventAge: the rollup's final status relies on it).
	MaxEventAge = schema.MaxEventAge
	// MaxClockSkew is how far in the future occurred_at may be.
	MaxClockSkew = 5 * time.Minute
	// MaxValue bounds |value|: Decimal(18,4) holds 14 integer digits.
	MaxValue = 99_999_999_999_999
)

// RuleSecret rejects an event whose event_name holds what looks like a secret the
// service issues (an API key's "svc_live_…", "svc_sandbox_…", a webhook secret's
// "whsec_…", problem.HoldsSecret): a name is stored in the raw table and the rollups and
// read by every key of the workspace, so a secret pasted into it is refused, never kept.
const RuleSecret = "secret"

// Rejection explains why one event of a batch was not accepted.
type Rejection struct {
	Index int    `json:"index"`
	Field string `json:"field"`
	Rule  string `json:"rule"`
	Value any    `json:"value"`
}

// Batch is a parsed request body. Accepted events' strings alias the request body: the
// Batch must not outlive the handler that parsed it.
type Batch struct {
	PixelID    string // as sent ("" when absent)
	Total      int    // events in the array, accepted or not
	Events     []schema.Event
	Rejections []Rejection
	// Envelope holds faults that fail the whole request (422).
	Envelope []problem.FieldError
	// Duplicates counts events refused as a later copy of an event_id accepted earlier
	// in the batch (rule duplicate_event_id; they are among Rejections too).
	Duplicates int
	// clientID[i] says whether Events[i] carried its own event_id.
	clientID []bool
}

func (b *Batch) reset() {
	b.PixelID, b.Total, b.Duplicates = "", 0, 0
	b.Events, b.Rejections, b.Envelope = b.Events[:0], b.Rejections[:0], b.Envelope[:0]
	b.clientID = b.clientID[:0]
}

// Parser parses batches. It keeps buffers between calls: use one per goroutine (pool it).
type Parser struct {
	sc scanner
	// idSlots finds an earlier event of the batch with the same client event id: open
	// addressing by the id's first byte, index + 1 into Batch.Events (0: free); idUsed
	// lists the slots taken, cleared for the next batch.
	idSlots [128]uint8
	idUsed  []uint8
	// clientID holds the event's client event_id when it was read with escapes: the
	// scanner's scratch space it was unescaped into is reused by the event's next
	// escaped string, before the id is hashed at the event's end.
	clientID []byte
	// Now is the clock for occurred_at bounds (time.Now when nil).
	Now func() time.Time
	// now is Now's reading for the batch being parsed.
	now time.Time
}

// Parse reads body into b. It returns false when the body is not a JSON object of the
// batch's shape; b.Envelope then says why.
func (p *Parser) Parse(body []byte, b *Batch) bool {
	b.reset()
	for _, i := range p.idUsed {
		p.idSlots[i] = 0
	}
	p.idUsed = p.idUsed[:0]
	p.sc = scanner{b: body, scratch: p.sc.scratch[:0]}
	s := &p.sc
	p.now = time.Now()
	if p.Now != nil {
		p.now = p.Now()
	}
	if s.kind() != kObject {
		envelopeError(b, problem.FieldError{Field: "body", Rule: "json_object",
			Value: s.raw(s.i), Pointer: ""})
		return false
	}
	sawEvents, sawPixel := false, false
	if s.objectStart() {
		for {
			name := s.member()
			switch string(name) {
			case "pixel_id":
				if sawPixel {
					p.duplicateEnvelope(b, "pixel_id")
					break
				}
				sawPixel = true
				if s.kind() == kString {
					b.PixelID = string(s.str())
				} else {
					from := s.i
					s.skip(0)
					envelopeError(b, problem.FieldError{Field: "pixel_id", Rule: "type_string", Value: s.raw(from), Pointer: "/pixel_id"})
				}
			case "events":
				if sawEvents {
					p.duplicateEnvelope(b, "events")
					break
				}
				sawEvents = true
				p.events(b)
			default:
				s.skip(0)
			}
			if !s.next('}') {
				break
			}
		}
	}
	if s.err == nil && s.peek() != 0 {
		s.fail()
	}
	if s.err != nil {
		b.Envelope = append(b.Envelope[:0], problem.FieldError{Field: "body", Rule: "json",
			Value: "malformed JSON near byte " + strconv.Itoa(min(s.i, len(body))), Pointer: ""})
		return false
	}
	if b.PixelID == "" && !hasField(b.Envelope, "pixel_id") {
		envelopeError(b, problem.FieldError{Field: "pixel_id", Rule: "required", Value: nil, Pointer: "/pixel_id"})
	}
	if !sawEvents {
		envelopeError(b, problem.FieldError{Field: "events", Rule: "required", Value: nil, Pointer: "/events"})
	}
	return len(b.Envelope) == 0
}

// duplicateEnvelope refuses the batch for a second copy of its member name (JSON leaves
// which copy counts open) and skips the copy's value.
func (p *Parser) duplicateEnvelope(b *Batch, name string) {
	envelopeError(b, problem.FieldError{Field: name, Rule: RuleDuplicateMember, Value: nil, Pointer: "/" + name})
	p.sc.skip(0)
}

// envelopeError adds e to b.Envelope unless an error of the same field and rule is
// there: a member repeated in the envelope ("events" twice) is one fault, answered and
// kept once (a second entry would tie with the first in GET /rejections' order).
func envelopeError(b *Batch, e problem.FieldError) {
	for _, x := range b.Envelope {
		if x.Field == e.Field && x.Rule == e.Rule {
			return
		}
	}
	b.Envelope = append(b.Envelope, e)
}

func hasField(errs []problem.FieldError, field string) bool {
	for _, e := range errs {
		if e.Field == field {
			return true
		}
	}
	return false
}

func (p *Parser) events(b *Batch) {
	s := &p.sc
	if s.kind() != kArray {
		from := s.i
		s.skip(0)
		envelopeError(b, problem.FieldError{Field: "events", Rule: "type_array", Value: s.raw(from), Pointer: "/events"})
		return
	}
	s.i++
	if s.peek() == ']' {
		s.i++
		envelopeError(b, problem.FieldError{Field: "events", Rule: "min_items", Value: 0, Pointer: "/events"})
		return
	}
	for {
		if b.Total >= schema.MaxEvents {
			// Count the rest without keeping them; the batch is refused as a whole.
			s.skip(0)
			b.Total++
		} else {
			p.event(b, b.Total)
			b.Total++
		}
		if !s.next(']') {
			break
		}
	}
	if b.Total > schema.MaxEvents {
		envelopeError(b, problem.FieldError{Field: "events", Rule: "max_items", Value: b.Total,
			Pointer: "/events", Detail: "at most 50 events per batch"})
	}
}

// eventState tracks one event: which members it has shown with a valid value (seen, the
// bits of members_gen.go), whether it was rejected, and its client event_id.
type eventState struct {
	seen     uint32 // the members read with a valid value (members_gen.go's seen bits)
	met      uint32 // the members met, valid or not (the same bits)
	rejected bool
	clientID []byte
}

// RuleDuplicateMember rejects an event that holds one member twice (in the event or in
// one of its objects: "consent":{"measurement":false,"measurement":true}): JSON leaves
// which copy counts open, and an event whose consent is unclear must not be counted as
// consented.
const RuleDuplicateMember = jsondoc.RuleDuplicate

// duplicate rejects an event for a second copy of its member at JSON path field (met
// before: eventState.met), and skips the copy's value.
func (p *Parser) duplicate(b *Batch, st *eventState, idx int, field string) {
	p.reject(b, st, idx, field, RuleDuplicateMember, nil)
	p.sc.skip(0)
}

func (p *Parser) reject(b *Batch, st *eventState, idx int, field, rule string, value any) {
	if st.rejected {
		return // one reason per event: the first found
	}
	st.rejected = true
	b.Rejections = append(b.Rejections, Rejection{Index: idx, Field: field, Rule: rule, Value: value})
}

// members_gen.go (the member dispatch and required members) is generated from
// schema.EventFields:
//
//go:generate go test -run ^TestEventMembersGenerated$ . -update

// event reads one element of events[]: its members (eventMembers, generated from
// schema.EventFields with the rules for required members, missing), then the rules
// between members.
func (p *Parser) event(b *Batch, idx int) {
	s := &p.sc
	if s.kind() != kObject {
		from := s.i
		s.skip(0)
		b.Rejections = append(b.Rejections, Rejection{Index: idx, Field: "event", Rule: "type_object", Value: s.raw(from)})
		return
	}
	var e schema.Event
	var st eventState
	p.eventMembers(b, &st, idx, &e)
	if s.err != nil {
		return
	}
	p.missing(b, &st, idx)
	if st.rejected {
		return
	}
	if !e.Consent {
		// Consent withheld: no contact detail is kept, not even hashed.
		e.HasEmail, e.EmailSHA = false, [32]byte{}
	}
	if st.clientID != nil {
		e.ID = schema.ClientEventID(st.clientID)
		if p.seen(b, e.ID) {
			// The first accepted copy is the event; a later one is refused, so that an
			// event_id counts once however often a batch repeats it.
			p.reject(b, &st, idx, "event_id", schema.RuleDuplicateEventID, echo(st.clientID))
			b.Duplicates++
			return
		}
	}
	b.Events = append(b.Events, e)
	b.clientID = append(b.clientID, st.clientID != nil)
}

// anyClientID reports whether an event of b carries a client event_id.
func (b *Batch) anyClientID() bool {
	for _, c := range b.clientID {
		if c {
			return true
		}
	}
	return false
}

// seen reports whether an event of b already carries the client event id id, and
// notes id for the event about to be appended when not.
func (p *Parser) seen(b *Batch, id schema.UUID) bool {
	h := id[0] & 127 // a SHA-256 byte: uniform
	for {
		slot := p.idSlots[h]
		if slot == 0 {
			p.idSlots[h] = uint8(len(b.Events) + 1)
			p.idUsed = append(p.idUsed, h)
			return false
		}
		if b.Events[slot-1].ID == id {
			return true
		}
		h = (h + 1) & 127
	}
}

// AssignIDs gives every event without a client event_id an id derived from base and
// its index: the same base (from the Idempotency-Key) gives the same ids on a retry.
func (b *Batch) AssignIDs(base [16]byte) {
	for i := range b.Events {
		if b.clientID[i] {
			continue
		}
		u := base
		binary.BigEndian.PutUint16(u[14:], binary.BigEndian.Uint16(u[14:])^uint16(i))
		u[6] = u[6]&0x0f | 0x40
		u[8] = u[8]&0x3f | 0x80
		b.Events[i].ID = u
	}
}

// unsafeString aliases b as a string without copying. The caller guarantees b is not
// modified while the string is in use (the request body, during the handler).
func unsafeString(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

// The readers of the members, one per JSON path of schema.EventFields (members_gen.go
// calls them): each reads the member's value at the scanner (from is where the value
// starts), checks its type and rules, rejecting the event with the first broken rule,
// and stores it in e. They report whether a valid value was read. (event_id's,
// event_name's and the other fields' are in fields.go.)

func (p *Parser) readOccurredAt(b *Batch, st *eventState, idx int, e *schema.Event, from int) bool {
	s := &p.sc
	if !p.required(b, st, idx, "occurred_at", kString) {
		return false
	}
	v := s.str()
	sec, nsec, ok := parseUTC(v)
	switch {
	case !ok:
		p.reject(b, st, idx, "occurred_at", "iso8601_utc", echo(v))
	case before(sec, nsec, p.now.Add(-MaxEventAge)):
		p.reject(b, st, idx, "occurred_at", "too_old", echo(v))
	case after(sec, nsec, p.now.Add(MaxClockSkew)):
		p.reject(b, st, idx, "occurred_at", "in_future", echo(v))
	default:
		e.OccurredAt = sec*1000 + int64(nsec)/1e6
		return true
	}
	return false
}

// before and after compare the instant sec.nsec (Unix) with t, exactly.
func before(sec int64, nsec int, t time.Time) bool {
	ts := t.Unix()
	return sec < ts || sec == ts && nsec < t.Nanosecond()
}

func after(sec int64, nsec int, t time.Time) bool {
	ts := t.Unix()
	return sec > ts || sec == ts && nsec > t.Nanosecond()
}

// parseUTC accepts YYYY-MM-DDTHH:MM:SS[.fraction]Z (RFC 3339 in UTC, with Z) and
// returns the instant as Unix seconds and nanoseconds. It refuses a day the month does
// not have (2026-02-30).
func parseUTC(v []byte) (sec int64, nsec int, ok bool) {
	if len(v) < 20 || v[len(v)-1] != 'Z' || v[4] != '-' || v[7] != '-' || v[10] != 'T' || v[13] != ':' || v[16] != ':' {
		return 0, 0, false
	}
	num := func(b []byte) (int, bool) {
		n := 0
		for _, c := range b {
			if c < '0' || c > '9' {
				return 0, false
			}
			n = n*10 + int(c-'0')
		}
		return n, true
	}
	y, ok1 := num(v[0:4])
	mo, ok2 := num(v[5:7])
	d, ok3 := num(v[8:10])
	h, ok4 := num(v[11:13])
	mi, ok5 := num(v[14:16])
	s, ok6 := num(v[17:19])
	if !(ok1 && ok2 && ok3 && ok4 && ok5 && ok6) || mo < 1 || mo > 12 || d < 1 || d > daysIn(y, mo) || h > 23 || mi > 59 || s > 59 {
		return 0, 0, false
	}
	if rest := v[19 : len(v)-1]; len(rest) > 0 {
		if rest[0] != '.' || len(rest) < 2 || len(rest) > 10 {
			return 0, 0, false
		}
		f, ok := num(rest[1:])
		if !ok {
			return 0, 0, false
		}
		for i := len(rest) - 1; i < 9; i++ {
			f *= 10
		}
		nsec = f
	}
	return daysFromCivil(y, mo, d)*86400 + int64(h*3600+mi*60+s), nsec, true
}

// daysIn is the number of days of month m (1–12) of year y (proleptic Gregorian).
func daysIn(y, m int) int {
	if m == 2 && y%4 == 0 && (y%100 != 0 || y%400 == 0) {
		return 29
	}
	return int("\x1f\x1c\x1f\x1e\x1f\x1e\x1f\x1f\x1e\x1f\x1e\x1f"[m-1])
}

// daysFromCivil is the number of days from 1970-01-01 to y-m-d (proleptic Gregorian,
// y ≥ 0), after Howard Hinnant's days_from_civil.
func daysFromCivil(y, m, d int) int64 {
	if m <= 2 {
		y--
	}
	era := (y + 400) / 400 // y ≥ -1: shift by one era to keep the division a floor
	era--
	yoe := y - era*400                  // [0, 399]
	doy := (153*((m+9)%12)+2)/5 + d - 1 // [0, 365], from March 1
	doe := yoe*365 + yoe/4 - yoe/100 + doy
	return int64(era)*146097 + int64(doe) - 719468
}
