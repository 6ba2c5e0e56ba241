// Code generated from schema.EventFields by TestEventMembersGenerated (go generate ./ingest/). DO NOT EDIT.

package ingest

import "svc/schema"

// Bits of eventState.seen: the members an event has shown with a valid value.
const (
	seenEventID = 1 << iota
	seenEventName
	seenOccurredAt
	seenValue
	seenCurrency
	seenConsent
	seenConsentMeasurement
	seenIdentity
	seenIdentityEmail
)

// eventMembers reads the members of an event object into e.
func (p *Parser) eventMembers(b *Batch, st *eventState, idx int, e *schema.Event) {
	s := &p.sc
	if !s.objectStart() {
		return
	}
	for {
		name := s.member()
		from := s.i
		switch string(name) {
		case "event_id":
			if p.readEventID(b, st, idx, e, from) {
				st.seen |= seenEventID
			}
		case "event_name":
			if p.readEventName(b, st, idx, e, from) {
				st.seen |= seenEventName
			}
		case "occurred_at":
			if p.readOccurredAt(b, st, idx, e, from) {
				st.seen |= seenOccurredAt
			}
		case "value":
			if p.readValue(b, st, idx, e, from) {
				st.seen |= seenValue
			}
		case "currency":
			if p.readCurrency(b, st, idx, e, from) {
				st.seen |= seenCurrency
			}
		case "consent":
			if p.required(b, st, idx, "consent", kObject) {
				st.seen |= seenConsent
				p.consentMembers(b, st, idx, e)
			}
		case "identity":
			if p.optional(b, st, idx, "identity", kObject, false) {
				st.seen |= seenIdentity
				p.identityMembers(b, st, idx, e)
			}
		default:
			s.skip(0)
		}
		if !s.next('}') {
			return
		}
	}
}

// consentMembers reads the members of an event's consent object into e.
func (p *Parser) consentMembers(b *Batch, st *eventState, idx int, e *schema.Event) {
	s := &p.sc
	if !s.objectStart() {
		return
	}
	for {
		name := s.member()
		from := s.i
		switch string(name) {
		case "measurement":
			if p.readConsentMeasurement(b, st, idx, e, from) {
				st.seen |= seenConsentMeasurement
			}
		default:
			s.skip(0)
		}
		if !s.next('}') {
			return
		}
	}
}

// identityMembers reads the members of an event's identity object into e.
func (p *Parser) identityMembers(b *Batch, st *eventState, idx int, e *schema.Event) {
	s := &p.sc
	if !s.objectStart() {
		return
	}
	for {
		name := s.member()
		from := s.i
		switch string(name) {
		case "email":
			if p.readIdentityEmail(b, st, idx, e, from) {
				st.seen |= seenIdentityEmail
			}
		default:
			s.skip(0)
		}
		if !s.next('}') {
			return
		}
	}
}

// missing rejects an event without a required member (the first in the
// declaration's order), or without a member required with another that it has.
func (p *Parser) missing(b *Batch, st *eventState, idx int) {
	switch {
	case st.seen&seenEventName == 0:
		p.reject(b, st, idx, "event_name", "required", nil)
	case st.seen&seenOccurredAt == 0:
		p.reject(b, st, idx, "occurred_at", "required", nil)
	case st.seen&seenConsent == 0:
		p.reject(b, st, idx, "consent", "required", nil)
	case st.seen&seenConsentMeasurement == 0:
		p.reject(b, st, idx, "consent.measurement", "required", nil)
	case st.seen&seenValue != 0 && st.seen&seenCurrency == 0:
		p.reject(b, st, idx, "currency", "required_with_value", nil)
	}
}
