package schema

import (
	"crypto/sha256"
	"strconv"
)

// Client event ids. A client may give an event its own event_id (1–64 printable
// characters);
// the edge stores it as ClientEventID(event_id), a UUID of version 8, and assigns every
// other event a version 4 UUID. The version tells the consumer which events to
// deduplicate by (pixel, event id) without a field of its own in the record, so records
// written before the consumer did so are deduplicated as well.

// RuleDuplicateEventID is the rule of a rejection of an event that is a later copy of
// an event_id the pixel already has: in the 202 for a copy within the batch (the edge),
// and in GET /rejections for a copy of an earlier batch's event too (the consumer).
const RuleDuplicateEventID = "duplicate_event_id"

// RuleDuplicateBatch is the rule of the events of a request that was a second copy of a
// batch already stored (the same key and Idempotency-Key: its first edge died after
// Kafka's acknowledgement, before the answer was kept, and the client retried). The
// consumer stores the batch once, under the first request, and keeps the copy's events
// as rejections of this rule under the copy's request_id, so that the request the client
// got a 202 for can be traced (GET /batches/{request_id}: its events are duplicates).
const RuleDuplicateBatch = "duplicate_batch"

// ClientEventID maps a client's event_id to the event's UUID: the first 16 bytes of its
// SHA-256, with the version nibble set to 8 (RFC 9562's custom version) and the RFC 4122
// variant. The same event_id always gives the same UUID.
func ClientEventID(id []byte) UUID {
	sum := sha256.Sum256(id)
	var u UUID
	copy(u[:], sum[:16])
	u[6] = u[6]&0x0f | 0x80
	u[8] = u[8]&0x3f | 0x80
	return u
}

// FromClient reports whether u was derived from a client's event_id (ClientEventID).
func (u UUID) FromClient() bool { return u[6]>>4 == 8 }

// ClientIDs is what ScanClientIDs reads of a record: its header (Batch without Events)
// and the events whose id came from the client, by their index in the batch, plus the
// range of every event's occurred_at.
type ClientIDs struct {
	Batch                    // header fields only; Events stays empty
	IDs                      []UUID
	Index                    []uint8 // Index[i] is the position of IDs[i] in the batch
	MinOccurred, MaxOccurred int64   // over every event of the batch
}

// ScanClientIDs reads a record value as DecodeBatch does, with the same checks (a value
// one refuses, the other refuses), without keeping the events: only the ids clients
// gave (FromClient). It reuses s's slices.
func ScanClientIDs(value []byte, s *ClientIDs) error { return decode(value, &s.Batch, s) }

func (s *ClientIDs) start() {
	s.IDs, s.Index = s.IDs[:0], s.Index[:0]
	s.MinOccurred, s.MaxOccurred = 1<<63-1, -1<<63
}

func (s *ClientIDs) add(e *Event, i int) {
	s.MinOccurred, s.MaxOccurred = min(s.MinOccurred, e.OccurredAt), max(s.MaxOccurred, e.OccurredAt)
	if e.ID.FromClient() {
		s.IDs = append(s.IDs, e.ID)
		s.Index = append(s.Index, uint8(i))
	}
}

// BatchID is the id of a batch sent by key keyID with Idempotency-Key idemKey
// (schema.HeaderBatchID): the same for every retry, so the consumer recognises a second
// copy (its batch claim, rollup/dedup.go).
func BatchID(keyID [16]byte, idemKey []byte) (id [16]byte) {
	h := sha256.New()
	h.Write(keyID[:])
	h.Write(idemKey)
	copy(id[:], h.Sum(nil))
	return id
}

// EventClaimLog is the Redis key of the rollup consumer's claim log of client event ids
// (rollup/eventdedup.go) for database db, topic (its incarnation's label), partition and
// epoch: a hash tag each, so the logs spread over a Redis Cluster's masters.
func EventClaimLog(db, topic string, partition int32, epoch int64) string {
	return EventClaimLogs(db) + topic + ":" + strconv.Itoa(int(partition)) + ":" + strconv.FormatInt(epoch, 10) + "}"
}

// EventClaimLogs is the prefix of every claim log of database db (a pattern with "*"
// appended: a scratch database's logs are dropped with it).
func EventClaimLogs(db string) string { return "svc:eid:{" + db + ":" }
