package rollup

import (
	"context"
	"crypto/rand"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"svc/api/apitest"
	"svc/schema"
)

// TestSecondCopyOfABatchIsSkipped: a batch produced twice with the same batch id (an
// edge died between Kafka's acknowledgement and the response, and the client retried)
// is stored once; a batch without an id, or with another id, is stored as usual; and
// after a restart the claiming record's redelivery is not mistaken for a copy.
func TestSecondCopyOfABatchIsSkipped(t *testing.T) {
	w := newWorld(t, 2)
	rdb := apitest.Redis(t)
	withID := func(b *schema.Batch, p int32, id []byte) *kgo.Record {
		r := record(b, p)
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: schema.HeaderBatchID, Value: id})
		return r
	}
	idA, idB := make([]byte, 16), make([]byte, 16)
	rand.Read(idA)
	rand.Read(idB)
	a, pa := w.batch() // counted once in the expected totals
	b, pb := w.batch()
	c, pc := w.batch()
	recs := []*kgo.Record{withID(a, pa, idA), withID(b, pb, idB), record(c, pc), withID(a, pa, idA), withID(b, pb, idB)}
	if err := w.prod.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	cfg := w.config("g-dedup")
	cfg.Redis = rdb
	stop := w.start(cfg)
	w.waitExact(20 * time.Second)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if got := metric(t, cfg.Registerer, "svc_rollup_duplicate_batches_total"); got != 2 {
		t.Fatalf("duplicate batches counted %v, want 2", got)
	}
	// A new group re-reads everything from the start: the claiming records are stored
	// data already (skipped by offset), the copies are still copies; nothing changes.
	cfg2 := w.config("g-dedup-2")
	cfg2.Redis = rdb
	stop2 := w.start(cfg2)
	time.Sleep(2 * time.Second)
	w.waitExact(10 * time.Second)
	if err := stop2(); err != nil {
		t.Fatal(err)
	}
}
