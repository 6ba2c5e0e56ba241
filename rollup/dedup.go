package rollup

import (
	"context"
	"encoding/hex"
	"errors"
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

// ClaimKey is the Redis key of the claim on batch id (schema.HeaderBatchID) in topic.
func ClaimKey(topic string, id []byte) string {
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

// claimBatches claims the batch ids of held records not checked yet, in one round trip,
// and remembers which records are duplicates. mu must be held. Without Redis it does
// nothing.
func (c *consumer) claimBatches(ctx context.Context) error {
	if c.cfg.Redis == nil {
		return nil
	}
	var keys []string
	var args []string
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
		keys = append(keys, ClaimKey(c.cfg.Topic, id))
		args = append(args, strconv.Itoa(int(r.Partition))+":"+strconv.FormatInt(r.Offset, 10))
		pos = append(pos, at)
	}
	if len(keys) == 0 {
		return nil
	}
	qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	// One SET NX GET per batch, pipelined: Redis answers each with the claim that was
	// there (nil when this one took it), and serves other clients between them, where
	// one script over a flush's thousand keys held it for about 10 ms.
	cmds := make([]*redis.StatusCmd, len(keys))
	_, err := c.cfg.Redis.Pipelined(qctx, func(p redis.Pipeliner) error {
		for i, k := range keys {
			cmds[i] = p.SetArgs(qctx, k, args[i], redis.SetArgs{Mode: "NX", Get: true, TTL: batchClaimTTL})
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return err
	}
	for i, at := range pos {
		held, err := cmds[i].Result()
		switch {
		case errors.Is(err, redis.Nil):
			c.claims[at] = false // claimed now
		case err != nil:
			return err
		default:
			c.claims[at] = held != args[i] // another record holds it: a duplicate
		}
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
