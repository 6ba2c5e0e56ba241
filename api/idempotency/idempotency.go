// Package idempotency makes writes repeatable: the first request with an Idempotency-Key
// reserves it, its response is stored for 24 hours, and a repeat with the same key,
// method, path and body gets that response back byte for byte. The same key with a
// different request is idempotency_key_reuse; a repeat while the first still runs is
// idempotency_key_in_use. Records are per API key, in Redis:
//
//	svc:idem2:{<key id>}:<idempotency key>  string, one of
//	  "P" <fingerprint> " " <takeover at, Unix ms; 0: never> " " <owner request id>   reserved
//	  "D" <fingerprint> <status, 3 digits> <content type> "\n" <body>   done
//
// A reservation lasts until its request completes (Complete), fails retryably (Release),
// or its process dies: then it lapses after PendingTTL (60 s). A route that declares a
// takeover time (api.Route.TakeoverAfter) lets an identical repeat take over a
// reservation once that time has passed since it was made: the repeat runs as a first
// request would, under a reservation of its own. The contract a route makes by declaring
// it: (1) running the request twice has the effect of running it once, and (2) by that
// time the first run has answered its client (or its process is dead). POST /events
// keeps it: both runs produce the same batch under the same batch id, and the consumer
// stores one copy (ingest/README.md argues it); its first run answers within the delivery
// timeout. A repeat with a different body still gets idempotency_key_reuse, pending or
// not, because a takeover needs the same fingerprint. The owner (the reserving request's
// id) keeps a late Release of the first run from dropping the taker's reservation.
// (Records reserved before takeover existed, "P" <fingerprint> alone, are never taken
// over.)
//
// One string rather than a hash: reserving is one SET NX GET, completing one plain SET
// with its expiry (no script), and a record takes about half the memory (MEMORY USAGE of
// a 202 with one rejection: 720 B as a hash, 376 B as a string). (The earlier
// hash records lived under svc:idem:; they expire within 24 hours, and a retry that
// misses one is caught by the consumer's batch-id claim.) The hash tag {<key id>} is the
// one of the key's rate-limit windows (limits.Keys): the gate script reserves a record
// and takes from the windows in one hash slot of a Redis Cluster. A key's records thus
// live on one master; the key's daily quota bounds how many there are.
package idempotency

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
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
	// TTL is how long a finished response is kept (24 h).
	TTL time.Duration
	// PendingTTL bounds a reservation whose process died before finishing (60 s): after
	// it, the request may run again.
	PendingTTL time.Duration
}

// New returns a Store with the default TTLs.
func New(rdb redis.Cmdable) *Store {
	return &Store{rdb: rdb, TTL: 24 * time.Hour, PendingTTL: time.Minute}
}

// MaxKeyLen is the longest Idempotency-Key accepted.
const MaxKeyLen = 255

// Fingerprint identifies a request: its method, path and body.
func Fingerprint(method, path string, body []byte) string {
	h := sha256.New()
	h.Write([]byte(method))
	h.Write([]byte{0})
	h.Write([]byte(path))
	h.Write([]byte{0})
	h.Write(body)
	return hex.EncodeToString(h.Sum(nil))
}

func recordKey(keyID, idemKey string) string { return KeyPrefix(keyID) + idemKey }

// KeyPrefix is the common prefix of key id's records (for tools that drop them).
func KeyPrefix(keyID string) string { return "svc:idem2:{" + keyID + "}:" }

// LuaReserve defines the Lua function reserve(k, fp, pending_ms, now_ms, takeover_ms,
// owner) over the record key k: {0} reserved (proceed; also when it took over an expired
// takeover time), {1, record} replay, {2} reuse, {3} in use. takeover_ms 0 means the
// reservation is never taken over. The server's one-trip gate script includes it.
const LuaReserve = `
local function reserve(k, fp, pending, now, takeover, owner)
  local at = 0
  if takeover > 0 then at = now + takeover end
  local mine = 'P' .. fp .. ' ' .. string.format('%d', at) .. ' ' .. owner
  local v = redis.call('SET', k, mine, 'NX', 'PX', pending, 'GET')
  if not v then return {0} end
  if string.sub(v, 2, 1 + #fp) ~= fp then return {2} end
  if string.sub(v, 1, 1) == 'P' then
    local was = tonumber(string.match(string.sub(v, 2 + #fp), '^ (%d+) '))
    if was and was > 0 and now >= was then
      redis.call('SET', k, mine, 'PX', pending)
      return {0}
    end
    return {3}
  end
  return {1, v}
end
`

// RecordKey is the Redis key of key id's record for idemKey.
func RecordKey(keyID, idemKey string) string { return recordKey(keyID, idemKey) }

// OutcomeOf reads reserve's result (see LuaReserve).
func OutcomeOf(res []any) (Outcome, *Stored) {
	o := Outcome(res[0].(int64))
	if o != Replay {
		return o, nil
	}
	rec, _ := res[1].(string)
	st, ok := parseDone(rec)
	if !ok {
		return InUse, nil // a record this version cannot read: the client retries later
	}
	return Replay, st
}

// fpLen is the length of a Fingerprint (hex SHA-256).
const fpLen = 2 * sha256.Size

// doneRecord is the record of a finished request: "D" fp status(3 digits) ctype "\n"
// body. A content type cannot hold a newline (HTTP forbids it in header values).
func doneRecord(fp string, st Stored) []byte {
	b := make([]byte, 0, 1+len(fp)+3+len(st.ContentType)+1+len(st.Body))
	b = append(b, 'D')
	b = append(b, fp...)
	b = append(b, byte('0'+st.Status/100%10), byte('0'+st.Status/10%10), byte('0'+st.Status%10))
	b = append(b, st.ContentType...)
	b = append(b, '\n')
	return append(b, st.Body...)
}

// parseDone reads a doneRecord.
func parseDone(rec string) (*Stored, bool) {
	const head = 1 + fpLen + 3
	if len(rec) < head+1 || rec[0] != 'D' {
		return nil, false
	}
	st := &Stored{}
	for _, c := range rec[1+fpLen : head] {
		if c < '0' || c > '9' {
			return nil, false
		}
		st.Status = st.Status*10 + int(c-'0')
	}
	nl := strings.IndexByte(rec[head:], '\n')
	if nl < 0 {
		return nil, false
	}
	st.ContentType = rec[head : head+nl]
	st.Body = []byte(rec[head+nl+1:])
	return st, true
}

// Complete stores the response of the reserved request with its 24-hour expiry, in one
// plain SET that an auto-pipelining client batches with other requests' commands. It
// does not check that the reservation is still the caller's: it is, unless it lapsed
// (PendingTTL, far longer than a request runs) or was taken over, and then the request
// it stores the answer of had the same effect as the taker's (the takeover contract),
// so either answer is the key's answer.
func (s *Store) Complete(ctx context.Context, keyID, idemKey, fp string, st Stored) error {
	return s.rdb.Set(ctx, recordKey(keyID, idemKey), doneRecord(fp, st), s.TTL).Err()
}

var releaseScript = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
local head, tail = 'P' .. ARGV[1] .. ' ', ' ' .. ARGV[2]
if v and string.sub(v, 1, #head) == head and string.sub(v, -#tail) == tail then
  redis.call('DEL', KEYS[1])
end
return 1
`)

// Release drops the reservation owner (the reserving request's id) made, when its request
// failed in a way a retry may fix (5xx), so that the retry runs. A reservation taken over
// by another request, or completed, stays.
func (s *Store) Release(ctx context.Context, keyID, idemKey, fp, owner string) error {
	if owner == "" || strings.ContainsRune(owner, ' ') {
		return fmt.Errorf("idempotency: release by owner %q: want a request id", owner)
	}
	return releaseScript.Run(ctx, s.rdb, []string{recordKey(keyID, idemKey)}, fp, owner).Err()
}
