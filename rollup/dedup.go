package rollup

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kgo"

	"svc/lib/idempotency"
	"svc/lib/process"
	"svc/lib/redisfn"
	"svc/schema"
)

// Duplicate batches. An edge that dies after Kafka acknowledged a batch but before it
// recorded the response leaves the client to retry with the same Idempotency-Key, and
// the retry is a second record of the same batch (same schema.HeaderBatchID, same
// partition, since both are keyed by pixel). The events' consumer claims each batch id
// for the record that carries it, as it claims client event ids (eventdedup.go): in the
// partition's claimIndex, in memory, every new claim appended to the partition's claim
// log in Redis (and on a replica) before the INSERT that relies on it. The claiming
// record is stored (again, if it is redelivered), any other record with that id
// accepted less than batchWindow after it is skipped and counted.
//
// Until issue 30 the claims were fields of bucket tables in Redis (idempotency.Buckets,
// one FCALL per claim group and poll: 10–13 µs of Redis's one thread a batch, a quarter of
// an idempotent request's Redis time); a claim logged costs Redis about 0.003 µs. The
// rejections' consumer still claims its records' batch ids there (claimIDs): its
// records of copies are few.
//
// Claims older consumers wrote in Redis are honoured (olderclaims.go): an older consumer
// may have written one before the rollout of this version. Of those, bucket tables are
// named by claim group: 256 groups per topic, by the batch id's last byte, each group a
// table under the hash tag {<topic>:<byte, hex>}; the field is the batch id's first 10
// bytes, the value the claiming record's partition and offset (uvarints).

// batchWindow: a second copy of a batch accepted (by its edge's clock) less than this
// after the record that holds the claim is skipped. A second copy is produced only by a
// run of the same Idempotency-Key that found no stored answer (a takeover, a lapsed
// reservation, an answer a failover lost or its edge never stored), within the key's
// replay window, 24 h after the first run; the hour more is for the edges' clocks.
const batchWindow = 25 * time.Hour

// batchClaimIndex is the index of a batch claim's position (offset × 64 + index) in a
// claimIndex: an event's is below schema.MaxEvents.
const batchClaimIndex = 63

// batchKey is the field of the claim on batch id (at least 16 bytes, a SHA-256): its
// first 11 bytes. An event's field (eventKey) is as uniform, so a batch and an event
// are taken for one another with a chance of 2^-80 a pair, as two events are.
func batchKey(id []byte) (f eventField) {
	copy(f[:], id)
	return f
}

// claimTable: a claim lives at least 25 h: a second copy can be produced up to 24 h after
// the first (a retry within the Idempotency-Key's window that finds no answer: its edge
// died, or a failover lost the answer), and may wait in Kafka up to 1 h longer than the
// first before it is consumed. Buckets swept every 6 h: a claim lives at most 31 h.
var claimTable = idempotency.Buckets{Life: 25 * time.Hour, Every: 6 * time.Hour, Skew: time.Minute}

// epochClaimTable is the timing of the claims of the format before (epoch tables,
// idempotency.Table, under svc:claim:): read while a group's table of that format exists
// (its directory expires with its last epoch, at most 31 h after an upgrade).
var epochClaimTable = idempotency.Table{Life: 25 * time.Hour, Span: 6 * time.Hour, Skew: time.Minute}

// claimGroup is the hash tag of the claim group of batch id (schema.HeaderBatchID, 16
// bytes) in topic.
func claimGroup(topic string, id []byte) string {
	return "{" + topic + ":" + hex.EncodeToString(id[len(id)-1:]) + "}"
}

// claimDir is the directory key of the claim group of batch id in topic.
func claimDir(topic string, id []byte) string { return "svc:claim2:" + claimGroup(topic, id) + ":d" }

// epochClaimDir is claimDir in the format before.
func epochClaimDir(topic string, id []byte) string {
	return "svc:claim:" + claimGroup(topic, id) + ":m"
}

// claimField is the claim's field: the batch id's first 10 bytes (uniform: a SHA-256).
func claimField(id []byte) string { return string(id[:min(10, len(id))]) }

// claimValue names the record that holds a claim.
func claimValue(at recordPos) string {
	b := binary.AppendUvarint(nil, uint64(at.p))
	return string(binary.AppendUvarint(b, uint64(at.o)))
}

// claimLibrary holds the claims' functions, each called with KEYS = {claimDir[,
// epochClaimDir]}:
//   - claim: ARGV now ms, field, value, claimTable.Args[, epochClaimTable.Args]. Returns
//     the value of the record that holds the claim (in the table, or with KEYS[2], in the
//     table of the format before while that exists), or nil when this one took it now.
//     Running it twice for one record answers its own value the second time.
//   - claims: claim for several batches of one group: ARGV now ms, claimTable.Args,
//     epochClaimTable.Args, then field, value pairs. Returns claim's answer for each
//     pair, false for nil.
//   - held: claims' answer for several fields of one group, claiming nothing (the
//     events' consumer's look-up of the claims consumers before it wrote): ARGV now
//     ms, claimTable.Args, epochClaimTable.Args, then the fields.
//   - forget_claim: ARGV now ms, field, claimTable.Args, epochClaimTable.Args. Drops the
//     claim from both tables.
var claimLibrary = redisfn.New("claims", idempotency.LuaTable+idempotency.LuaBuckets+`
local function claim_one(t, o, f, value)
  local v = b_get(t, f)
  if v then return v end
  if o then
    v = t_find(o, f)
    if v then return v end
  end
  b_put(t, f, value)
  return false
end
local function epochs(KEYS, now, life, span, skew)
  if KEYS[2] and redis.call('EXISTS', KEYS[2]) == 1 then
    return t_open(string.sub(KEYS[2], 1, -2), now, life, span, skew)
  end
  return nil
end
local function claim(KEYS, ARGV)
  local t = b_open(string.sub(KEYS[1], 1, -2), ARGV[1], ARGV[4], ARGV[5], ARGV[6])
  return claim_one(t, epochs(KEYS, ARGV[1], ARGV[7], ARGV[8], ARGV[9]), ARGV[2], ARGV[3])
end
local function claims(KEYS, ARGV)
  local t = b_open(string.sub(KEYS[1], 1, -2), ARGV[1], ARGV[2], ARGV[3], ARGV[4])
  local o = epochs(KEYS, ARGV[1], ARGV[5], ARGV[6], ARGV[7])
  local out = {}
  for i = 8, #ARGV, 2 do out[#out + 1] = claim_one(t, o, ARGV[i], ARGV[i + 1]) end
  return out
end
local function held(KEYS, ARGV)
  local t = b_open(string.sub(KEYS[1], 1, -2), ARGV[1], ARGV[2], ARGV[3], ARGV[4])
  local o = epochs(KEYS, ARGV[1], ARGV[5], ARGV[6], ARGV[7])
  local out = {}
  for i = 8, #ARGV do
    local v = b_get(t, ARGV[i])
    if not v and o then v = t_find(o, ARGV[i]) end
    out[#out + 1] = v or false
  end
  return out
end
local function forget_claim(KEYS, ARGV)
  local t = b_open(string.sub(KEYS[1], 1, -2), ARGV[1], ARGV[3], ARGV[4], ARGV[5])
  if b_get(t, ARGV[2]) then b_del(t, ARGV[2]) end
  local o = t_open(string.sub(KEYS[2], 1, -2), ARGV[1], ARGV[6], ARGV[7], ARGV[8])
  local v, key, en = t_find(o, ARGV[2])
  if v then t_del(o, key, en, ARGV[2]) end
  return 1
end
`, "claim", "claims", "held", "forget_claim")

// ForgetClaims drops the claims on batch ids in topic (tests clean up after themselves;
// up after itself).
func ForgetClaims(ctx context.Context, rdb redis.Cmdable, topic string, ids [][]byte) error {
	keys, args := make([][]string, len(ids)), make([][]any, len(ids))
	now := time.Now().UnixMilli()
	for i, id := range ids {
		keys[i] = []string{claimDir(topic, id), epochClaimDir(topic, id)}
		args[i] = append(append([]any{now, claimField(id)}, claimTable.Args()...), epochClaimTable.Args()...)
	}
	_, err := claimLibrary.PipelinedKeys(ctx, rdb, "forget_claim", keys, args)
	return err
}

type recordPos struct {
	p int32
	o int64
}

func batchID(r *kgo.Record) []byte {
	for _, h := range r.Headers {
		if h.Key == schema.HeaderBatchID {
			return h.Value
		}
	}
	return nil
}

// unclaimed lists the held records that carry a batch id and claims has no entry for,
// with their ids (a record without one is no duplicate: it has no entry). An id
// shorter than an edge's 16 bytes of a SHA-256 is spread by hashing it.
func unclaimed(held []*kgo.Record, claims map[recordPos]bool) (recs []*kgo.Record, ids [][]byte) {
	for _, r := range held {
		id := batchID(r)
		if len(id) == 0 {
			continue
		}
		if _, done := claims[recordPos{r.Partition, r.Offset}]; done {
			continue
		}
		if len(id) < 16 {
			h := sha256.Sum256(id)
			id = h[:]
		}
		recs = append(recs, r)
		ids = append(ids, id)
	}
	return recs, ids
}

// positions are the records' positions.
func positions(recs []*kgo.Record) []recordPos {
	pos := make([]recordPos, len(recs))
	for i, r := range recs {
		pos[i] = recordPos{r.Partition, r.Offset}
	}
	return pos
}

// claimBatches claims the batch ids of held records not checked yet, in order, in their
// partitions' claimIndex, queues the new claims for their logs (written by the flush
// before its INSERT, as the event ids'), and remembers which records are copies. Where
// older consumers' claims may exist, it reads them first (olderclaims.go: nothing in a
// deployment that never ran them or ran them more than a day before). A record whose
// received_at cannot be read (a dead letter) claims nothing. mu must be held; the
// stored offsets of the records' partitions read. Without Redis it does nothing.
func (c *consumer) claimBatches(ctx context.Context) error {
	if c.cfg.Redis == nil {
		return nil
	}
	recs, ids := unclaimed(c.held, c.claims)
	if len(recs) == 0 {
		return nil
	}
	earlier, err := c.earlierClaims(ctx, recs, ids)
	if err != nil {
		return err
	}
	for i, r := range recs {
		at := recordPos{r.Partition, r.Offset}
		ms, err := schema.ReceivedAt(r.Value)
		if earlier.copy(i) || err != nil || ms < minTime || ms >= maxTime {
			c.claims[at] = earlier.copy(i)
			continue
		}
		ix, err := c.claimIndexOf(ctx, r.Partition)
		if err != nil {
			return err
		}
		sec, f, pos := ms/1000, batchKey(ids[i]), uint64(r.Offset)<<6|batchClaimIndex
		c.claims[at] = c.events.claim(ix, r.Partition, f, sec, pos) == claimIsCopy
	}
	return nil
}

// heldElsewhere reports whether a claim's answer (claimIDs: "" when the record at took it
// now) names another record: the record at is a second copy.
func heldElsewhere(held string, at recordPos) bool { return held != "" && held != claimValue(at) }

// claimsPerCall bounds the claims of one call: Redis runs nothing else while a function
// runs, so each call stays short.
const claimsPerCall = 64

// claimIDs claims batch ids of topic (at the records pos) in Redis, in one pipeline
// (the rejections' consumer's records of copies): one call per claim group and up to
// claimsPerCall batches, so a poll's batches of one group share the call's fixed cost
// (and the directory's read). It returns, for each, the value of the record that holds
// the claim, "" when this one took it now, and adds the keys it wrote (or perhaps
// wrote) to unsynced.
func claimIDs(ctx context.Context, rdb redis.UniversalClient, topic string, ids [][]byte, pos []recordPos, unsynced map[string]bool) ([]string, error) {
	all := make([]int, len(ids))
	for i := range all {
		all[i] = i
	}
	calls := groupCalls(topic, ids, all, func(i int) []any { return []any{claimField(ids[i]), claimValue(pos[i])} })
	for _, cl := range calls {
		unsynced[cl.keys[0]] = true // written, or perhaps written
	}
	return runCalls(ctx, rdb, "claims", calls, len(ids))
}

// claimCall is one call of a claims function over one claim group's tables: its keys,
// its arguments (the timing, then each batch's) and its batches (indexes into ids).
type claimCall struct {
	keys []string
	args []any
	of   []int
}

// groupCalls splits the batches of (indexes into ids) of topic into calls of one claim
// group each, at most claimsPerCall batches a call, each batch's arguments argsOf(i).
func groupCalls(topic string, ids [][]byte, of []int, argsOf func(i int) []any) []*claimCall {
	now := time.Now().UnixMilli()
	var calls []*claimCall
	open := map[string]*claimCall{}
	for _, i := range of {
		dir := claimDir(topic, ids[i])
		cl := open[dir]
		if cl == nil || len(cl.of) == claimsPerCall {
			cl = &claimCall{keys: []string{dir, epochClaimDir(topic, ids[i])},
				args: append(append([]any{now}, claimTable.Args()...), epochClaimTable.Args()...)}
			open[dir] = cl
			calls = append(calls, cl)
		}
		cl.args = append(cl.args, argsOf(i)...)
		cl.of = append(cl.of, i)
	}
	return calls
}

// runCalls runs function fn (claims or held) over calls in one pipeline and returns, for
// each of the n batches, the value of the record that holds its claim ("" for none, or
// for a batch no call holds).
func runCalls(ctx context.Context, rdb redis.UniversalClient, fn string, calls []*claimCall, n int) ([]string, error) {
	keys, args := make([][]string, len(calls)), make([][]any, len(calls))
	for j, cl := range calls {
		keys[j], args[j] = cl.keys, cl.args
	}
	cmds, err := claimLibrary.PipelinedKeys(ctx, rdb, fn, keys, args)
	if err != nil {
		return nil, err
	}
	held := make([]string, n)
	for j, cl := range calls {
		vals, err := cmds[j].Slice()
		if err != nil {
			return nil, err
		}
		if len(vals) != len(cl.of) {
			return nil, fmt.Errorf("%s: %d answers for %d batches", fn, len(vals), len(cl.of))
		}
		for k, v := range vals {
			held[cl.of[k]], _ = v.(string)
		}
	}
	return held, nil
}

// claimReplicaTimeout bounds the wait for a replica's acknowledgement of the claims
// (below the Redis client's 2 s read timeout).
const claimReplicaTimeout = time.Second

// claimSync is the claim keys a consumer wrote and does not know to be on a replica yet.
type claimSync struct {
	unsynced map[string]bool
	replicas *process.Replicas // nil without Redis
}

func newClaimSync(rdb redis.UniversalClient) claimSync {
	s := claimSync{unsynced: map[string]bool{}}
	if rdb != nil {
		s.replicas = process.NewReplicas(rdb, claimReplicaTimeout)
	}
	return s
}

// wait returns once the claims written since the last call are on a replica of their
// master (process.Replicas; at once where a master has none): a failover can then
// promote only a replica that holds them, so a record is not handled on the strength
// of a claim Redis may still forget (and a later copy would then be stored as well).
// Until it succeeds, the records are not handled.
func (s *claimSync) wait(ctx context.Context) error {
	if len(s.unsynced) == 0 || s.replicas == nil {
		return nil
	}
	keys := make([]string, 0, len(s.unsynced))
	for k := range s.unsynced {
		keys = append(keys, k)
	}
	qctx, cancel := context.WithTimeout(ctx, 2*claimReplicaTimeout)
	defer cancel()
	if err := s.replicas.Replicate(qctx, keys); err != nil {
		return fmt.Errorf("claims not replicated: %w", err)
	}
	clear(s.unsynced)
	return nil
}

// duplicate reports (and forgets) whether r is a second copy of a stored batch.
func (c *consumer) duplicate(r *kgo.Record) bool {
	at := recordPos{r.Partition, r.Offset}
	dup := c.claims[at]
	delete(c.claims, at)
	return dup
}
