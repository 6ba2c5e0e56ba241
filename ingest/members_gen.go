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
			if st.met&seenEventID != 0 {
				p.duplicate(b, st, idx, "event_id")
				break
			}
			st.met |= seenEventID
			if p.readEventID(b, st, idx, e, from) {
				st.seen |= seenEventID
			}
		case "event_name":
			if st.met&seenEventName != 0 {
				p.duplicate(b, st, idx, "event_name")
				break
			}
			st.met |= seenEventName
			if p.readEventName(b, st, idx, e, from) {
				st.seen |= seenEventName
			}
		case "occurred_at":
			if st.met&seenOccurredAt != 0 {
				p.duplicate(b, st, idx, "occurred_at")
				break
			}
			st.met |= seenOccurredAt
			if p.readOccurredAt(b, st, idx, e, from) {
				st.seen |= seenOccurredAt
			}
		case "value":
			if st.met&seenValue != 0 {
				p.duplicate(b, st, idx, "value")
				break
			}
			st.met |= seenValue
			if p.readValue(b, st, idx, e, from) {
				st.seen |= seenValue
			}
		case "currency":
			if st.met&seenCurrency != 0 {
				p.duplicate(b, st, idx, "currency")
				break
			}
			st.met |= seenCurrency
			if p.readCurrency(b, st, idx, e, from) {
				st.seen |= seenCurrency
			}
		case "consent":
			if st.met&seenConsent != 0 {
				p.duplicate(b, st, idx, "consent")
				break
			}
			st.met |= seenConsent
			if p.required(b, st, idx, "consent", kObject) {
				st.seen |= seenConsent
				p.consentMembers(b, st, idx, e)
			}
		case "identity":
			if st.met&seenIdentity != 0 {
				p.duplicate(b, st, idx, "identity")
				break
			}
			st.met |= seenIdentity
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
			if st.met&seenConsentMeasurement != 0 {
				p.duplicate(b, st, idx, "consent.measurement")
				break
			}
			st.met |= seenConsentMeasurement
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
			if st.met&seenIdentityEmail != 0 {
				p.duplicate(b, st, idx, "identity.email")
				break
			}
			st.met |= seenIdentityEmail
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
