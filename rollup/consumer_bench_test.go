package rollup

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"svc/api/env"
	"svc/schema"
	"svc/schema/broker"
	"svc/schema/chtest"
)

// BenchmarkConsumerEndToEnd measures the whole role: 10,000 records of 50 events
// (500k events) waiting in the embedded broker are consumed, decoded, inserted in
// 200k-row batches and committed. It reports events/s from start to the last row, and
// events per CPU-second of this process (consumer and embedded broker).
//
//	go test -run '^$' -bench ConsumerEndToEnd -benchtime 1x ./rollup/
func BenchmarkConsumerEndToEnd(b *testing.B) {
	ch, conn := chtest.NewDB(b)
	br, err := broker.StartEmbedded(broker.Config{EmbeddedAddr: "127.0.0.1:0", Partitions: 8})
	if err != nil {
		b.Fatal(err)
	}
	defer br.Close()
	prod, err := kgo.NewClient(kgo.SeedBrokers(br.Addrs()...), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	if err != nil {
		b.Fatal(err)
	}
	defer prod.Close()
	const records = 10000
	batches := benchBatches(records)
	rs := make([]*kgo.Record, records)
	for i := range batches {
		rs[i] = &kgo.Record{Topic: schema.TopicEvents, Key: batches[i].Pixel[:], Value: schema.AppendBatch(nil, &batches[i])}
	}
	if err := prod.ProduceSync(context.Background(), rs...).FirstErr(); err != nil {
		b.Fatal(err)
	}
	want := uint64(records * 50)
	for i := 0; i < b.N; i++ {
		if i > 0 {
			if err := conn.Exec(context.Background(), "TRUNCATE TABLE events"); err != nil {
				b.Fatal(err)
			}
		}
		cfg := FromEnv(emptyEnv())
		cfg.Group = "bench-" + time.Now().Format("150405.000000")
		cfg.Kafka.Brokers = br.Addrs()
		cfg.ClickHouse = ch
		cfg.Registerer = prometheus.NewRegistry()
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		start, cpu0 := time.Now(), cpuTime()
		go func() { done <- Run(ctx, cfg) }()
		for {
			var n uint64
			if err := conn.QueryRow(context.Background(), "SELECT count() FROM events").Scan(&n); err != nil {
				b.Fatal(err)
			}
			if n >= want {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		el, cpu := time.Since(start), cpuTime()-cpu0
		cancel()
		if err := <-done; err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(want)/el.Seconds(), "events/s")
		// This process's CPU: the consumer, and the embedded broker serving its fetches
		// (the polling of the count also runs here, a few queries a second).
		b.ReportMetric(float64(want)/cpu.Seconds(), "events/cpu-s")
		b.ReportMetric(histSum(b, cfg.Registerer, "svc_rollup_flush_duration_seconds"), "insert-s")
		b.ReportMetric(histSum(b, cfg.Registerer, "svc_rollup_batch_rows"), "rows-in-batches")
	}
}

func emptyEnv() *env.Reader {
	return &env.Reader{Lookup: func(string) (string, bool) { return "", false }}
}

// histSum returns the sum of the named histogram in reg.
func histSum(b *testing.B, reg prometheus.Registerer, name string) float64 {
	mfs, err := reg.(prometheus.Gatherer).Gather()
	if err != nil {
		b.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetHistogram().GetSampleSum()
		}
	}
	return 0
}
