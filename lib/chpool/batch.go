package chpool

import (
	"context"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// pool is the connection pool Open returns: clickhouse-go's own, with PrepareBatch
// guarded against a race in its batch Send (clickhouse-go v2.50.0, the newest served;
// upstream pull request ClickHouse/clickhouse-go#2032 is still open).
//
// The race: Send starts a goroutine that closes the batch's connection when the batch's
// context ends, and on return stops it without waiting for it. When the context ends
// just after Send has returned, as it does under a caller's `defer cancel()`, a
// goroutine that has not yet run sees both of its channels ready, picks one at random
// and may close the connection, which by then is back in the pool and in use by another
// query. That query fails with "use of closed network connection", possibly after its
// INSERT landed: a retried delivery-log row was written twice that way. It takes a busy
// machine (the goroutine must wait for a CPU the whole time Send waits for the server);
// TestBatchContextEndingAfterSendSparesThePool provokes it.
//
// The guard gives each batch a context of its own (batchContext) that ends when the
// caller's does, but only until Send, Abort or Close has returned; after that it never
// ends, so a late watchdog has nothing to act on.
type pool struct {
	driver.Conn
	settings clickhouse.Settings // sent with every query (settings.go)
}

func (p pool) PrepareBatch(ctx context.Context, query string, opts ...driver.PrepareBatchOption) (driver.Batch, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	bctx := newBatchContext(ctx)
	b, err := p.Conn.PrepareBatch(bctx, query, opts...)
	if err != nil {
		bctx.detach()
		return nil, err
	}
	return guardedBatch{b, bctx}, nil
}

// guardedBatch detaches its context from the caller's once the INSERT is over.
type guardedBatch struct {
	driver.Batch
	ctx *batchContext
}

func (b guardedBatch) Send() error {
	defer b.ctx.detach()
	return b.Batch.Send()
}

func (b guardedBatch) Abort() error {
	defer b.ctx.detach()
	return b.Batch.Abort()
}

func (b guardedBatch) Close() error {
	defer b.ctx.detach()
	return b.Batch.Close()
}

// batchContext carries its parent's values and deadline, and ends with its parent's
// error when the parent ends before detach; after detach it never ends.
type batchContext struct {
	context.Context // the parent: Value, Deadline, and Err once done is closed
	done            chan struct{}
	stop            func() bool
}

func newBatchContext(parent context.Context) *batchContext {
	c := &batchContext{Context: parent, done: make(chan struct{})}
	c.stop = context.AfterFunc(parent, func() { close(c.done) })
	return c
}

func (c *batchContext) Done() <-chan struct{} { return c.done }

// Err is the parent's error once done is closed (the parent had ended then, and an
// ended context's error never changes), else nil.
func (c *batchContext) Err() error {
	select {
	case <-c.done:
		return c.Context.Err()
	default:
		return nil
	}
}

// detach stops following the parent; a context that already ended stays ended.
func (c *batchContext) detach() { c.stop() }
