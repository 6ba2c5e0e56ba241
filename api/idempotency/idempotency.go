// Package idempotency makes writes repeatable: the first request with an Idempotency-Key
// reserves it, its response is stored for 24 hours, and a repeat with the same key,
// method, path and body gets that response back byte for byte. The same key with a
// different request is idempotency_key_reuse; a repeat while the first still runs is
// idempotency_key_in_use. Records are per API key, in Redis:
//
//	svc:idem:<key id>:<idempotency key>  hash {fp, state, status, ctype, body}
package idempotency

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"time"

	"github.com/redis/go-redis/v9"
)

// Outcome of Reserve.
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

func recordKey(keyID, idemKey string) string { return "svc:idem:" + keyID + ":" + idemKey }

// LuaReserve defines the Lua function reserve(k, fp, pending_ms) over the record key
// k: {0} reserved (proceed), {1, status, ctype, body} replay, {2} reuse, {3} in use.
// Other scripts (the server's one-trip gate) include it.
const LuaReserve = `
local function reserve(k, fp, pending)
  local v = redis.call('HMGET', k, 'fp', 'state', 'status', 'ctype', 'body')
  if not v[1] then
    redis.call('HSET', k, 'fp', fp, 'state', 'pending')
    redis.call('PEXPIRE', k, pending)
    return {0}
  end
  if v[1] ~= fp then return {2} end
  if v[2] == 'pending' then return {3} end
  return {1, v[3], v[4], v[5]}
end
`

var reserveScript = redis.NewScript(LuaReserve + `
return reserve(KEYS[1], ARGV[1], ARGV[2])
`)

// Reserve claims idemKey for the request fp, or says why it cannot run.
func (s *Store) Reserve(ctx context.Context, keyID, idemKey, fp string) (Outcome, *Stored, error) {
	res, err := reserveScript.Run(ctx, s.rdb, []string{recordKey(keyID, idemKey)}, fp, s.PendingTTL.Milliseconds()).Slice()
	if err != nil {
		return 0, nil, err
	}
	o, st := OutcomeOf(res)
	return o, st, nil
}

// RecordKey is the Redis key of key id's record for idemKey.
func RecordKey(keyID, idemKey string) string { return recordKey(keyID, idemKey) }

// OutcomeOf reads reserve's result (see LuaReserve).
func OutcomeOf(res []any) (Outcome, *Stored) {
	o := Outcome(res[0].(int64))
	if o != Replay {
		return o, nil
	}
	st := &Stored{}
	if v, ok := res[1].(string); ok {
		for _, c := range v {
			st.Status = st.Status*10 + int(c-'0')
		}
	}
	st.ContentType, _ = res[2].(string)
	b, _ := res[3].(string)
	st.Body = []byte(b)
	return Replay, st
}

var completeScript = redis.NewScript(`
redis.call('HSET', KEYS[1], 'fp', ARGV[1], 'state', 'done', 'status', ARGV[2], 'ctype', ARGV[3], 'body', ARGV[4])
redis.call('PEXPIRE', KEYS[1], ARGV[5])
return 1
`)

// Complete stores the response of the reserved request, and trusts that the
// reservation is the caller's: a reservation lapses only after PendingTTL, far longer
// than a request runs. It is one command (a script, so that the record and its 24-hour
// expiry land together), which an auto-pipelining client batches with other requests'.
func (s *Store) Complete(ctx context.Context, keyID, idemKey, fp string, st Stored) error {
	return completeScript.Run(ctx, s.rdb, []string{recordKey(keyID, idemKey)},
		fp, st.Status, st.ContentType, st.Body, s.TTL.Milliseconds()).Err()
}

var releaseScript = redis.NewScript(`
local v = redis.call('HMGET', KEYS[1], 'fp', 'state')
if v[1] == ARGV[1] and v[2] == 'pending' then redis.call('DEL', KEYS[1]) end
return 1
`)

// Release drops a reservation whose request failed in a way a retry may fix (5xx), so
// that the retry runs.
func (s *Store) Release(ctx context.Context, keyID, idemKey, fp string) error {
	return releaseScript.Run(ctx, s.rdb, []string{recordKey(keyID, idemKey)}, fp).Err()
}
