package rollup

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math/bits"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kgo"

	"svc/lib/idempotency"
	"svc/lib/process"
	"svc/lib/redisfn"
	"svc/schema"
	"svc/schema/rejection"
)

// Client event ids (DESIGN.md, "Exactly once", 4). An event that carried a client
// event_id (schema.UUID.FromClient) is claimed, per pixel, for the first record that
// holds it: its position (partition, offset, index in the batch) and the time the edge
// accepted it. A later copy of the same (pixel, event_id) accepted less than the window
// (SVC_EVENT_ID_WINDOW) after the claimed one is dropped before the INSERT and counted;
// the claiming record's own redelivery (a consumer killed or rebalanced before its
// INSERT landed) finds its own position and is stored. A copy accepted at or past the
// window is stored and claims the event afresh.
//
// All copies of a pixel's events go to one partition (the record key is the pixel), so
// "first" is the partition's order, which one consumer at a time follows.
//
// Claims are fields of tables (idempotency.Table), as the batch claims are: 256 groups
// per database and topic, each a table under the hash tag {<db>:<topic>:<byte, hex>}
// spread over a Redis Cluster's masters. The field is 10 bytes of pixel XOR event id (the
// id is a SHA-256 of the client's string, so the bytes are uniform; the version and
// variant bytes are left out; one more byte picks the group: 88 bits in all), the value
// the acceptance time (4 bytes, Unix seconds) and the position (uvarints). A poll's
// claims go in one pipeline of FCALLs, each carrying up to claimChunk claims of one
// group packed into one argument.

// eventIDLagMargin: a claim lives the window plus this much, so that a copy accepted
// within the window still finds it when it is consumed up to an hour later than the
// first copy was (the same margin as the batch claims').
const eventIDLagMargin = time.Hour

// claimChunk is the most claims one FCALL carries: Redis runs nothing else while a
// function runs, so each call stays short (about 64 × 3 µs).
const claimChunk = 64

// eventClaimSpan is the epoch of the event claims' tables. It does not depend on the
// window: epochs are numbered by it, so a window changed between runs still finds the
// claims made before.
const eventClaimSpan = 12 * time.Hour

// callsPerPipeline bounds the calls of one pipeline of claims.
const callsPerPipeline = 256

// eventClaimTable is the timing of event-id claims for window: a claim lives at least
// window + eventIDLagMargin + 1 min, at most one epoch longer.
func eventClaimTable(window time.Duration) idempotency.Table {
	return idempotency.Table{Life: window + eventIDLagMargin, Span: eventClaimSpan, Skew: time.Minute}
}

// eventKey is the claim of event id of pixel: its field (10 bytes) and group.
func eventKey(pixel, id schema.UUID) (field [10]byte, group byte) {
	var x [14]byte
	j := 0
	for i := range id {
		if i != 6 && i != 8 { // version and variant: fixed bits
			x[j] = pixel[i] ^ id[i]
			j++
		}
	}
	copy(field[:], x[:10])
	return field, x[10]
}

// eventClaimDir is the directory key of group g's table for topic in database db.
func eventClaimDir(db, topic string, g byte) string {
	return "svc:eid:{" + db + ":" + topic + ":" + hex.EncodeToString([]byte{g}) + "}:m"
}

// appendEventClaim appends one packed claim: field, the value's length, the value
// (acceptance time in Unix seconds, 4 bytes; partition; offset × 64 + index).
func appendEventClaim(dst []byte, field [10]byte, received int64, p int32, o int64, idx uint8) []byte {
	dst = append(dst, field[:]...)
	at := len(dst)
	dst = append(dst, 0)
	dst = binary.BigEndian.AppendUint32(dst, uint32(max(received/1000, 0)))
	dst = binary.AppendUvarint(dst, uint64(p))
	dst = binary.AppendUvarint(dst, uint64(o)<<6|uint64(idx))
	dst[at] = byte(len(dst) - at - 1)
	return dst
}

// eventClaimLibrary holds the event claims' functions, called with KEYS = {the group's
// directory key}:
//   - claim_events: ARGV now ms, table args (3), window s, packed claims. Returns one
//     character per claim: "1" when another copy holds the event within the window
//     (this one is a duplicate), "0" when this one holds it (claimed now, or already).
//   - forget_events: ARGV now ms, table args (3), packed fields (10 bytes each). Drops
//     the claims.
var eventClaimLibrary = redisfn.New("eventclaims", idempotency.LuaTable+`
local function e_sec(v)
  local a, b, c, d = string.byte(v, 1, 4)
  return ((a * 256 + b) * 256 + c) * 256 + d
end
local function e_parse(d, i)
  if d.raw[i] then
    d.level[i], d.split[i] = t_dir(d.raw[i])
  else
    d.level[i] = false
  end
end
-- e_dirs reads the directory entries of the epochs a lookup at t.now reads, newest
-- first, once per call: names, parsed levels and splits (false: no such epoch), and
-- the index of the current epoch.
local function e_dirs(t)
  local cur = math.floor(t.now / t.span)
  local hi = math.floor((t.now + t.skew) / t.span)
  local lo = math.floor((t.now - t.life - t.skew) / t.span)
  local names = {}
  for e = hi, lo, -1 do names[#names + 1] = string.format('%d', e) end
  local raw = redis.call('HMGET', t.base .. 'm', unpack(names))
  local d = {names = names, raw = raw, level = {}, split = {}, ci = hi - cur + 1}
  for i = 1, #names do e_parse(d, i) end
  return d
end
local function claim_events(KEYS, ARGV)
  local t = t_open(string.sub(KEYS[1], 1, -2), ARGV[1], ARGV[2], ARGV[3], ARGV[4])
  local window, packed = tonumber(ARGV[5]), ARGV[6]
  local d = e_dirs(t)
  local out, pos, n = {}, 1, #packed
  while pos <= n do
    local f = string.sub(packed, pos, pos + 9)
    local vl = string.byte(packed, pos + 10)
    local v = string.sub(packed, pos + 11, pos + 10 + vl)
    pos = pos + 11 + vl
    local h, held, key, en = t_hash(f)
    for i = 1, #d.names do
      if d.level[i] then
        local k = t.base .. d.names[i] .. ':' .. t_shard(h, d.level[i], d.split[i])
        held = redis.call('HGET', k, f)
        if held then key, en = k, d.names[i]; break end
      end
    end
    if held == v then
      out[#out + 1] = '0'
    elseif held and e_sec(v) - e_sec(held) < window then
      out[#out + 1] = '1'
    else
      if held then t_del(t, key, en, f) end
      local _, _, _, nm = t_put(t, f, v, d.raw[d.ci])
      if nm then d.raw[d.ci] = nm; e_parse(d, d.ci) end
      out[#out + 1] = '0'
    end
  end
  return table.concat(out)
end
local function forget_events(KEYS, ARGV)
  local t = t_open(string.sub(KEYS[1], 1, -2), ARGV[1], ARGV[2], ARGV[3], ARGV[4])
  local packed = ARGV[5]
  for pos = 1, #packed, 10 do
    local f = string.sub(packed, pos, pos + 9)
    local v, key, en = t_find(t, f)
    if v then t_del(t, key, en, f) end
  end
  return 1
end
`, "claim_events", "forget_events")

// eventClaims is the consumer's state for claiming client event ids: buffers reused
// from poll to poll.
type eventClaims struct {
	table  idempotency.Table
	window int64 // seconds
	scan   schema.ClientIDs
	packed [256][]byte     // claims per group, packed
	owners [256][]eventRef // whose each packed claim is
}

// eventRef names one event of a held record.
type eventRef struct {
	at  recordPos
	idx uint8
}

// claimEvents claims the client event ids of held records not checked yet, in one
// pipeline, and notes in c.eventDup which events are copies to drop. Records already
// stored, copies of a batch, and records that will not decode claim nothing. mu must be
// held; claimBatches must have run. Without Redis it does nothing.
func (c *consumer) claimEvents(ctx context.Context) (err error) {
	if c.cfg.Redis == nil {
		return nil
	}
	ec := &c.events
	claimed := false
	var checked []recordPos
	defer func() {
		if err != nil { // not checked after all: claimed again on the retry
			for _, at := range checked {
				delete(c.eventDup, at)
			}
		}
	}()
	for _, r := range c.held {
		at := recordPos{r.Partition, r.Offset}
		if _, done := c.eventDup[at]; done {
			continue
		}
		c.eventDup[at] = 0
		checked = append(checked, at)
		if c.claims[at] || r.Offset <= c.stored[r.Partition] {
			continue // a copy of a batch, or stored: skipped whole
		}
		if h, ok := c.handled[r.Partition]; ok && r.Offset <= h {
			continue // redelivered while this member holds it: skipped
		}
		if v := headerValue(r, schema.HeaderClientIDs); len(v) == 1 && v[0] == '0' {
			continue // the edge says no event carries a client id: nothing to read
		}
		if _, err := checkRecord(r, &ec.scan); err != nil {
			continue // a dead letter: it claims nothing
		}
		s := &ec.scan
		for i, id := range s.IDs {
			f, g := eventKey(s.Pixel, id)
			ec.packed[g] = appendEventClaim(ec.packed[g], f, s.ReceivedAt, r.Partition, r.Offset, s.Index[i])
			ec.owners[g] = append(ec.owners[g], eventRef{at, s.Index[i]})
			claimed = true
		}
	}
	if !claimed {
		return nil
	}
	defer ec.reset()
	var keys []string
	var args [][]any
	var refs [][]eventRef
	now := time.Now().UnixMilli()
	targs := ec.table.Args()
	for g := range ec.packed {
		packed, owners := ec.packed[g], ec.owners[g]
		for len(owners) > 0 {
			n := min(len(owners), claimChunk)
			end := 0
			for range n {
				end += 11 + int(packed[end+10])
			}
			keys = append(keys, eventClaimDir(c.cfg.ClickHouse.Database, c.cfg.Topic, byte(g)))
			args = append(args, []any{now, targs[0], targs[1], targs[2], ec.window, packed[:end]})
			refs = append(refs, owners[:n])
			packed, owners = packed[end:], owners[n:]
		}
	}
	// Pipelines of at most callsPerPipeline calls (about 16,000 claims, a fraction of a
	// second of Redis's time): a pipeline's answers must all arrive within the client's
	// read timeout.
	cmds := make([]*redis.Cmd, 0, len(keys))
	for from := 0; from < len(keys); from += callsPerPipeline {
		to := min(from+callsPerPipeline, len(keys))
		qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		part, err := eventClaimLibrary.Pipelined(qctx, c.cfg.Redis, "claim_events", keys[from:to], args[from:to])
		cancel()
		for _, k := range keys[from:to] {
			c.unsynced[k] = true // written, or perhaps written
		}
		if err != nil {
			return err
		}
		cmds = append(cmds, part...)
	}
	for i, cmd := range cmds {
		got, err := cmd.Text()
		if err != nil {
			return err
		}
		if len(got) != len(refs[i]) {
			return fmt.Errorf("event claims: %d answers for %d claims", len(got), len(refs[i]))
		}
		for j, ref := range refs[i] {
			if got[j] == '1' {
				c.eventDup[ref.at] |= 1 << ref.idx
			}
		}
	}
	return nil
}

func (ec *eventClaims) reset() {
	for g := range ec.packed {
		ec.packed[g], ec.owners[g] = ec.packed[g][:0], ec.owners[g][:0]
	}
}

// duplicateEvents reports (and forgets) which events of r are copies to drop: bit i for
// the event at index i.
func (c *consumer) duplicateEvents(r *kgo.Record) uint64 {
	at := recordPos{r.Partition, r.Offset}
	m := c.eventDup[at]
	delete(c.eventDup, at)
	return m
}

// countCopies counts the copies dropped from the decoded batch b of record r (bit i:
// event i), and queues their rejection record (copyRejections) to be produced before
// the flush's INSERT, with the dead letters.
func (c *consumer) countCopies(r *kgo.Record, b *schema.Batch, copies uint64) {
	c.m.duplicateEvents.Add(float64(bits.OnesCount64(copies)))
	c.dlq = append(c.dlq, copyRejections(r, b, copies))
}

// copyRejections is the rejection record (schema/rejection, topic rejections.v1) of the
// copies dropped from the decoded batch b of record r, as the edge writes one for the
// events a 202 rejected: GET /rejections lists them under the request_id of the copy's
// 202, status 202, field event_id, rule duplicate_event_id. The index is the event's
// position among the events the 202 accepted, and the value the id the client's
// event_id maps to (the record does not carry the client's string). At least once: a
// consumer killed between producing it and its commit may produce it again.
func copyRejections(r *kgo.Record, b *schema.Batch, copies uint64) *kgo.Record {
	rec := rejection.Record{Sandbox: b.Sandbox, Workspace: b.Workspace, Pixel: b.Pixel, Key: b.Key,
		ReceivedAt: b.ReceivedAt, RequestID: b.RequestID, Status: 202, Events: len(b.Events)}
	for i := range b.Events {
		if copies&(1<<i) != 0 {
			rec.Entries = append(rec.Entries, rejection.Entry{Index: i, Field: "event_id", Rule: schema.RuleDuplicateEventID,
				Value: rejection.Redact("event_id", uuid.UUID(b.Events[i].ID).String())})
		}
	}
	key := b.Pixel
	return &kgo.Record{Topic: schema.TopicRejections, Key: key[:], Value: rejection.Append(nil, &rec),
		Headers: []kgo.RecordHeader{{Key: schema.HeaderSchema, Value: []byte(rejection.SchemaV1)}},
		Context: context.WithValue(context.Background(), dlqKey{}, dlqInfo{partition: r.Partition})}
}

// checkRecord reads r as the consumer's decode does, with the same checks, into s
// (ids only); it returns the dead-letter reason and error of a record that fails them.
func checkRecord(r *kgo.Record, s *schema.ClientIDs) (string, error) {
	if reason, err := checkHeaders(r); err != nil {
		return reason, err
	}
	if err := schema.ScanClientIDs(r.Value, s); err != nil {
		return reasonOf(err), err
	}
	return checkTimes(s.ReceivedAt, s.MinOccurred, s.MaxOccurred)
}

// ForgetEventClaims drops the claims on the client event ids ids of pixel, made within
// window by the consumer of topic writing to database db (tools: the load generator
// cleans up after itself; tests).
func ForgetEventClaims(ctx context.Context, rdb redis.Cmdable, db, topic string, window time.Duration, pixel schema.UUID, ids []schema.UUID) error {
	var packed [256][]byte
	for _, id := range ids {
		f, g := eventKey(pixel, id)
		packed[g] = append(packed[g], f[:]...)
	}
	var keys []string
	var args [][]any
	now := time.Now().UnixMilli()
	targs := eventClaimTable(window).Args()
	for g, p := range packed {
		for len(p) > 0 {
			n := min(len(p), claimChunk*10)
			keys = append(keys, eventClaimDir(db, topic, byte(g)))
			args = append(args, []any{now, targs[0], targs[1], targs[2], p[:n]})
			p = p[n:]
		}
	}
	if len(keys) == 0 {
		return nil
	}
	_, err := eventClaimLibrary.Pipelined(ctx, rdb, "forget_events", keys, args)
	if errors.Is(err, redis.Nil) {
		err = nil
	}
	return err
}

// DropEmptyEventClaimTables removes the event-claim tables of topic under database db
// that hold no claim any more (every shard empty but for its placeholder), with their
// directories: what ForgetEventClaims leaves after a tool forgot all it made (the load
// generator). A table holding any claim is left alone. It returns how many it dropped.
func DropEmptyEventClaimTables(ctx context.Context, rdb redis.UniversalClient, db, topic string) (int, error) {
	dropped := 0
	for g := range 256 {
		dir := eventClaimDir(db, topic, byte(g))
		base := dir[:len(dir)-1]
		epochs, err := rdb.HGetAll(ctx, dir).Result()
		if err != nil {
			return dropped, err
		}
		if len(epochs) == 0 {
			continue
		}
		var lens []*redis.IntCmd
		var holders []*redis.BoolCmd // the placeholder "" is there
		_, err = rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for name, m := range epochs {
				var level, split, n int
				if _, err := fmt.Sscanf(m, "%d %d %d", &level, &split, &n); err != nil {
					return fmt.Errorf("table %s: directory entry %q = %q", base, name, m)
				}
				e, _ := strconv.ParseInt(name, 10, 64)
				for s := 0; s < 1<<level+split; s++ {
					k := idempotency.ShardKey(base, e, s)
					lens, holders = append(lens, p.HLen(ctx, k)), append(holders, p.HExists(ctx, k, ""))
				}
			}
			return nil
		})
		if err != nil {
			return dropped, err
		}
		empty := true
		for i, l := range lens {
			empty = empty && (l.Val() == 0 || l.Val() == 1 && holders[i].Val())
		}
		if !empty {
			continue
		}
		if _, err := idempotency.Drop(ctx, rdb, base); err != nil {
			return dropped, err
		}
		dropped++
	}
	return dropped, nil
}

// DropEventClaims drops every event-id claim kept for database db, of every topic (a
// scratch database's, as it is dropped: tests, the load generator's suite). It scans
// the keyspace.
func DropEventClaims(ctx context.Context, rdb redis.UniversalClient, db string) (int, error) {
	return process.UnlinkPattern(ctx, rdb, "svc:eid:{"+db+":*")
}
