// Package idempotency makes writes repeatable: the first request with an Idempotency-Key
// reserves it, its response is stored for at least 24 hours, and a repeat with the same
// key, method, path and body gets that response back byte for byte. The same key with a
// different request is idempotency_key_reuse; a repeat while the first still runs is
// idempotency_key_in_use.
//
// Records are per API key, fields of the key's table (table.go): small Redis hashes
// under svc:idem3:{<key id>}:, one family per 6-hour epoch, split as the key gets busy so
// that each stays in Redis's compact listpack encoding. A record's field is the first
// 10 bytes of the SHA-256 of the Idempotency-Key (a lookup meets a few hundred fields
// that share at most 16 of its 80 bits: two keys are taken for one with a chance under
// 2^-50); its value is one of
//
//	"P" <fingerprint> <owner> <lapses at, Unix ms> " " <takeover at, Unix ms; 0: never>   reserved
//	"D" <fingerprint> <packed answer>                                                      done
//	"L" <fingerprint>      done, the answer too long for a field (over MaxValue bytes in
//	                       all): "D" <fingerprint> <packed answer> is the string
//	                       svc:idem3:{<key id>}:a<epoch>:<field, hex>, expiring with the epoch
//
// where the fingerprint is 8 bytes of the SHA-256 of method, path and body, the owner 8
// bytes of the SHA-256 of the reserving request's id, and the answer is packed
// (answer.go: a 202 of POST /events takes about 20 bytes). A done record lives 24 h to
// 30 h after it was written (Table: Life 24 h, Span 6 h, plus 1 min of clock skew); about
// 50 B of Redis memory each (MEMORY USAGE of the tables), where a key of its own took
// about 400.
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
// The table's base carries the hash tag {<key id>} of the key's rate-limit windows
// (limits.Keys): the gate script reserves a record and takes from the windows in one hash
// slot of a Redis Cluster. A key's records thus live on one master; the key's daily
// quota bounds how many there are. (Records of the formats before, svc:idem2: strings
// and svc:idem: hashes, are not read: they expire within 24 hours of an upgrade, and a
// retry that misses one runs again, its events caught by the consumer's batch claim.)
package idempotency

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"svc/lib/redisfn"
)

// Outcome of a reservation (LuaReserve, run by the server's gate script).
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
	// Span is the epoch of the records' tables (6 h): a record lives at most TTL + Span.
	Span time.Duration
	// Now is the clock of Complete and Release; the gate passes its own (the server's).
	Now func() time.Time
}

// New returns a Store with the default TTLs.
func New(rdb redis.Cmdable) *Store {
	return &Store{rdb: rdb, TTL: 24 * time.Hour, PendingTTL: time.Minute, Span: 6 * time.Hour, Now: time.Now}
}

// Table is the timing of the records' tables.
func (s *Store) Table() Table { return Table{Life: s.TTL, Span: s.Span, Skew: time.Minute} }

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

// field is the table field of idemKey's record.
func field(idemKey string) string {
	h := sha256.Sum256([]byte(idemKey))
	return string(h[:fieldLen])
}

// owner is what a reservation keeps of the reserving request's id.
func owner(requestID string) string {
	h := sha256.Sum256([]byte(requestID))
	return string(h[:ownerLen])
}

// KeyPrefix is the common prefix of key id's records (for tools that drop them): the
// base of its table.
func KeyPrefix(keyID string) string { return "svc:idem3:{" + keyID + "}:" }

// DirKey is the Redis key of the directory of key id's table: the key the gate script
// declares (its hash tag is the key's rate-limit windows').
func DirKey(keyID string) string { return KeyPrefix(keyID) + "m" }

// luaRecords defines, over LuaTable, the operations on records: reserve and reserved
// (the gate's), complete, release, forget and peek. Each takes the directory key dk, now
// (ms) and its arguments as a list.
const luaRecords = `
local function r_table(dk, now, life, span, skew)
  return t_open(string.sub(dk, 1, -2), now, life, span, skew)
end

local function r_large(t, en, f)
  return t.base .. 'a' .. en .. ':' .. t_hex(f)
end

local to_reserve = nil

-- reserve decides, writing nothing: a = {f, fp, pending ms, takeover ms, owner, life,
-- span, skew}. {0} proceed (also when it takes over an expired takeover time or a lapsed
-- reservation): then reserved() makes the reservation; {1, record} replay, {2} reuse,
-- {3} in use.
local function reserve(dk, now, a)
  local f, fp, pending, takeover, owner = a[1], a[2], tonumber(a[3]), tonumber(a[4]), a[5]
  local t = r_table(dk, now, a[6], a[7], a[8])
  local v, key, en, cur = t_find(t, f)
  if v then
    local kind, same = string.sub(v, 1, 1), string.sub(v, 2, 9) == fp
    if kind == 'P' then
      local lapse, was = string.match(v, '^(%d+) (%d+)$', 18)
      lapse, was = tonumber(lapse) or 0, tonumber(was) or 0
      if lapse > t.now then
        if not same then return {2} end
        if was == 0 or t.now < was then return {3} end
      end
    elseif not same then
      return {2}
    elseif kind == 'D' then
      return {1, v}
    else
      local big = redis.call('GET', r_large(t, en, f))
      if big then return {1, big} end
    end
  end
  local at = 0
  if takeover > 0 then at = t.now + takeover end
  to_reserve = {t = t, f = f, key = key, en = en, cur = cur,
    v = 'P' .. fp .. owner .. string.format('%d %d', t.now + pending, at)}
  return {0}
end

-- reserved makes the reservation the last reserve decided on.
local function reserved()
  local r = to_reserve
  local nk = t_put(r.t, r.f, r.v, r.cur)
  if r.key and r.key ~= nk then t_del(r.t, r.key, r.en, r.f) end
end

-- complete: a = {f, record, life, span, skew}: the record replaces whatever f holds.
-- Usually f is reserved in the current epoch and one HSET replaces it.
local function complete(dk, now, a)
  local f, rec = a[1], a[2]
  local t = r_table(dk, now, a[3], a[4], a[5])
  if #rec > 64 then
    local e = math.floor(t.now / t.span)
    redis.call('SET', r_large(t, string.format('%d', e), f), rec, 'PXAT', string.format('%d', t_expiry(t, e)))
    rec = 'L' .. string.sub(rec, 2, 9)
  end
  local _, en, added = t_put(t, f, rec)
  if added then
    local v, key, was = t_find(t, f, en)
    if v then t_del(t, key, was, f) end
  end
  return 1
end

-- release: a = {f, fp, owner, life, span, skew}: drops the reservation fp and owner made.
local function release(dk, now, a)
  local f = a[1]
  local t = r_table(dk, now, a[4], a[5], a[6])
  local v, key, en = t_find(t, f)
  if v and string.sub(v, 1, 1 + 8 + 8) == 'P' .. a[2] .. a[3] then t_del(t, key, en, f) end
  return 1
end

-- forget: a = {f, life, span, skew}: drops the record, whatever it holds.
local function forget(dk, now, a)
  local t = r_table(dk, now, a[2], a[3], a[4])
  local v, key, en = t_find(t, a[1])
  if v then
    t_del(t, key, en, a[1])
    if string.sub(v, 1, 1) == 'L' then redis.call('DEL', r_large(t, en, a[1])) end
  end
  return 1
end

-- peek: a = {f, life, span, skew}: the record, or false.
local function peek(dk, now, a)
  local v = t_find(r_table(dk, now, a[2], a[3], a[4]), a[1])
  return v or false
end
`

// LuaReserve defines, with the table functions, reserve(dk, now, args) and reserved();
// the server's one-trip gate script includes it and passes ReserveArgs. See luaRecords.
const LuaReserve = LuaTable + luaRecords

// ReserveArgs are the arguments of reserve for idemKey, the request's fingerprint, the
// route's takeover time and the reserving request's id.
func (s *Store) ReserveArgs(idemKey, fp string, takeover time.Duration, requestID string) []any {
	return append([]any{field(idemKey), fp, s.PendingTTL.Milliseconds(), takeover.Milliseconds(), owner(requestID)},
		s.Table().Args()...)
}

// OutcomeOf reads reserve's result (see LuaReserve).
func OutcomeOf(res []any) (Outcome, *Stored) {
	o := Outcome(res[0].(int64))
	if o != Replay {
		return o, nil
	}
	rec, _ := res[1].(string)
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

// recordsLibrary holds the records' operations other than the gate's: complete, release,
// peek and forget, each called with KEYS = {DirKey} and ARGV = {now ms, its arguments}.
var recordsLibrary = redisfn.New("records", LuaReserve+`
local function complete_record(KEYS, ARGV) return complete(KEYS[1], ARGV[1], {unpack(ARGV, 2)}) end
local function release_record(KEYS, ARGV) return release(KEYS[1], ARGV[1], {unpack(ARGV, 2)}) end
local function peek_record(KEYS, ARGV) return peek(KEYS[1], ARGV[1], {unpack(ARGV, 2)}) end
local function forget_record(KEYS, ARGV) return forget(KEYS[1], ARGV[1], {unpack(ARGV, 2)}) end
`, "complete_record", "release_record", "peek_record", "forget_record")

func (s *Store) run(ctx context.Context, fn, keyID string, args ...any) *redis.Cmd {
	args = append(append([]any{s.Now().UnixMilli()}, args...), s.Table().Args()...)
	return recordsLibrary.Call(ctx, s.rdb, fn, []string{DirKey(keyID)}, args...)
}

// Complete stores the response of the reserved request for the replay window, in one
// script that an auto-pipelining client batches with other requests' commands. It does
// not check that the reservation is still the caller's: it is, unless it lapsed
// (PendingTTL, far longer than a request runs) or was taken over, and then the request
// it stores the answer of had the same effect as the taker's (the takeover contract),
// so either answer is the key's answer.
func (s *Store) Complete(ctx context.Context, keyID, idemKey, fp string, st Stored) error {
	return s.run(ctx, "complete_record", keyID, field(idemKey), doneRecord(fp, st)).Err()
}

// Release drops the reservation the request requestID made, when its request failed in
// a way a retry may fix (5xx), so that the retry runs. A reservation taken over by
// another request, or completed, stays.
func (s *Store) Release(ctx context.Context, keyID, idemKey, fp, requestID string) error {
	if requestID == "" {
		return fmt.Errorf("idempotency: release without a request id")
	}
	return s.run(ctx, "release_record", keyID, field(idemKey), fp, owner(requestID)).Err()
}

// Forget drops key id's records of idemKeys, in one pipeline (tools: the load generator
// cleans up after itself).
func (s *Store) Forget(ctx context.Context, keyID string, idemKeys ...string) error {
	keys := make([]string, len(idemKeys))
	args := make([][]any, len(idemKeys))
	now, table := s.Now().UnixMilli(), s.Table().Args()
	for i, k := range idemKeys {
		keys[i] = DirKey(keyID)
		args[i] = append([]any{now, field(k)}, table...)
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
	v, err := s.run(ctx, "peek_record", keyID, field(idemKey)).Text()
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
