package idempotency

// The records' operations in Lua (LuaRecords), and the function library that runs
// them (recordsLibrary); the record formats are in the package doc.

import "svc/lib/redisfn"

// LuaRecords defines, over LuaBuckets, the operations on records (a function library
// may combine it with code of its own: Store.PendingRecord): reserve, complete, release,
// forget and peek. Each takes the group's directory key dk and its ARGV: now (ms), the
// record's field, its arguments, then the table's life, every and skew (the last three).
// reserve_in(t, f, pv) and unreserve_in(t, f, pv) work over an open table, r_open(dk,
// now, life, every, skew) or r_table(dk, a), that several reservations of one group
// share; pv is the reservation's value, made by the caller (PendingRecord.Value).
const LuaRecords = `
local function r_open(dk, now, life, every, skew)
  return b_open(string.sub(dk, 1, -2), now, life, every, skew)
end

local function r_table(dk, a)
  local n = #a
  return r_open(dk, a[1], a[n - 2], a[n - 1], a[n])
end

local function r_large(t, f)
  return t.base .. 'a' .. b_hex(f)
end

-- reserve: a = {now, f, pv, ...}, pv the reservation to write ("P" fp owner lapse " "
-- takeover at: PendingRecord.Value). {0, bucket} proceed, the reservation made in that bucket
-- (also when it takes over an expired takeover time or a lapsed reservation); {0,
-- bucket, 1} proceed, the reservation being this very request's (owner and fingerprint):
-- a second run of the same call, as a client library retries a call whose reply was
-- lost, nothing written; {1, record} replay, {2} reuse, {3} in use: nothing written.
-- reserve_in is reserve over an open table t (r_open's handle), which a batch of one
-- group's reservations shares: the directory read once; it returns the values, not a
-- table of them.
local function reserve_in(t, f, pv)
  local v = b_get(t, f)
  if v then
    local kind, same = string.sub(v, 1, 1), string.sub(v, 2, 9) == string.sub(pv, 2, 9)
    if kind == 'P' then
      local lapse, was = string.match(v, '^(%d+) (%d+)$', 18)
      lapse, was = tonumber(lapse) or 0, tonumber(was) or 0
      if lapse > t.now then
        if not same then return 2 end
        if string.sub(v, 10, 17) == string.sub(pv, 10, 17) then return 0, t.key, 1 end
        if was == 0 or t.now < was then return 3 end
      end
    elseif not same then
      return 2
    elseif kind == 'D' then
      return 1, v
    else
      local big = redis.call('GET', r_large(t, f))
      if big then return 1, big end
    end
  end
  b_put(t, f, pv)
  return 0, t.key
end

local function reserve(dk, a) return {reserve_in(r_table(dk, a), a[2], a[3])} end

-- complete: a = {now, f, record, ...}: the record replaces whatever f holds (usually
-- the reservation, made moments before: one HSET).
local function complete(dk, a)
  local t, f, rec = r_table(dk, a), a[2], a[3]
  if #rec > 63 then
    redis.call('SET', r_large(t, f), rec, 'PXAT', b_expiry(t))
    rec = 'L' .. string.sub(rec, 2, 9)
  end
  b_set(t, f, rec)
  return 1
end

-- release: a = {now, f, fp, owner, ...}: drops the reservation fp and owner made.
-- release_in is release over an open table t (reserve_in's, in a batch).
local function release_in(t, f, fp, owner)
  local v = b_get(t, f)
  if v and string.sub(v, 1, 1 + 8 + 8) == 'P' .. fp .. owner then b_del(t, f) end
  return 1
end

local function release(dk, a) return release_in(r_table(dk, a), a[2], a[3], a[4]) end

-- unreserve_in drops the reservation reserve_in(t, f, pv) made (release with its
-- fingerprint and owner).
local function unreserve_in(t, f, pv) return release_in(t, f, string.sub(pv, 2, 9), string.sub(pv, 10, 17)) end

-- forget: a = {now, f, ...}: drops the record, whatever it holds.
local function forget(dk, a)
  local t, f = r_table(dk, a), a[2]
  local v = b_get(t, f)
  if v then
    b_del(t, f)
    if string.sub(v, 1, 1) == 'L' then redis.call('DEL', r_large(t, f)) end
  end
  return 1
end

-- peek: a = {now, f, ...}: the record, or false.
local function peek(dk, a)
  return b_get(r_table(dk, a), a[2]) or false
end
`

// recordsLibrary holds the records' operations, each called with KEYS = {the group's
// directory} and ARGV = {now ms, its arguments, Buckets.Args}.
var recordsLibrary = redisfn.New("records", LuaBuckets+LuaRecords+`
local function reserve_record(KEYS, ARGV) return reserve(KEYS[1], ARGV) end
local function complete_record(KEYS, ARGV) return complete(KEYS[1], ARGV) end
local function release_record(KEYS, ARGV) return release(KEYS[1], ARGV) end
local function peek_record(KEYS, ARGV) return peek(KEYS[1], ARGV) end
local function forget_record(KEYS, ARGV) return forget(KEYS[1], ARGV) end
`, "reserve_record", "complete_record", "release_record", "peek_record", "forget_record")
