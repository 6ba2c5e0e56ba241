package rollup

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kgo"

	"svc/lib/process"
	"svc/schema"
	"svc/schema/rejection"
)

// Client event ids (DESIGN.md, "Exactly once", 4). An event that carried a client
// event_id (schema.UUID.FromClient) is claimed, per pixel, for the first record that
// holds it: its position (offset, index in the batch) and the time the edge accepted
// it. A later copy of the same (pixel, event_id) accepted less than the window
// (SVC_EVENT_ID_WINDOW) after the claimed one is dropped before the INSERT and counted;
// the claiming record's own redelivery (a consumer killed or rebalanced before its
// INSERT landed) finds its own position and is stored. A copy accepted at or past the
// window is stored and claims the event afresh.
//
// All copies of a pixel's events go to one partition (the record key is the pixel), so
// "first" is the partition's order, which one consumer at a time follows, and the claims
// are the partition's own: the consumer that owns a partition keeps its claims in memory
// (claimIndex: a lookup probes one hash table, no round trip) and appends every new
// claim to the partition's claim log in Redis before the INSERT that relies on it (one
// RPUSH per partition and epoch per flush, WAITed for before its INSERT). A consumer
// that is assigned a partition reads its log back before deciding anything for it; the
// decisions are a function of the partition's records in order, so replaying the log's
// claims of the records up to the stored offset, then deciding the records after it
// again in order, reaches the same ones (claimIndexOf; a record that is already stored
// is replayed too: its claims may have been logged after the log was read, by a
// consumer the partition was taken from).
//
// The log: per partition and epoch of acceptance time (eventClaimSpan), a Redis list
// `svc:eid:{<db>:<topic label>:<partition>:<epoch>}` of packed claims (field, seconds
// into the epoch, offset × 64 + index; about 16 B each), under a hash tag of its own so
// the epochs and partitions spread over a Redis Cluster's masters; it expires the window
// and eventIDLagMargin after its epoch ends. The topic label (incarnation.go) keeps a
// recreated topic's offsets from meeting an earlier incarnation's claims.

// eventIDLagMargin: a claim is kept the window plus this much, so that a copy accepted
// within the window still finds it when it is consumed up to an hour later than the
// newest record seen, or more than an hour out of order.
const eventIDLagMargin = time.Hour

// eventClaimSpan is the epoch of the claim logs: each expires whole once the window and
// the margin have passed its end.
const eventClaimSpan = 12 * time.Hour

// eventLogChunk bounds one element of a claim log (one RPUSH argument), in bytes.
const eventLogChunk = 1 << 20

// eventField is the claim's field: 11 bytes of pixel XOR event id (the id is a SHA-256
// of the client's string, so the bytes are uniform; the UUID's version and variant
// bytes are left out). The index in memory (claimSet) keeps 80 bits of it: within one
// partition, two events are taken for one with a chance of about n²/2^81 for n claims
// held (4 × 10^-9 for 100 million).
type eventField [11]byte

// eventKey is the field of the claim on event id of pixel.
func eventKey(pixel, id schema.UUID) (f eventField) {
	j := 0
	for i := range id {
		if i != 6 && i != 8 && j < len(f) { // version and variant: fixed bits
			f[j] = pixel[i] ^ id[i]
			j++
		}
	}
	return f
}

// eventClaims is the consumer's state for claiming client event ids.
type eventClaims struct {
	window  int64 // seconds
	scan    schema.ClientIDs
	fields  []eventField          // the fields of the record being claimed (scratch)
	index   map[int32]*claimIndex // per owned partition, once its log is read
	pending map[logKey][]byte     // claims decided, not yet in their log; after a flush, its buffers emptied for the next
	last    logKey                // the log lastBuf gathers for; its claims are not in pending yet
	lastBuf []byte
}

// logKey names one claim log: a partition and epoch.
type logKey struct {
	p int32
	e int64
}

func newEventClaims(window time.Duration) eventClaims {
	return eventClaims{window: int64(window / time.Second), index: map[int32]*claimIndex{},
		pending: map[logKey][]byte{}, last: logKey{p: -1}}
}

// claim claims f in ix, partition p's index, for the event or batch accepted at sec at
// position pos (claimIndex.claim), and queues a new claim for its log.
func (ec *eventClaims) claim(ix *claimIndex, p int32, f eventField, sec int64, pos uint64) claimOutcome {
	o := ix.claim(f, sec, pos)
	if o == claimNew {
		k := logKey{p, sec / ix.span}
		ec.logClaim(k, f, sec-k.e*ix.span, pos)
	}
	return o
}

// logClaim queues a new claim for the log k.
func (ec *eventClaims) logClaim(k logKey, f eventField, rel int64, pos uint64) {
	if k != ec.last {
		ec.settle()
		ec.last, ec.lastBuf = k, ec.pending[k]
	}
	ec.lastBuf = appendLogEntry(ec.lastBuf, f, rel, pos)
}

// settle moves lastBuf's claims into pending.
func (ec *eventClaims) settle() {
	if len(ec.lastBuf) > 0 {
		ec.pending[ec.last] = ec.lastBuf
	}
	ec.last, ec.lastBuf = logKey{p: -1}, nil
}

// forget drops partition p's claims (revoked or lost: its next owner reads the log).
func (ec *eventClaims) forget(p int32) {
	ec.settle()
	delete(ec.index, p)
	for k := range ec.pending {
		if k.p == p {
			delete(ec.pending, k)
		}
	}
}

// held is the number of claims held in memory, over every partition.
func (ec *eventClaims) held() int {
	n := 0
	for _, ix := range ec.index {
		n += ix.held()
	}
	return n
}

// eventLogKey is the key of partition p's claim log of epoch e.
func (c *consumer) eventLogKey(p int32, e int64) string {
	topic := c.label
	if topic == "" {
		topic = c.cfg.Topic
	}
	return schema.EventClaimLog(c.cfg.ClickHouse.Database, topic, p, e)
}

// claimEvents claims the client event ids of held records not checked yet, in order,
// notes in c.eventDup which events are copies to drop, and queues the new claims for
// their logs (written by the flush, writeEventLogs, before its INSERT: one append per log
// a flush, not one a poll). Copies of a batch and records that will not decode claim
// nothing; records already stored are replayed (see above). mu must be held;
// claimBatches must have run. Without Redis it does nothing.
func (c *consumer) claimEvents(ctx context.Context) error {
	if c.cfg.Redis == nil {
		return nil
	}
	for _, r := range c.held {
		at := recordPos{r.Partition, r.Offset}
		if _, done := c.eventDup[at]; done {
			continue
		}
		if !c.carriesEventIDs(r) {
			c.eventDup[at] = 0
			continue
		}
		ix, err := c.claimIndexOf(ctx, r.Partition)
		if err != nil {
			return err
		}
		c.eventDup[at] = c.claimRecord(ix, r)
	}
	return nil
}

// carriesEventIDs says whether r's client event ids are to be claimed: not a copy of a
// batch, not redelivered while this member holds it, and (by the edge's header) with
// at least one client id.
func (c *consumer) carriesEventIDs(r *kgo.Record) bool {
	if c.claims[recordPos{r.Partition, r.Offset}] {
		return false
	}
	if h, ok := c.handled[r.Partition]; ok && r.Offset <= h {
		return false
	}
	v := headerValue(r, schema.HeaderClientIDs)
	return !(len(v) == 1 && v[0] == '0')
}

// claimRecord claims the client event ids of r in ix, queues the new claims for their
// log, and returns the copies (bit i: the event at index i). A record that fails the
// decode's checks (a dead letter) claims nothing.
func (c *consumer) claimRecord(ix *claimIndex, r *kgo.Record) uint64 {
	ec := &c.events
	s := &ec.scan
	if _, err := checkRecord(r, s); err != nil {
		return 0
	}
	sec := max(s.ReceivedAt/1000, 0)
	fs := ec.fields[:0]
	for _, id := range s.IDs {
		fs = append(fs, eventKey(s.Pixel, id))
	}
	ec.fields = fs
	ix.set.touch(fs)
	var copies uint64
	for i, f := range fs {
		pos := uint64(r.Offset)<<6 | uint64(s.Index[i])
		if ec.claim(ix, r.Partition, f, sec, pos) == claimIsCopy {
			copies |= 1 << s.Index[i]
		}
	}
	return copies
}

// claimIndexOf returns partition p's claims, reading its logs on first use: the claims
// of the records up to the partition's stored offset. The records after it come again
// (offsets are committed after their INSERT) and are decided again, in order, from the
// state the consumer that first decided them had: replaying their logged claims first
// would let a later record's claim decide an earlier one (a first copy taken for a copy
// of a later claim afresh, or a claim expired by a later record's time). A caller that
// did not read the stored offset (tests) replays every claim.
func (c *consumer) claimIndexOf(ctx context.Context, p int32) (*claimIndex, error) {
	if ix := c.events.index[p]; ix != nil {
		return ix, nil
	}
	upTo, known := c.stored[p]
	if !known {
		upTo = math.MaxInt64
	}
	ix := newClaimIndex(c.events.window)
	now := time.Now().Unix()
	lo := (now - ix.keep - int64((eventIDLagMargin+eventClaimSpan)/time.Second)) / ix.span
	hi := (now+int64(time.Hour/time.Second))/ix.span + 1
	qctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for e := lo; e <= hi; e++ {
		if err := c.readEventLog(qctx, ix, c.eventLogKey(p, e), e, upTo); err != nil {
			return nil, fmt.Errorf("read the event claims of partition %d: %w", p, err)
		}
	}
	c.events.index[p] = ix
	return ix, nil
}

// readEventLog replays the log at key (of epoch e) into ix, 64 elements at a time, up
// to the records at offset upTo.
func (c *consumer) readEventLog(ctx context.Context, ix *claimIndex, key string, e, upTo int64) error {
	const page = 64
	for from := int64(0); ; from += page {
		blobs, err := c.cfg.Redis.LRange(ctx, key, from, from+page-1).Result()
		if err != nil {
			return err
		}
		for _, b := range blobs {
			if err := ix.replay(e, []byte(b), upTo); err != nil {
				return fmt.Errorf("%s: %w", key, err)
			}
		}
		if len(blobs) < page {
			return nil
		}
	}
}

// writeEventLogs appends the pending claims to their logs, in one pipeline (elements of
// at most eventLogChunk bytes), and marks the logs for the WAIT (claimSync.wait) before
// the INSERT. The flush calls it first: every claim its rows rely on was decided when
// their records were handled, so it is pending or logged. On failure the claims stay
// pending and the flush fails before anything is inserted.
func (c *consumer) writeEventLogs(ctx context.Context) error {
	ec := &c.events
	ec.settle()
	for k, blob := range ec.pending {
		if len(blob) == 0 { // a log no claim went to since the last flush: its buffer goes
			delete(ec.pending, k)
		}
	}
	if len(ec.pending) == 0 {
		return nil
	}
	span := int64(eventClaimSpan / time.Second)
	keep := time.Duration(claimKeep(ec.window))*time.Second + eventIDLagMargin
	pipe := c.cfg.Redis.Pipeline()
	for k, blob := range ec.pending {
		key := c.eventLogKey(k.p, k.e)
		for _, chunk := range logChunks(blob) {
			pipe.RPush(ctx, key, chunk)
		}
		pipe.ExpireAt(ctx, key, time.Unix((k.e+1)*span, 0).Add(keep))
		c.sync.unsynced[key] = true // written, or perhaps written
	}
	qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := pipe.Exec(qctx); err != nil {
		return fmt.Errorf("event claim logs: %w", err)
	}
	// The buffers are kept, emptied, for the next flush's claims of the same logs: grown
	// afresh each flush, they were allocated about five times over (Go grows a large
	// slice by a quarter), a tenth of svc dev's allocations at 200k events/s with ids.
	for k, blob := range ec.pending {
		ec.pending[k] = blob[:0]
	}
	return nil
}

// logChunks splits packed log entries into elements of at most about eventLogChunk
// bytes, at entry boundaries.
func logChunks(blob []byte) [][]byte {
	var out [][]byte
	for len(blob) > eventLogChunk {
		end := 0
		for end < eventLogChunk {
			_, n := binary.Uvarint(blob[end+len(eventField{})+2:])
			end += len(eventField{}) + 2 + n
		}
		out = append(out, blob[:end])
		blob = blob[end:]
	}
	return append(out, blob)
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
	c.dlq = append(c.dlq, copyRejections(c.label, r, b, copies))
}

// copyRejections is the rejection record (schema/rejection, topic rejections.v1) of the
// copies dropped from the decoded batch b of record r, as the edge writes one for the
// events a 202 rejected: GET /rejections lists them under the request_id of the copy's
// 202, status 202, field event_id, rule duplicate_event_id. The index is the event's
// position among the events the 202 accepted, and the value the id the client's
// event_id maps to (the record does not carry the client's string). Produced at least
// once (a consumer killed between producing it and its commit produces it again), and
// counted once: it carries a batch id of its own (copyRecordID), which the rejections'
// consumer claims as this consumer claims the edges' batch ids.
func copyRejections(label string, r *kgo.Record, b *schema.Batch, copies uint64) *kgo.Record {
	return eventRejections(label, r, b, copies, "event_id", schema.RuleDuplicateEventID)
}

// copyRecordID is the batch id (schema.HeaderBatchID) of the rejection record of rule
// that record r of the topic incarnation label makes: the same whenever the record is
// decided again, and another for any other record.
func copyRecordID(label string, r *kgo.Record, rule string) []byte {
	h := sha256.New()
	h.Write([]byte("svc-copy-rejections\x00" + label + "\x00" + rule + "\x00"))
	h.Write(binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint32(nil, uint32(r.Partition)), uint64(r.Offset)))
	return h.Sum(nil)[:16]
}

// eventRejections is the rejection record of the events of b (record r of the topic
// incarnation label) whose bits are set in events, each with field and rule, its value
// the id the event was stored under.
func eventRejections(label string, r *kgo.Record, b *schema.Batch, events uint64, field, rule string) *kgo.Record {
	rec := rejection.Record{Sandbox: b.Sandbox, Workspace: b.Workspace, Pixel: b.Pixel, Key: b.Key,
		ReceivedAt: b.ReceivedAt, RequestID: b.RequestID, Status: 202, Events: len(b.Events)}
	for i := range b.Events {
		if events&(1<<i) != 0 {
			rec.Entries = append(rec.Entries, rejection.Entry{Index: i, Field: field, Rule: rule,
				Value: rejection.Redact("event_id", uuid.UUID(b.Events[i].ID).String())})
		}
	}
	key := b.Pixel
	return &kgo.Record{Topic: schema.TopicRejections, Key: key[:], Value: rejection.Append(nil, &rec),
		Headers: []kgo.RecordHeader{{Key: schema.HeaderSchema, Value: []byte(rejection.SchemaV1)},
			{Key: schema.HeaderBatchID, Value: copyRecordID(label, r, rule)}},
		Context: context.WithValue(context.Background(), dlqKey{}, dlqInfo{partition: r.Partition})}
}

// batchCopyRejections is the rejection record of the decoded batch b of record r, a
// second copy of a batch already stored (dedup.go): every event, rule duplicate_batch,
// field empty, under the copy's request_id, so that GET /batches finds the request
// whose 202 the client holds and says its events were counted once, under the first
// copy. Produced at least once and counted once, as copyRejections.
func batchCopyRejections(label string, r *kgo.Record, b *schema.Batch) *kgo.Record {
	return eventRejections(label, r, b, uint64(1)<<len(b.Events)-1, "", schema.RuleDuplicateBatch)
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

// DropEventClaims drops every event-id claim log kept for database db, of every topic
// (a scratch database's, as it is dropped: tests, the load generator's suite). It scans
// the keyspace.
func DropEventClaims(ctx context.Context, rdb redis.UniversalClient, db string) (int, error) {
	return process.UnlinkPattern(ctx, rdb, schema.EventClaimLogs(db)+"*")
}
