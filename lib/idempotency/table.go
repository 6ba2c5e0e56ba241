package idempotency

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// Tables. Records that must outlive a window (an API key's answers, the consumer's batch
// claims) are kept as fields of small Redis hashes, not as keys of their own: a key
// costs Redis about 60 B before its value (key string, object header, dictionary and
// expiry entries), while a field of a hash in its compact listpack encoding costs its
// bytes plus two or three. A table is a family of such hashes under one base name:
//
//	<base>m               hash: epoch number -> "<level> <split> <count>" (the directory)
//	<base><epoch>:<shard> hash: field -> value, whole-hash expiry (the shards)
//
// Time is cut in epochs of Span; a field is written into the shards of the epoch of the
// time it is written, and every shard of epoch e expires at (e+1)·Span + Life + Skew, so
// a field lives at least Life + Skew after it was written (and at most Span longer).
// Lookups read the epochs that may hold a field written within Life + Skew (newest first;
// the directory names those that exist, so a table whose owner was quiet costs nothing).
//
// Within an epoch the shards grow by linear hashing, so that each stays under Redis's
// hash-max-listpack-entries (128 by default) however busy its owner: a field's shard is
// h mod 2^level, or h mod 2^(level+1) when that is below split, where h is the field's
// first four bytes (big-endian); when the epoch holds more than Load fields per shard,
// shard split is split into itself and split + 2^level (one HGETALL and two writes of
// about Load fields), and split moves on. Shards hold Load to 2·Load fields on average.
// The epoch's count of fields is an estimate: an added field counts CountStep when its
// fifth byte is a multiple of CountStep and writes the directory, any other writes nothing
// more than itself (fields of four bytes or less count 1 each). The splits need no more,
// and seven adds in eight are one HSET instead of two.
// Fields and values must stay within hash-max-listpack-value (64 B); the callers keep
// longer values elsewhere. A field's first five bytes must be uniformly distributed (a
// hash), and the rest of it distinguishes fields that share a shard.
//
// Every key of a table shares the base's hash tag, so scripts over a table work in one
// slot of a Redis Cluster.

// Table is a table's timing: how long a field must live, and how time is cut.
type Table struct {
	Life time.Duration // a field lives at least Life + Skew after it was written
	Span time.Duration // epoch length: a field lives at most Life + Skew + Span
	Skew time.Duration // clock difference between writers tolerated
}

// Args are the table's timing as the Lua table functions take it (ms): life, span, skew.
func (t Table) Args() []any {
	return []any{t.Life.Milliseconds(), t.Span.Milliseconds(), t.Skew.Milliseconds()}
}

// Epoch is the epoch of time at (Unix ms).
func (t Table) Epoch(at int64) int64 { return at / t.Span.Milliseconds() }

// ShardKey is the name of a shard (tests and tools).
func ShardKey(base string, epoch int64, shard int) string {
	return base + strconv.FormatInt(epoch, 10) + ":" + strconv.Itoa(shard)
}

// Drop deletes the table under base: the shards of every epoch its directory names, and
// the directory, in one UNLINK (they share base's hash tag). It returns how many keys
// went. For tools that discard a whole table (the load generator, the tables of the API
// keys it made); strings a caller keeps beside a table (a long idempotency answer) are
// not the table's, and Drop leaves them.
func Drop(ctx context.Context, rdb redis.Cmdable, base string) (int, error) {
	dir, err := rdb.HGetAll(ctx, base+"m").Result()
	if err != nil {
		return 0, err
	}
	keys := []string{base + "m"}
	for name, m := range dir {
		epoch, err := strconv.ParseInt(name, 10, 64)
		var level, split, n int
		if _, err2 := fmt.Sscanf(m, "%d %d %d", &level, &split, &n); err != nil || err2 != nil {
			return 0, fmt.Errorf("table %s: directory entry %q = %q", base, name, m)
		}
		for s := 0; s < 1<<level+split; s++ {
			keys = append(keys, ShardKey(base, epoch, s))
		}
	}
	gone, err := rdb.Unlink(ctx, keys...).Result()
	return int(gone), err
}

// Load is the fields per shard at which an epoch's table splits a shard.
const Load = 48

// CountStep: one added field in CountStep, by its fifth byte, updates the epoch's count
// (by CountStep).
const CountStep = 8

// MaxValue is the longest field or value a shard holds in the listpack encoding
// (Redis's default hash-max-listpack-value).
const MaxValue = 64

// LuaTable defines the Lua table functions (see Table). A table handle is
// t_open(base, now, life, span, skew) (times in ms); then
//
//	t_find(t, f[, skip]) -> value, shard key, epoch, cur (value nil when absent): the
//	                        newest epoch holding f, but not epoch skip; cur is the
//	                        current epoch's directory entry (false: none) for t_put
//	t_put(t, f, v[, cur]) -> shard key, epoch, added, dir: sets f in the current epoch's
//	                        table; dir is the epoch's directory entry when it wrote it
//	t_del(t, key, en, f)    deletes f from shard key of epoch en (as t_find or t_put named)
//	t_expiry(t, e)       -> when epoch e's shards expire (ms)
//
// A caller that moves a field to the current epoch deletes it where it was found, so a
// field is in at most one epoch. A shard gets its expiry when it is made: shard 0 with
// its epoch, the others when they split off; one that would be left empty keeps a
// placeholder field "" so that Redis does not drop it (and its expiry) and make it anew
// without one.
const LuaTable = `
local T_LOAD = 48
local T_STEP = 8

local function t_open(base, now, life, span, skew)
  return {base = base, now = tonumber(now), life = tonumber(life), span = tonumber(span), skew = tonumber(skew)}
end

local function t_hash(f)
  local a, b, c, d = string.byte(f, 1, 4)
  return ((a * 256 + b) * 256 + c) * 256 + d
end

local function t_dir(m)
  local l, s, n = string.match(m, '^(%d+) (%d+) (%d+)$')
  return tonumber(l), tonumber(s), tonumber(n)
end

local function t_shard(h, level, split)
  local s = h % (2 ^ level)
  if s < split then s = h % (2 ^ (level + 1)) end
  return string.format('%d', s)
end

local function t_expiry(t, e)
  return (e + 1) * t.span + t.life + t.skew
end

local function t_find(t, f, skip)
  local cur = math.floor(t.now / t.span)
  local hi = math.floor((t.now + t.skew) / t.span)
  local lo = math.floor((t.now - t.life - t.skew) / t.span)
  local names = {}
  for e = hi, lo, -1 do names[#names + 1] = string.format('%d', e) end
  local dirs = redis.call('HMGET', t.base .. 'm', unpack(names))
  local h, mcur = t_hash(f), dirs[hi - cur + 1]
  for i, m in ipairs(dirs) do
    if m and names[i] ~= skip then
      local level, split = t_dir(m)
      local key = t.base .. names[i] .. ':' .. t_shard(h, level, split)
      local v = redis.call('HGET', key, f)
      if v then return v, key, names[i], mcur end
    end
  end
  return nil, nil, nil, mcur
end

local function t_keep(key, at)
  redis.call('HSET', key, '', '')
  redis.call('PEXPIREAT', key, at)
end

local function t_split(t, en, level, split, at)
  local from = t.base .. en .. ':' .. string.format('%d', split)
  local to = t.base .. en .. ':' .. string.format('%d', split + 2 ^ level)
  local all = redis.call('HGETALL', from)
  local size = 2 ^ (level + 1)
  local moved, gone = {}, {}
  for i = 1, #all, 2 do
    if #all[i] >= 4 and t_hash(all[i]) % size ~= split then
      moved[#moved + 1] = all[i]
      moved[#moved + 1] = all[i + 1]
      gone[#gone + 1] = all[i]
    end
  end
  if #gone > 0 then
    redis.call('HSET', to, unpack(moved))
    redis.call('PEXPIREAT', to, at)
    if #gone * 2 == #all then t_keep(from, at) end
    redis.call('HDEL', from, unpack(gone))
  end
  split = split + 1
  if split == 2 ^ level then level, split = level + 1, 0 end
  return level, split
end

local function t_newepoch(t, dk, at)
  local lo = math.floor((t.now - t.life - t.skew) / t.span)
  for _, name in ipairs(redis.call('HKEYS', dk)) do
    if tonumber(name) < lo then redis.call('HDEL', dk, name) end
  end
  if redis.call('PEXPIRETIME', dk) < at then redis.call('PEXPIREAT', dk, at) end
end

local function t_put(t, f, v, m)
  local e = math.floor(t.now / t.span)
  local en = string.format('%d', e)
  local dk = t.base .. 'm'
  local at = t_expiry(t, e)
  if m == nil then m = redis.call('HGET', dk, en) end
  local level, split, n = 0, 0, 0
  if m then level, split, n = t_dir(m) end
  local key = t.base .. en .. ':' .. t_shard(t_hash(f), level, split)
  local added = redis.call('HSET', key, f, v) == 1
  if added then
    local step = 1
    if m then
      local b = string.byte(f, 5)
      if b then
        if b % T_STEP ~= 0 then return key, en, added end
        step = T_STEP
      end
    end
    if not m then redis.call('PEXPIREAT', key, at) end
    n = n + step
    if n > T_LOAD * (2 ^ level + split) then
      level, split = t_split(t, en, level, split, at)
      key = t.base .. en .. ':' .. t_shard(t_hash(f), level, split)
    end
    local nm = string.format('%d %d %d', level, split, n)
    redis.call('HSET', dk, en, nm)
    if not m then t_newepoch(t, dk, at) end
    return key, en, added, nm
  end
  return key, en, added
end

local function t_del(t, key, en, f)
  redis.call('HDEL', key, f)
  if redis.call('EXISTS', key) == 0 then t_keep(key, t_expiry(t, tonumber(en))) end
end

local function t_hex(s)
  return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end))
end
`
