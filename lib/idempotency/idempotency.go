// Package idempotency makes writes repeatable: the first request with an Idempotency-Key
// reserves it, its response is stored for at least 24 hours, and a repeat with the same
// key, method, path and body gets that response back byte for byte. The same key with a
// different request is idempotency_key_reuse; a repeat while the first still runs is
// idempotency_key_in_use.
//
// Records are fields of bucket tables (buckets.go): small Redis hashes in 256 groups,
// each group a table under svc:idem4:{<byte, hex>}:, where a record's group is the last
// byte of the SHA-256 of its API key's id and its Idempotency-Key, and its field the first
// 10 bytes of that hash (a lookup meets a few hundred fields that share at most 16 of its
// 80 bits: two keys are taken for one with a chance under 2^-50). So one API key's records
// spread over every slot group, and over every master of a Redis Cluster, like every
// other key's: the busiest key is not held to one Redis core (DESIGN.md, "Redis work per
// request"). A record's value is one of
//
//	"P" <fingerprint> <owner> <lapses at, Unix ms> " " <takeover at, Unix ms; 0: never>   reserved
//	"D" <fingerprint> <packed answer>                                                      done
//	"L" <fingerprint>      done, the answer too long for a field (over MaxValue - 1 bytes
//	                       in all): "D" <fingerprint> <packed answer> is the string
//	                       svc:idem4:{<byte, hex>}:a<field, hex>, expiring with the record
//
// where the fingerprint is 8 bytes of the SHA-256 of method, path and body, the owner 8
// bytes of the SHA-256 of the reserving request's id, and the answer is packed
// (answer.go: a 202 of POST /events takes about 20 bytes). A done record lives 24 h to
// 30 h after it was written (Buckets: Life 24 h, swept every 6 h, plus 1 min of clock
// skew); about 50 B of Redis memory each (MEMORY USAGE of the tables), where a key of its
// own took about 400.
//
// A reservation lasts until its request completes (Complete), fails retryably (Release),
// or its process dies: then it lapses after PendingTTL (60 s) and counts as absent. A
// route that declares a takeover time (httpserver.Route.TakeoverAfter) lets an identical repeat
// take over a reservation once that time has passed since it was made: the repeat runs as
// a first request would, under a reservation of its own. The contract a route makes by
// declaring it: (1) running the request twice has the effect of running it once, and (2)
// by that time the first run has answered its client (or its process is dead). POST
// /events keeps it: both runs produce the same batch under the same batch id, and the
// consumer stores one copy (ingest/README.md argues it); its first run answers within the
// delivery timeout. A repeat with a different body still gets idempotency_key_reuse,
// pending or not, because a takeover needs the same fingerprint. The owner keeps a late
// Release of the first run from dropping the taker's reservation.
//
// The records are not in the hash slot of the key's rate-limit windows (limits.Keys): the
// server's gate reserves first (Reserve, on the record's slot), then takes from the
// windows (on the key's), and releases the reservation of a request the windows deny
// (on one Redis server, the HTTP gate does the three in one function call, with
// PendingRecord and LuaRecords).
// (Records of the formats before, svc:idem3:{<key id>}: tables, svc:idem2: strings and
// svc:idem: hashes, are not read: they expire within 30 hours of an upgrade, and a retry
// that misses one runs again, its events caught by the consumer's batch claim.)
package idempotency

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// Outcome of a reservation (Reserve).
type Outcome int

const (
	Proceed Outcome = iota // first use: run the request, then Complete or Release
	Replay                 // identical repeat of a finished request: send Stored
	Reuse                  // same key, different request: 409 idempotency_key_reuse
	InUse                  // identical repeat while the first runs: 409 idempotency_key_in_use
)

// Stored is a finished request's response.
type Stored struct {
	Status      int
	ContentType string
	Body        []byte
}

// Store keeps idempotency records.
type Store struct {
	rdb redis.Cmdable
	// TTL is the replay window: a finished response is kept at least this long (24 h).
	TTL time.Duration
	// PendingTTL bounds a reservation whose process died before finishing (60 s): after
	// it, the request may run again.
	PendingTTL time.Duration
	// Span is how often a bucket of the records' tables is swept (6 h): a record lives
	// at most TTL + Span + 2 min.
	Span time.Duration
	// Now is the clock of Complete and Release; the gate passes its own (the server's).
	Now func() time.Time
}

// New returns a Store with the default TTLs.
func New(rdb redis.Cmdable) *Store {
	return &Store{rdb: rdb, TTL: 24 * time.Hour, PendingTTL: time.Minute, Span: 6 * time.Hour, Now: time.Now}
}

// MaxKeyLen is the longest Idempotency-Key accepted.
const MaxKeyLen = 255

// Fingerprint identifies a request: 8 bytes of the SHA-256 of its method, path and body.
func Fingerprint(method, path string, body []byte) string {
	h := sha256.New()
	h.Write([]byte(method))
	h.Write([]byte{0})
	h.Write([]byte(path))
	h.Write([]byte{0})
	h.Write(body)
	return string(h.Sum(nil)[:fpLen])
}

const (
	fpLen    = 8  // bytes of a Fingerprint
	fieldLen = 10 // bytes of a record's field
	ownerLen = 8  // bytes of an owner
)

// recordHash identifies key id's record of idemKey: its field is the first fieldLen
// bytes, its group the last byte.
func recordHash(keyID, idemKey string) [sha256.Size]byte {
	h := sha256.New()
	h.Write([]byte(keyID))
	h.Write([]byte{0})
	h.Write([]byte(idemKey))
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	return sum
}

// record is key id's record of idemKey: the directory key of its group and its field.
func record(keyID, idemKey string) (dir, field string) {
	h := recordHash(keyID, idemKey)
	return GroupBase(h[len(h)-1]) + "d", string(h[:fieldLen])
}

// owner is what a reservation keeps of the reserving request's id.
func owner(requestID string) string {
	h := sha256.Sum256([]byte(requestID))
	return string(h[:ownerLen])
}

// Group is the group of key id's record of idemKey (tests and tools).
func Group(keyID, idemKey string) byte {
	h := recordHash(keyID, idemKey)
	return h[len(h)-1]
}

// Field is key id's record of idemKey's field in its group's table (tests and tools).
func Field(keyID, idemKey string) string {
	_, f := record(keyID, idemKey)
	return f
}

// Groups is the number of record groups (the last byte of a record's hash).
const Groups = 256

// GroupBase is the base of group g's table (tests and tools): every key of it carries
// the hash tag {<g, hex>}.
func GroupBase(g byte) string { return fmt.Sprintf("svc:idem4:{%02x}:", g) }

// Buckets is the timing of the records' tables.
func (s *Store) Buckets() Buckets { return Buckets{Life: s.TTL, Every: s.Span, Skew: time.Minute} }

// Reservation is what Reserve decided: its outcome, the answer to replay (Replay), and
// where the reservation was written (Proceed), for CompleteReserved.
type Reservation struct {
	Outcome Outcome
	Stored  *Stored
	bucket  string
}

// Reserve looks key id's record of idemKey up and, when the request may run (Proceed),
// reserves it for the request requestID with its fingerprint fp, for takeover (the
// route's TakeoverAfter; 0: none), in one call on the record's group. Replay comes with
// the stored answer; Reuse and InUse write nothing.
func (s *Store) Reserve(ctx context.Context, keyID, idemKey, fp string, takeover time.Duration, requestID string) (Reservation, error) {
	p := s.PendingRecord(keyID, idemKey, fp, takeover, requestID)
	res, err := recordsLibrary.Call(ctx, s.rdb, "reserve_record", []string{p.Dir}, s.recordArgs(p.now, p.Field, p.Value)...).Slice()
	if err != nil {
		return Reservation{}, err
	}
	return ReservationOf(res)
}

// PendingRecord is a reservation as LuaRecords' reserve_in(t, f, pv) makes it, for a function
// of another library that reserves as one step of its own (the HTTP gate's, on one Redis
// server): t = r_open(Dir, now, Buckets.Args...), f = Field, pv = Value. Its lapse and takeover
// times are fixed when it is made (Store.PendingRecord), so a caller sends the strings as they
// are and Redis formats no number for them.
type PendingRecord struct {
	Dir   string // the record's group directory key
	Field string // the record's field in the group's table
	Value string // the reservation: "P" <fingerprint> <owner> <lapses at> " " <takeover at>
	now   int64  // when it was made, Unix ms
}

// PendingRecord makes the reservation of key id's record of idemKey for the request requestID
// with its fingerprint fp, lapsing after PendingTTL, for takeover after takeover (the
// route's TakeoverAfter; 0: none). Reserve makes it in a call of its own.
func (s *Store) PendingRecord(keyID, idemKey, fp string, takeover time.Duration, requestID string) PendingRecord {
	now := s.Now().UnixMilli()
	at := int64(0)
	if takeover > 0 {
		at = now + takeover.Milliseconds()
	}
	dir, f := record(keyID, idemKey)
	v := make([]byte, 0, 1+fpLen+ownerLen+2*14)
	v = append(append(append(v, 'P'), fp...), owner(requestID)...)
	v = append(strconv.AppendInt(v, now+s.PendingTTL.Milliseconds(), 10), ' ')
	v = strconv.AppendInt(v, at, 10)
	return PendingRecord{Dir: dir, Field: f, Value: string(v), now: now}
}

// ReservationOf reads reserve's result: {0, bucket} proceed (also {0, bucket, 1}, a
// second run of the request's own reservation), {1, record} replay, {2} reuse, {3} in
// use (a second value of false or nil is ignored).
func ReservationOf(res []any) (Reservation, error) {
	if len(res) == 0 {
		return Reservation{}, fmt.Errorf("idempotency: reserve returned nothing")
	}
	var r Reservation
	r.Outcome, r.Stored = outcomeOf(res)
	if r.Outcome == Proceed && len(res) > 1 {
		r.bucket, _ = res[1].(string)
	}
	return r, nil
}

// CompleteReserved is Complete for the request that made res (Proceed), without a
// function call: one HSET of the record into the bucket res was written to, and for an
// answer too long for a field (over MaxValue - 1 bytes) the string that holds it first,
// in the same round trip (both carry the group's hash tag), expiring as Complete's. Where
// that field was not there any more (its bucket split meanwhile, or the reservation
// lapsed or was released) it takes the HSET back and runs Complete.
func (s *Store) CompleteReserved(ctx context.Context, res Reservation, keyID, idemKey, fp string, st Stored) error {
	rec := doneRecord(fp, st)
	if res.bucket == "" {
		return s.Complete(ctx, keyID, idemKey, fp, st)
	}
	dir, f := record(keyID, idemKey)
	now := s.Now()
	large := len(rec) > MaxValue-stampLen
	field := rec
	if large {
		field = "L" + fp
	}
	var added *redis.IntCmd
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		if large {
			p.Set(ctx, largeKey(dir, f), rec, s.largeLife())
		}
		added = p.HSet(ctx, res.bucket, f, stamp(now)+field)
		return nil
	})
	if err != nil || added.Val() == 0 {
		return err
	}
	if err := s.rdb.HDel(ctx, res.bucket, f).Err(); err != nil {
		return err
	}
	return s.Complete(ctx, keyID, idemKey, fp, st)
}

// largeKey is the string holding the answer of the record at field f of the group whose
// directory is dir when it is too long for a field (LuaRecords' r_large).
func largeKey(dir, f string) string {
	return dir[:len(dir)-1] + "a" + hex.EncodeToString([]byte(f))
}

// largeLife is how long a string of largeKey lives from now: as long as the buckets'
// keys written now (LuaBuckets' b_expiry), so at least as long as its record.
func (s *Store) largeLife() time.Duration {
	b := s.Buckets()
	return b.Every + b.Life + b.Skew + SweepMargin
}

// stampLen is the bytes of a bucket value's write time (LuaBuckets' b_stamp).
const stampLen = 1

// stamp is b_stamp: the Unix quarter hour of now, mod 256.
func stamp(now time.Time) string {
	return string([]byte{byte(now.UnixMilli() / 900000 % 256)})
}

// outcomeOf reads reserve's result (see LuaRecords).
func outcomeOf(res []any) (Outcome, *Stored) {
	o, _ := res[0].(int64)
	if Outcome(o) != Replay {
		return Outcome(o), nil
	}
	rec := ""
	if len(res) > 1 {
		rec, _ = res[1].(string)
	}
	st, err := parseDone(rec)
	if err != nil {
		return InUse, nil // a record this version cannot read: the client retries later
	}
	return Replay, &st
}

// doneRecord is the record of a finished request: "D" fp packed answer.
func doneRecord(fp string, st Stored) string {
	return "D" + fp + string(Pack(st))
}

// parseDone reads a doneRecord.
func parseDone(rec string) (Stored, error) {
	if len(rec) < 1+fpLen+1 || rec[0] != 'D' {
		return Stored{}, errPacked
	}
	return Unpack([]byte(rec[1+fpLen:]))
}

// run calls fn on key id's record of idemKey with args.
func (s *Store) run(ctx context.Context, fn, keyID, idemKey string, args ...any) *redis.Cmd {
	dir, all := s.callArgs(keyID, idemKey, args...)
	return recordsLibrary.Call(ctx, s.rdb, fn, []string{dir}, all...)
}

// callArgs is the directory key and ARGV of a call on key id's record of idemKey with
// args: now (ms), the record's field, args, the table's timing.
func (s *Store) callArgs(keyID, idemKey string, args ...any) (dir string, all []any) {
	dir, f := record(keyID, idemKey)
	return dir, s.recordArgs(s.Now().UnixMilli(), f, args...)
}

// recordArgs is a records' function's ARGV (LuaRecords): now (ms), the record's field f,
// args, then the tables' timing (Buckets.Args).
func (s *Store) recordArgs(now int64, f string, args ...any) []any {
	all := make([]any, 0, 2+len(args)+3)
	return append(append(append(all, now, f), args...), s.Buckets().Args()...)
}

// Complete stores the response of the reserved request for the replay window, in one
// script that an auto-pipelining client batches with other requests' commands. It does
// not check that the reservation is still the caller's: it is, unless it lapsed
// (PendingTTL, far longer than a request runs) or was taken over, and then the request
// it stores the answer of had the same effect as the taker's (the takeover contract),
// so either answer is the key's answer.
func (s *Store) Complete(ctx context.Context, keyID, idemKey, fp string, st Stored) error {
	return s.run(ctx, "complete_record", keyID, idemKey, doneRecord(fp, st)).Err()
}

// Release drops the reservation the request requestID made, when its request failed in
// a way a retry may fix (5xx), so that the retry runs. A reservation taken over by
// another request, or completed, stays.
func (s *Store) Release(ctx context.Context, keyID, idemKey, fp, requestID string) error {
	if requestID == "" {
		return fmt.Errorf("idempotency: release without a request id")
	}
	return s.run(ctx, "release_record", keyID, idemKey, fp, owner(requestID)).Err()
}

// Forget drops key id's records of idemKeys, in one pipeline (tools: the load generator
// cleans up after itself).
func (s *Store) Forget(ctx context.Context, keyID string, idemKeys ...string) error {
	keys := make([]string, len(idemKeys))
	args := make([][]any, len(idemKeys))
	now, table := s.Now().UnixMilli(), s.Buckets().Args()
	for i, k := range idemKeys {
		var f string
		keys[i], f = record(keyID, k)
		args[i] = append([]any{now, f}, table...)
	}
	_, err := recordsLibrary.Pipelined(ctx, s.rdb, "forget_record", keys, args)
	return err
}

// State of a record, as Peek reads it.
type State int

const (
	Absent  State = iota // no record (or a lapsed reservation)
	Pending              // reserved, not finished
	Done                 // finished: its answer is replayed
)

// Peek reports the state of key id's record for idemKey (tests and tools).
func (s *Store) Peek(ctx context.Context, keyID, idemKey string) (State, error) {
	v, err := s.run(ctx, "peek_record", keyID, idemKey).Text()
	switch {
	case errors.Is(err, redis.Nil):
		return Absent, nil
	case err != nil:
		return Absent, err
	case v[0] == 'P':
		var lapse, at int64
		if _, err := fmt.Sscanf(v[1+fpLen+ownerLen:], "%d %d", &lapse, &at); err == nil && lapse <= s.Now().UnixMilli() {
			return Absent, nil
		}
		return Pending, nil
	}
	return Done, nil
}
