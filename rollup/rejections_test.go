package rollup

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"svc/lib/svctest"
	"svc/schema"
	"svc/schema/apitest"
	"svc/schema/rejection"
)

// produceRejections produces n rejection records of 3 entries each for pixels 0..3
// (pixel i on partition i), all received now, and returns the entries produced.
func (e *world) produceRejections(n int) int {
	e.t.Helper()
	rs := make([]*kgo.Record, 0, n)
	entries := 0
	for i := 0; i < n; i++ {
		r := &rejection.Record{Workspace: e.ws, ReceivedAt: time.Now().UnixMilli(), RequestID: fmt.Sprintf("req_%d", e.rng.Uint64()),
			Status: 202, Events: 5}
		pix := i % 4
		r.Pixel[0], r.Pixel[1] = 0x51, byte(pix)
		for j := 0; j < 3; j++ {
			r.Entries = append(r.Entries, rejection.Entry{Index: j, Field: "currency", Rule: []string{"iso4217", "required"}[j%2], Value: `"EURO"`})
		}
		entries += len(r.Entries)
		rs = append(rs, &kgo.Record{Topic: schema.TopicRejections, Partition: int32(pix % e.parts), Key: r.Pixel[:],
			Value: rejection.Append(nil, r), Headers: []kgo.RecordHeader{{Key: schema.HeaderSchema, Value: []byte(rejection.SchemaV1)}}})
	}
	if err := e.prod.ProduceSync(context.Background(), rs...).FirstErr(); err != nil {
		e.t.Fatalf("produce: %v", err)
	}
	return entries
}

// rejectionTotals reads sum(rejections) and the most samples stored for one pixel-minute.
func (e *world) rejectionTotals() (total uint64, maxSamples uint64) {
	e.t.Helper()
	err := e.conn.QueryRow(context.Background(), "SELECT (SELECT sum(toUInt64(rejections)) FROM rejections), "+
		"(SELECT max(c) FROM (SELECT count() AS c FROM rejections WHERE sample = 1 GROUP BY pixel_id, minute))").Scan(&total, &maxSamples)
	if err != nil {
		e.t.Fatal(err)
	}
	return total, maxSamples
}

func counter(t *testing.T, reg prometheus.Registerer, name, outcome string) float64 {
	t.Helper()
	mfs, err := reg.(prometheus.Gatherer).Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if mf.GetName() == name && l.GetName() == "outcome" && l.GetValue() == outcome {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// The rejections' consumer killed between its INSERT and its commit, then restarted:
// every rejection is counted exactly once (the redelivered records are skipped), and the
// samples of a pixel-minute stay within the cap across the change of member (the new
// one reads how many the table holds).
func TestRejectionsExactlyOnceAcrossAKillAndCapped(t *testing.T) {
	w := newWorld(t, 4)
	want := w.produceRejections(40)
	cfg := w.config("g-rej-kill")
	cfg.RejectionSamples = 5
	var inserts atomic.Int32
	cfg.testAfterRejectionInsert = func() error {
		inserts.Add(1)
		return errors.New("killed")
	}
	stop := w.start(cfg)
	svctest.WaitFor(t, 20*time.Second, "the first rejections INSERT", func() bool { return inserts.Load() > 0 })
	stopKilled(t, stop)
	if got, _ := w.rejectionTotals(); got != uint64(want) {
		t.Fatalf("after the killed flush: %d rejections stored, want %d (one flush)", got, want)
	}
	want += w.produceRejections(40) // same pixel-minutes, most likely: the cap must hold across members
	cfg2 := w.config("g-rej-kill")
	cfg2.RejectionSamples = 5
	w.start(cfg2)
	var got, most uint64
	svctest.WaitFor(t, 20*time.Second, "every rejection counted", func() bool {
		got, most = w.rejectionTotals()
		return got >= uint64(want)
	})
	time.Sleep(300 * time.Millisecond) // a second copy would land by now
	if got, most = w.rejectionTotals(); got != uint64(want) || most > 5 {
		t.Fatalf("%d rejections counted, want %d; at most %d samples of a pixel-minute, cap 5", got, want, most)
	}
	if counter(t, cfg2.Registerer, "svc_rollup_rejections_total", "skipped") == 0 {
		t.Error("the restarted consumer skipped nothing: the kill did not leave an uncommitted insert")
	}
}

// A record of copies the events' consumer produced twice (the same batch id, a consumer
// killed after producing it) is counted once, also past the sample cap; the edges'
// records carry no batch id, and two of them are two requests' rejections, both counted.
func TestRejectionRecordsOfCopiesCountedOnce(t *testing.T) {
	w := newWorld(t, 4)
	rdb := apitest.Redis(t)
	b, _ := w.batch()
	at := &kgo.Record{Topic: schema.TopicEvents, Partition: 1, Offset: 42}
	label := fmt.Sprintf("events.v1@%016x", w.rng.Uint64()) // a fresh incarnation: fresh claims
	rec := copyRejections(label, at, b, 1<<len(b.Events)-1)
	edge := &kgo.Record{Topic: schema.TopicRejections, Key: b.Pixel[:], Value: rec.Value,
		Headers: []kgo.RecordHeader{{Key: schema.HeaderSchema, Value: []byte(rejection.SchemaV1)}}}
	var rs []*kgo.Record
	for range 2 { // the records of copies twice, an edge's record twice
		for _, r := range []*kgo.Record{rec, edge} {
			c := *r
			c.Partition, c.Context = 2, nil
			rs = append(rs, &c)
		}
	}
	if err := w.prod.ProduceSync(context.Background(), rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	b2, _ := w.batch() // the id names the record and the rule, not what the record holds
	if !bytes.Equal(batchID(copyRejections(label, at, b2, 1)), batchID(rec)) {
		t.Fatal("a record's batch id of copies changes with what it holds")
	}
	other := *at
	other.Offset++
	if bytes.Equal(batchID(copyRejections(label, &other, b, 1)), batchID(rec)) ||
		bytes.Equal(batchID(batchCopyRejections(label, at, b)), batchID(rec)) ||
		bytes.Equal(batchID(copyRejections(label+"x", at, b, 1)), batchID(rec)) {
		t.Fatal("records of copies of another record, rule or topic incarnation share a batch id")
	}
	cfg := w.config("g-rej-copies")
	cfg.Redis = rdb
	cfg.RejectionSamples = 3 // past the cap, the counts too
	w.start(cfg)
	want := uint64(3 * len(b.Events))
	var got uint64
	svctest.WaitFor(t, 20*time.Second, "the rejections counted", func() bool {
		got, _ = w.rejectionTotals()
		return got >= want
	})
	time.Sleep(300 * time.Millisecond)
	if got, _ = w.rejectionTotals(); got != want {
		t.Fatalf("%d rejections counted, want %d: the copy's record once, the edge's twice", got, want)
	}
	if n := counter(t, cfg.Registerer, "svc_rollup_rejections_total", "copy"); n != 1 {
		t.Fatalf("%v records skipped as a second copy, want 1", n)
	}
}

// The retention drops whole days of the rejections table once every row of them is
// older than it and a day (rejection.FirstKeptDay), and keeps the rest.
func TestRejectionRetentionDropsOldDays(t *testing.T) {
	w := newWorld(t, 1)
	ctx := context.Background()
	row := rejection.Row{Workspace: uuid.UUID(w.ws), Pixel: uuid.New(), ReceivedAt: time.Now().UTC(), Rule: "iso4217", Sample: true, Rejections: 1}
	now := time.Now().UTC()
	for _, at := range []time.Time{now.Add(-40 * 24 * time.Hour), now.Add(-32 * 24 * time.Hour), now.Add(-31*24*time.Hour + time.Hour),
		now.Add(-29 * 24 * time.Hour), now} {
		if err := rejection.Insert(ctx, w.conn, "t", at, []rejection.Row{row}); err != nil {
			t.Fatal(err)
		}
	}
	cfg := w.config("g-ret")
	cfg.RejectionRetention = 30 * 24 * time.Hour
	if err := rejectionRetention(ctx, cfg, w.conn); err != nil {
		t.Fatal(err)
	}
	var days uint64
	if err := w.conn.QueryRow(ctx, "SELECT uniqExact(toYYYYMMDD(inserted_at)) FROM rejections").Scan(&days); err != nil {
		t.Fatal(err)
	}
	if days != 3 {
		t.Fatalf("%d days left, want 3 (31 days old less an hour, 29 days old, today)", days)
	}
}
