package rollup

import (
	"context"
	"crypto/rand"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kgo"

	"svc/schema"
	"svc/schema/apitest"
)

// TestSecondCopyOfABatchIsSkipped: a batch produced twice with the same batch id (an
// edge died between Kafka's acknowledgement and the response, and the client retried)
// is stored once; a batch without an id, or with another id, is stored as usual; and
// after a restart the claiming record's redelivery is not mistaken for a copy. A claim of
// the format before (a key of its own) is honoured: a copy it names another record for
// is skipped, the record it names is stored.
func TestSecondCopyOfABatchIsSkipped(t *testing.T) {
	w := newWorld(t, 2)
	rdb := apitest.Redis(t)
	withID := func(b *schema.Batch, p int32, id []byte) *kgo.Record {
		r := record(b, p)
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: schema.HeaderBatchID, Value: id})
		return r
	}
	ids := make([][]byte, 4)
	for i := range ids {
		ids[i] = make([]byte, 16)
		rand.Read(ids[i])
	}
	idA, idB, idOld, idOwn := ids[0], ids[1], ids[2], ids[3]
	a, pa := w.batch() // counted once in the expected totals
	b, pb := w.batch()
	c, pc := w.batch()
	d, pd := w.batch()
	recs := []*kgo.Record{withID(a, pa, idA), withID(b, pb, idB), record(c, pc), withID(a, pa, idA), withID(b, pb, idB),
		withID(a, pa, idOld), withID(d, pd, idOwn)}
	res := w.prod.ProduceSync(context.Background(), recs...)
	if err := res.FirstErr(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	own := recs[len(recs)-1] // ProduceSync set its partition and offset
	// idOld: a copy an older consumer stored at 0:999999; idOwn: this very record.
	legacy := map[string]string{legacyClaimKey(schema.TopicEvents, idOld): "0:999999",
		legacyClaimKey(schema.TopicEvents, idOwn): fmt.Sprintf("%d:%d", own.Partition, own.Offset)}
	for k, v := range legacy {
		if err := rdb.Set(ctx, k, v, time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
		defer rdb.Del(ctx, k)
	}
	defer ForgetClaims(ctx, rdb, schema.TopicEvents, ids)
	cfg := w.config("g-dedup")
	cfg.Redis = rdb
	stop := w.start(cfg)
	w.waitExact(20 * time.Second)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if got := metric(t, cfg.Registerer, "svc_rollup_duplicate_batches_total"); got != 3 {
		t.Fatalf("duplicate batches counted %v, want 3", got)
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

// A claim lives at least its 25 h: the table keeps it that long, whatever epoch it was
// made in, and it is found from a later epoch.
func TestClaimOutlivesTheRetryWindow(t *testing.T) {
	if claimTable.Life < 25*time.Hour {
		t.Fatalf("claims live %s, want at least 25 h (24 h of retries, 1 h of lag)", claimTable.Life)
	}
	rdb := apitest.Redis(t)
	ctx := context.Background()
	id := make([]byte, 16)
	rand.Read(id)
	defer ForgetClaims(ctx, rdb, schema.TopicEvents, [][]byte{id})
	claim := func(at time.Time, pos recordPos) string {
		args := append([]any{at.UnixMilli(), claimField(id), claimValue(pos)}, claimTable.Args()...)
		v, err := claimLibrary.Call(ctx, rdb, "claim", []string{claimDir(schema.TopicEvents, id)}, args...).Text()
		if err != nil && err != redis.Nil {
			t.Fatal(err)
		}
		return v
	}
	now := time.Now()
	first, second := recordPos{1, 41}, recordPos{1, 9000}
	if v := claim(now, first); v != "" {
		t.Fatalf("first claim: held by %q", v)
	}
	if v := claim(now.Add(claimTable.Life), second); v != claimValue(first) {
		t.Fatalf("25 h later the second copy sees %q, want the first record's claim", v)
	}
	if err := ForgetClaims(ctx, rdb, schema.TopicEvents, [][]byte{id}); err != nil {
		t.Fatal(err)
	}
	if v := claim(now, second); v != "" {
		t.Fatalf("after ForgetClaims the claim is still held by %q", v)
	}
}
