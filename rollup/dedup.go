package rollup

import (
	"context"
	"encoding/hex"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kgo"

	"svc/schema"
)

// Duplicate batches. An edge that dies after Kafka acknowledged a batch but before it
// recorded the response leaves the client to retry with the same Idempotency-Key, and
// the retry is a second record of the same batch (same schema.HeaderBatchID, same
// partition, since both are keyed by pixel). The consumer claims each batch id in Redis
// for the record that carries it ("partition:offset"): the claiming record is stored
// (again, if it is redelivered), any other record with that id is skipped and counted.

// batchClaimTTL outlives the 24 h an Idempotency-Key can be retried.
const batchClaimTTL = 25 * time.Hour

// claimScript: KEYS = batch claim keys; ARGV = "partition:offset" per key, then the TTL
// in seconds. Returns 1 (store) or 0 (another record holds the claim) per key.
var claimScript = redis.NewScript(`
local out = {}
local ttl = ARGV[#ARGV]
for i, k in ipairs(KEYS) do
  local v = redis.call('GET', k)
  if not v then
    redis.call('SET', k, ARGV[i], 'EX', ttl)
    out[i] = 1
  elseif v == ARGV[i] then
    out[i] = 1
  else
    out[i] = 0
  end
end
return out
`)

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

// claimBatches claims the batch ids of held records not checked yet, in one round trip,
// and remembers which records are duplicates. mu must be held. Without Redis it does
// nothing.
func (c *consumer) claimBatches(ctx context.Context) error {
	if c.cfg.Redis == nil {
		return nil
	}
	var keys []string
	var args []any
	var pos []recordPos
	for _, r := range c.held {
		at := recordPos{r.Partition, r.Offset}
		if _, done := c.claims[at]; done {
			continue
		}
		id := batchID(r)
		if id == nil {
			c.claims[at] = false
			continue
		}
		keys = append(keys, "svc:batch:"+c.cfg.Topic+":"+hex.EncodeToString(id))
		args = append(args, strconv.Itoa(int(r.Partition))+":"+strconv.FormatInt(r.Offset, 10))
		pos = append(pos, at)
	}
	if len(keys) == 0 {
		return nil
	}
	args = append(args, int(batchClaimTTL.Seconds()))
	qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	res, err := claimScript.Run(qctx, c.cfg.Redis, keys, args...).Int64Slice()
	if err != nil {
		return err
	}
	for i, at := range pos {
		c.claims[at] = res[i] == 0
	}
	return nil
}

// duplicate reports (and forgets) whether r is a second copy of a stored batch.
func (c *consumer) duplicate(r *kgo.Record) bool {
	at := recordPos{r.Partition, r.Offset}
	dup := c.claims[at]
	delete(c.claims, at)
	return dup
}
