package rollup

import (
	"context"
	"fmt"
	"strconv"

	"github.com/twmb/franz-go/pkg/kgo"

	"svc/schema"
)

// deadLetter copies r for the dead-letter topic: same key, value and headers, plus
// svc-dlq-reason "<reason>: <error>" and the origin's topic/partition/offset.
func deadLetter(r *kgo.Record, topic, reason string, err error) *kgo.Record {
	hs := append([]kgo.RecordHeader(nil), r.Headers...)
	hs = append(hs,
		kgo.RecordHeader{Key: schema.HeaderDLQReason, Value: []byte(reason + ": " + err.Error())},
		kgo.RecordHeader{Key: "svc-dlq-origin", Value: []byte(r.Topic + "/" + strconv.Itoa(int(r.Partition)) + "/" + strconv.FormatInt(r.Offset, 10))},
	)
	return &kgo.Record{Topic: topic, Key: r.Key, Value: r.Value, Headers: hs, Context: context.WithValue(context.Background(), dlqKey{}, dlqInfo{reason, r.Partition})}
}

type dlqKey struct{}

// dlqInfo rides in a dead letter's Context: the metric reason and origin partition. A
// record with no reason is no dead letter but the rejection record of copies of
// client event ids (eventdedup.go), produced at the same step.
type dlqInfo struct {
	reason    string
	partition int32
}

func (c *consumer) flushDeadLetters(ctx context.Context) error {
	if len(c.dlq) == 0 {
		return nil
	}
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.InsertTimeout)
	defer cancel()
	res := c.cl.ProduceSync(pctx, c.dlq...)
	var failed []*kgo.Record
	var firstErr error
	for _, pr := range res {
		if pr.Err != nil {
			failed = append(failed, pr.Record)
			firstErr = cmpOr(firstErr, pr.Err)
			continue
		}
		info, _ := pr.Record.Context.Value(dlqKey{}).(dlqInfo)
		if info.reason == "" {
			continue // the rejection record of copies of event ids (eventdedup.go)
		}
		c.m.deadLetters.WithLabelValues(info.reason).Inc()
		c.log.Warn("dead letter", "reason", string(headerValue(pr.Record, schema.HeaderDLQReason)),
			"origin", string(headerValue(pr.Record, "svc-dlq-origin")))
	}
	c.dlq = failed
	if firstErr != nil {
		return fmt.Errorf("produce %d dead letters: %w", len(failed), firstErr)
	}
	return nil
}

func headerValue(r *kgo.Record, key string) []byte {
	for _, h := range r.Headers {
		if h.Key == key {
			return h.Value
		}
	}
	return nil
}

func originPartition(r *kgo.Record) int32 {
	if info, ok := r.Context.Value(dlqKey{}).(dlqInfo); ok {
		return info.partition
	}
	return -1
}
