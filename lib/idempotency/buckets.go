package idempotency

import (
	"fmt"
	"time"
)

// Buckets. A bucket table keeps records that must each live at least Life after their
// last write (the idempotency records, the consumer's batch claims) as fields of small
// Redis hashes, like Table, but finds one in one read whatever its age: a record's
// bucket depends on its field only, not on when it was written, and expired records are
// swept out of a bucket instead of expiring with an epoch's hashes.
//
//	<base>d    string "<level> <split> <count>": the directory (linear hashing), absent:
//	           "0 0 0"
//	<base><n>  hash: field -> <written at: 1 byte, the Unix quarter hour mod 256> value, and
//	           "" -> when the bucket was last swept (Unix ms)
//
// A field's bucket is h mod 2^level, or h mod 2^(level+1) when that is below split, where
// h is the field's first four bytes (big-endian): one GET of the directory and one HMGET
// of the bucket (the field and its sweep time) find it. A write that finds the bucket
// last swept more than Every ago (or never: a new bucket) sweeps it: one HGETALL, an HDEL
// of the fields written more than Life + Skew ago, and a new expiry for the bucket and
// the directory, now + Every + Life + Skew + SweepMargin. Every write to a bucket comes
// at most Every + SweepMargin after its last sweep (a write that does not read the sweep
// time, Complete, follows a reservation that did by less than SweepMargin), so no record
// expires with its bucket before Life + Skew; a record lives at most about Life + Skew +
// Every + 30 min (its write time is kept in quarter hours). A sweep costs about one HGETALL of the bucket, once per Every per bucket,
// while the bucket takes about its size × Every / Life writes in that time.
//
// Buckets grow by linear hashing as in Table: the directory also holds an estimate of the
// table's fields ("<level> <split> <count>"; an added field counts CountStep when its
// fifth byte is a multiple of CountStep, and then writes the directory; deleting such a
// field takes it off again, and a sweep takes off what it deleted), and when it passes Load per bucket, bucket split is split into
// itself and split + 2^level (one HGETALL and two writes). Buckets average Load to 2·Load
// fields, under Redis's hash-max-listpack-entries (128). Buckets never merge: one the
// sweeps emptied keeps its sweep time and expiry, and costs its key. Every key of a table
// shares the base's hash tag. Fields are at least 5 bytes, their first five uniformly
// distributed (a hash); fields and values within MaxValue - 1 bytes. The write time wraps
// every 64 h, longer than a record can wait for its sweep; a sweep keeps a record written
// up to StampAhead quarter hours after its own clock's (a writer's clock ahead within the
// Skew, across a quarter-hour boundary: a stored answer's HSET, a claim), so records live
// under 62 h.
type Buckets struct {
	Life  time.Duration // a record lives at least Life + Skew after its last write
	Every time.Duration // a bucket is swept at most this often
	Skew  time.Duration // clock difference between writers tolerated
}

// Args are the table's timing as LuaBuckets' b_open takes it (ms): life, every, skew.
func (b Buckets) Args() []any {
	return []any{b.Life.Milliseconds(), b.Every.Milliseconds(), b.Skew.Milliseconds()}
}

// BucketKey is the name of bucket n of the table under base (tests and tools).
func BucketKey(base string, n int) string { return fmt.Sprintf("%s%d", base, n) }

// StampAhead is how many quarter hours a record's write time may be ahead of a
// sweeping writer's clock and still count as fresh (LuaBuckets' B_AHEAD).
const StampAhead = 8

// SweepMargin bounds the time between a reservation and the write that completes it.
const SweepMargin = 10 * time.Minute

// LuaBuckets defines the Lua functions of a bucket table (see Buckets). A handle is
// b_open(base, now, life, every, skew) (times in ms); then
//
//	b_get(b, f)    -> f's value (its stamp removed) or nil; remembers f's bucket
//	b_put(b, f, v) -> added: sets f (after b_get(b, f)), sweeps and splits as due
//	b_set(b, f, v) -> added: sets f without reading it first, for a write that comes
//	                  less than SweepMargin after a b_get of f (it reads the bucket's
//	                  sweep time only when f was absent)
//	b_del(b, f)       deletes f (after b_get(b, f))
//	b_hex(s)       -> s in hex
const LuaBuckets = `
local B_LOAD = 48
local B_STEP = 8
local B_MARGIN = 600000
local B_AHEAD = 8

-- The handle names every field it will hold (false: not read yet), so that Lua sizes
-- its table once instead of growing it field by field within the call. Its times are
-- integers (ms) as numbers or as the digits a caller sent: arithmetic converts each once
-- (x + 0), where tonumber parses a string twice (Lua 5.1).
local function b_open(base, now, life, every, skew)
  return {base = base, now = now + 0, life = life + 0, every = every + 0, skew = skew + 0,
    dir = false, level = false, split = 0, count = 0, key = false, swept = false}
end

local function b_hash(f)
  local a, b, c, d = string.byte(f, 1, 4)
  return ((a * 256 + b) * 256 + c) * 256 + d
end

-- b_dir(v) is the directory value v's {level, split, count} (B_DIR0, {0, 0, 0}, for
-- false or a value of another shape), kept in B_DIRS for the library's later calls: a
-- pure function of v's text, in at most B_DIRS_MAX entries (then B_DIRS starts again,
-- empty), so no call sees another's effects. b_remember(v, d) enters a value b_setdir
-- wrote. (An EVAL script keeps nothing from one call to the next.)
local B_DIRS_MAX = 1024
local B_DIRS, B_DIRN, B_DIR0 = {}, 0, {0, 0, 0}
local function b_remember(v, d)
  if B_DIRN >= B_DIRS_MAX then B_DIRS, B_DIRN = {}, 0 end
  B_DIRS[v], B_DIRN = d, B_DIRN + 1
  return d
end
local function b_dir(v)
  if not v then return B_DIR0 end
  local d = B_DIRS[v]
  if d then return d end
  local l, s, n = string.match(v, '^(%d+) (%d+) (%d+)$')
  if not l then return B_DIR0 end
  -- digits: arithmetic converts each once, where tonumber parses it twice
  return b_remember(v, {l + 0, s + 0, n + 0})
end
-- b_load gives the handle its directory's value v (GET <base>d: false when absent);
-- b_locate reads it on first use unless a caller that read several at once (MGET) gave it.
-- A value's numbers are kept in B_DIRS (b_dir), filled by the parse of a value read and
-- by b_setdir's writes, so that a directory is parsed about once per value the library
-- writes, not once per call that reads it.
local function b_load(b, v)
  b.dir = v
  local d = b_dir(v)
  b.level, b.split, b.count = d[1], d[2], d[3]
end

-- b_num(n) is the integer n's decimal text; below B_NUMS (a bucket's number, a
-- directory's level and split) it is formatted once (a number's text is Lua's sprintf)
-- and kept in B_NUM for the library's later calls: at most B_NUMS short strings of the
-- library's Lua memory, the same whatever the calls, so no call sees another's effects.
local B_NUMS = 1024
local B_NUM = {}

local function b_num(n)
  local s = B_NUM[n]
  if not s then
    s = string.format('%d', n)
    if n < B_NUMS then B_NUM[n] = s end
  end
  return s
end

local function b_locate(b, f)
  if not b.level then b_load(b, redis.call('GET', b.base .. 'd')) end
  local h = b_hash(f)
  local n = h % (2 ^ b.level)
  if n < b.split then n = h % (2 ^ (b.level + 1)) end
  return b.base .. b_num(n)
end

local function b_get(b, f)
  local key = b_locate(b, f)
  local r = redis.call('HMGET', key, f, '')
  b.key, b.swept = key, r[2]
  if r[1] then return string.sub(r[1], 2) end
  return nil
end

-- b_each runs cmd on key with the items of list, at most 400 at a time (Lua's unpack
-- has a limit).
local function b_each(cmd, key, list, head)
  for i = 1, #list, 400 do
    if head then
      redis.call(cmd, key, head[1], head[2], unpack(list, i, math.min(#list, i + 399)))
      head = nil
    else
      redis.call(cmd, key, unpack(list, i, math.min(#list, i + 399)))
    end
  end
end

local function b_stamp(now)
  return string.char(math.floor(now / 900000) % 256)
end

local function b_expiry(b)
  return string.format('%d', b.now + b.every + b.life + b.skew + B_MARGIN)
end

local function b_setdir(b)
  local n = math.max(0, b.count)
  local v = b_num(b.level) .. ' ' .. b_num(b.split) .. ' ' .. b_num(n)
  b_remember(v, {b.level, b.split, n})
  if b.dir then
    redis.call('SET', b.base .. 'd', v, 'KEEPTTL')
  else
    redis.call('SET', b.base .. 'd', v, 'PXAT', b_expiry(b))
  end
  b.dir = v
end

local function b_keep(b, key)
  local at = b_expiry(b)
  redis.call('HSET', key, '', string.format('%d', b.now))
  redis.call('PEXPIREAT', key, at)
  if b.dir then redis.call('PEXPIREAT', b.base .. 'd', at, 'GT') else b_setdir(b) end
end

local function b_sweep(b, key)
  local all = redis.call('HGETALL', key)
  local q = math.floor(b.now / 900000)
  local keep = math.ceil((b.life + b.skew) / 900000) + 1
  local gone = {}
  for i = 1, #all, 2 do
    if all[i] ~= '' then
      local age = (q - (string.byte(all[i + 1], 1) or q)) % 256
      if age > keep and age < 256 - B_AHEAD then gone[#gone + 1] = all[i] end
    end
  end
  if #gone > 0 then
    b_each('HDEL', key, gone)
    b.count = b.count - #gone
    if b.dir then b_setdir(b) end
  end
  b_keep(b, key)
end

local function b_split(b)
  local size = 2 ^ b.level
  local from = b.base .. b.split
  local to = b.base .. (b.split + size)
  local all = redis.call('HGETALL', from)
  local moved, gone, swept = {}, {}, nil
  for i = 1, #all, 2 do
    local f = all[i]
    if f == '' then
      swept = all[i + 1]
    elseif b_hash(f) % (2 * size) ~= b.split then
      moved[#moved + 1] = f
      moved[#moved + 1] = all[i + 1]
      gone[#gone + 1] = f
    end
  end
  if #gone > 0 then
    b_each('HSET', to, moved, {'', swept or string.format('%d', b.now)})
    local at = redis.call('PEXPIRETIME', from)
    if at <= 0 then at = b_expiry(b) end
    redis.call('PEXPIREAT', to, at)
    b_each('HDEL', from, gone)
  end
  b.split = b.split + 1
  if b.split == size then b.level, b.split = b.level + 1, 0 end
end

-- b.swept is the sweep time's text as Redis returned it (or a number): the subtraction
-- converts it, once, where tonumber would parse it twice (Lua 5.1).
local function b_after(b, f, key, added)
  if not b.swept or b.now - b.swept > b.every then
    b_sweep(b, key)
    b.swept = b.now
  end
  if added and string.byte(f, 5) % B_STEP == 0 then
    b.count = b.count + B_STEP
    if b.count > B_LOAD * (2 ^ b.level + b.split) then b_split(b) end
    b_setdir(b)
  end
  return added
end

local function b_put(b, f, v)
  local key = b.key
  return b_after(b, f, key, redis.call('HSET', key, f, b_stamp(b.now) .. v) == 1)
end

local function b_set(b, f, v)
  local key = b_locate(b, f)
  b.key = key
  if redis.call('HSET', key, f, b_stamp(b.now) .. v) == 0 then return false end
  b.swept = redis.call('HGET', key, '')
  return b_after(b, f, key, true)
end

local function b_del(b, f)
  if redis.call('HDEL', b.key, f) == 1 and b.dir and string.byte(f, 5) % B_STEP == 0 then
    b.count = b.count - B_STEP
    b_setdir(b)
  end
end

local function b_hex(s)
  return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end))
end
`
