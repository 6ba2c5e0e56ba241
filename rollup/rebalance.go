package rollup

import (
	"context"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// assigned forgets the stored offsets of newly assigned partitions and reads them
// again (best effort; handle reads them before the first record otherwise).
func (c *consumer) assigned(ctx context.Context, _ *kgo.Client, m map[string][]int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dead {
		return
	}
	parts := m[c.cfg.Topic]
	c.own(len(parts))
	c.forget(parts) // nothing should be left of them; start clean
	c.wm.own(parts)
	qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if err := c.readStored(qctx, parts); err != nil {
		c.log.Warn("read stored offsets on assignment (will retry before handling records)", "err", err)
	}
	c.log.Info("partitions assigned", "partitions", parts, "stored", c.stored)
}

// revoked flushes and commits everything handled, so that the next owner starts
// exactly after it. If ClickHouse stays down past RevokeTimeout, the revoked
// partitions' work is dropped uncommitted instead: the next owner re-reads it.
func (c *consumer) revoked(_ context.Context, _ *kgo.Client, m map[string][]int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dead {
		return
	}
	parts := m[c.cfg.Topic]
	if err := c.flushUntil(time.Now().Add(c.cfg.RevokeTimeout)); err != nil {
		c.log.Error("flush on revoke failed; dropping revoked partitions' uncommitted work for the next owner", "err", err)
	}
	c.forget(parts)
	c.wm.disown(parts)
	c.own(-len(parts))
	c.log.Info("partitions revoked", "partitions", parts, "stored", c.stored)
}

// lost drops the work of partitions this member no longer owns (session lost): it
// cannot commit for them, and inserting could race the new owner.
func (c *consumer) lost(_ context.Context, _ *kgo.Client, m map[string][]int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dead {
		return
	}
	c.forget(m[c.cfg.Topic])
	c.wm.disown(m[c.cfg.Topic])
	c.own(-len(m[c.cfg.Topic]))
	if len(m[c.cfg.Topic]) > 0 { // franz-go calls again with none while it cannot rejoin
		c.log.Warn("partitions lost", "topic", c.cfg.Topic, "partitions", m[c.cfg.Topic])
	}
}

// own adds n to the count of owned partitions, when the role asked for it.
func (c *consumer) own(n int) {
	if c.cfg.Owned != nil {
		c.cfg.Owned.Add(int64(n))
	}
}

// forget drops all state of parts. mu must be held.
func (c *consumer) forget(parts []int32) {
	gone := map[int32]bool{}
	for at := range c.claims {
		for _, p := range parts {
			if at.p == p {
				delete(c.claims, at)
			}
		}
	}
	for at := range c.eventDup {
		for _, p := range parts {
			if at.p == p {
				delete(c.eventDup, at)
			}
		}
	}
	for _, p := range parts {
		gone[p] = true
		c.events.forget(p)
		delete(c.stored, p)
		delete(c.commit, p)
		delete(c.handled, p)
		c.m.partitionLag.DeleteLabelValues(strconv.Itoa(int(p)))
	}
	c.sink.Drop(func(p int32, _ int64) bool { return gone[p] })
	keep := c.held[:0]
	for _, r := range c.held {
		if !gone[r.Partition] {
			keep = append(keep, r)
		}
	}
	c.held = keep
	dl := c.dlq[:0]
	for _, r := range c.dlq {
		if !gone[originPartition(r)] {
			dl = append(dl, r)
		}
	}
	c.dlq = dl
	if c.sink.Len() == 0 && len(c.held) == 0 && len(c.dlq) == 0 && len(c.commit) == 0 {
		c.first = time.Time{}
	}
}
