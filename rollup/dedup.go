package rollup

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
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
// partition, since both are keyed by pixel). The consumer claims each batch id in Redis
// for the record that carries it (its partition and offset): the claiming record is
// stored (again, if it is redelivered), any other record with that id is skipped and
// counted.
//
// Claims are fields of bucket tables (idempotency.Buckets), not keys: 256 groups per
// topic, by the batch id's last byte, each group a table under the hash tag
// {<topic>:<byte, hex>} (so the groups, and one API key's claims with them, spread over a
// Redis Cluster's masters); the field is the batch id's first 10 bytes (a lookup meets a
// few hundred fields that share at most 16 of its 80 bits: two batches are taken for one
// with a chance under 2^-50), the value the claiming record's partition and offset
// (uvarints). One GET of the group's directory and one HMGET find a claim whatever its
// age. About 24 B of Redis memory a claim (MEMORY USAGE of the tables), where a key of
// its own took about 180.

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
local function forget_claim(KEYS, ARGV)
  local t = b_open(string.sub(KEYS[1], 1, -2), ARGV[1], ARGV[3], ARGV[4], ARGV[5])
  if b_get(t, ARGV[2]) then b_del(t, ARGV[2]) end
  local o = t_open(string.sub(KEYS[2], 1, -2), ARGV[1], ARGV[6], ARGV[7], ARGV[8])
  local v, key, en = t_find(o, ARGV[2])
  if v then t_del(o, key, en, ARGV[2]) end
  return 1
end
`, "claim", "claims", "forget_claim")

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

// Claims of the format before (one key each, svc:batch:<topic>:<batch id, hex> = the
// holder's "partition:offset", 25 h) are honoured for legacyClaimsFor after the process
// starts: an older consumer may have written one within that time (an upgrade's rollout
// taking under an hour), and a retry that missed the older edges' answer record (not
// read any more) makes a second copy that must be caught.
const legacyClaimsFor = 26 * time.Hour

var processStart = time.Now()

func legacyClaimKey(topic string, id []byte) string {
	return "svc:batch:" + topic + ":" + hex.EncodeToString(id)
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

// unclaimed lists the batch ids of the held records that carry one and claims has no
// entry for, with their positions (a record without one is no duplicate: it has no
// entry). An id shorter than an edge's 16 bytes of a SHA-256 is spread by hashing it.
func unclaimed(held []*kgo.Record, claims map[recordPos]bool) (ids [][]byte, pos []recordPos) {
	for _, r := range held {
		id := batchID(r)
		if len(id) == 0 {
			continue
		}
		at := recordPos{r.Partition, r.Offset}
		if _, done := claims[at]; done {
			continue
		}
		if len(id) < 16 {
			h := sha256.Sum256(id)
			id = h[:]
		}
		ids = append(ids, id)
		pos = append(pos, at)
	}
	return ids, pos
}

// claimBatches claims the batch ids of held records not checked yet, in one round trip
// (with the claims of the format before while they may exist), and remembers which
// records are duplicates. mu must be held. Without Redis it does nothing.
func (c *consumer) claimBatches(ctx context.Context) error {
	if c.cfg.Redis == nil {
		return nil
	}
	ids, pos := unclaimed(c.held, c.claims)
	if len(ids) == 0 {
		return nil
	}
	qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var legacy legacyLookup
	if time.Since(processStart) <= legacyClaimsFor {
		legacy = legacyLookup{ctx: qctx, topic: c.cfg.Topic, ids: ids}
	}
	held, err := claimIDs(qctx, c.cfg.Redis, c.cfg.Topic, ids, pos, c.sync.unsynced, legacy.queue)
	if err != nil {
		return err
	}
	for i, at := range pos {
		dup, err := legacy.heldElsewhere(i, at)
		if err != nil {
			return err
		}
		c.claims[at] = dup || heldElsewhere(held[i], at)
	}
	return nil
}

// heldElsewhere reports whether a claim's answer (claimIDs: "" when the record at took it
// now) names another record: the record at is a second copy.
func heldElsewhere(held string, at recordPos) bool { return held != "" && held != claimValue(at) }

// claimsPerCall bounds the claims of one call: Redis runs nothing else while a function
// runs, so each call stays short.
const claimsPerCall = 64

// claimIDs claims batch ids of topic (at the records pos) in one pipeline: one call per
// claim group and up to claimsPerCall batches, so a poll's batches of one group share
// the call's fixed cost (and the directory's read). It returns, for each, the value of
// the record that holds the claim, "" when this one took it now, and adds the keys it
// wrote (or perhaps wrote) to unsynced. The commands each of also queues go in the same
// pipeline (redisfn.Library.PipelinedKeys).
func claimIDs(ctx context.Context, rdb redis.UniversalClient, topic string, ids [][]byte, pos []recordPos, unsynced map[string]bool, also ...func(redis.Pipeliner)) ([]string, error) {
	now := time.Now().UnixMilli()
	type call struct {
		keys []string
		args []any
		of   []int // indexes into ids
	}
	var calls []*call
	open := map[string]*call{}
	for i, id := range ids {
		dir := claimDir(topic, id)
		cl := open[dir]
		if cl == nil || len(cl.of) == claimsPerCall {
			cl = &call{keys: []string{dir, epochClaimDir(topic, id)},
				args: append(append([]any{now}, claimTable.Args()...), epochClaimTable.Args()...)}
			open[dir] = cl
			calls = append(calls, cl)
		}
		cl.args = append(cl.args, claimField(id), claimValue(pos[i]))
		cl.of = append(cl.of, i)
	}
	keys, args := make([][]string, len(calls)), make([][]any, len(calls))
	for j, cl := range calls {
		keys[j], args[j] = cl.keys, cl.args
		unsynced[cl.keys[0]] = true // written, or perhaps written
	}
	cmds, err := claimLibrary.PipelinedKeys(ctx, rdb, "claims", keys, args, also...)
	if err != nil {
		return nil, err
	}
	held := make([]string, len(ids))
	for j, cl := range calls {
		vals, err := cmds[j].Slice()
		if err != nil {
			return nil, err
		}
		if len(vals) != len(cl.of) {
			return nil, fmt.Errorf("claims: %d answers for %d batches", len(vals), len(cl.of))
		}
		for k, v := range vals {
			held[cl.of[k]], _ = v.(string)
		}
	}
	return held, nil
}

// legacyLookup reads the claims of the format before of a poll's batches, in the
// pipeline of their claims (queue); the zero value reads nothing (legacyClaimsFor has
// passed).
type legacyLookup struct {
	ctx   context.Context
	topic string
	ids   [][]byte
	cmds  []*redis.StringCmd
}

// queue adds a GET of each batch's claim of the format before to p.
func (l *legacyLookup) queue(p redis.Pipeliner) {
	l.cmds = l.cmds[:0]
	for _, id := range l.ids {
		l.cmds = append(l.cmds, p.Get(l.ctx, legacyClaimKey(l.topic, id)))
	}
}

// heldElsewhere reports whether batch i's claim of the format before names another
// record than the one at at.
func (l *legacyLookup) heldElsewhere(i int, at recordPos) (bool, error) {
	if len(l.ids) == 0 {
		return false, nil
	}
	held, err := l.cmds[i].Result()
	if errors.Is(err, redis.Nil) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return held != strconv.Itoa(int(at.p))+":"+strconv.FormatInt(at.o, 10), nil
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
