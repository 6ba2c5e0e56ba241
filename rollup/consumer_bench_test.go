package rollup

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"svc/lib/kafkabroker"
	"svc/lib/settings"
	"svc/lib/svctest"
	"svc/schema"
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
	br, err := kafkabroker.StartEmbedded(kafkabroker.Config{EmbeddedAddr: "127.0.0.1:0", Partitions: 8}, schema.Topics...)
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
	batches := chtest.Batches(records)
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
		cfg := ConfigFromEnv(emptyEnv())
		cfg.Group = "bench-" + time.Now().Format("150405.000000")
		cfg.Kafka.Brokers = br.Addrs()
		cfg.ClickHouse = ch
		cfg.Registerer = prometheus.NewRegistry()
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		start, cpu0 := time.Now(), chtest.CPUTime()
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
		el, cpu := time.Since(start), chtest.CPUTime()-cpu0
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

func emptyEnv() *settings.Reader {
	return &settings.Reader{Lookup: func(string) (string, bool) { return "", false }}
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

// BenchmarkConsumerProcess measures the consumer as it runs in production: `svc rollup`
// in a process of its own (SVC_BIN, else built from this tree), draining records of 50
// events from a broker in this process into ClickHouse, 200,000-row flushes. It reports
// events per CPU-second of the consumer process (its user+system time from /proc when
// the last row is visible: polling, decoding, buffering, INSERTs, metrics, GC, start-up
// included) and events/s. Set SVC_BENCH_RECORDS to change the 20,000 records (1M events).
//
//	SVC_BIN=bin/svc go test -run '^$' -bench ConsumerProcess -benchtime 1x ./rollup/
func BenchmarkConsumerProcess(b *testing.B) {
	bin := svctest.Binary(b) // SVC_BIN, else built from this tree
	records := 20000
	if n := settings.New().Int("SVC_BENCH_RECORDS"); n > 0 {
		records = n
	}
	ch, conn := chtest.NewDB(b)
	br, err := kafkabroker.StartEmbedded(kafkabroker.Config{EmbeddedAddr: "127.0.0.1:0", Partitions: 8}, schema.Topics...)
	if err != nil {
		b.Fatal(err)
	}
	defer br.Close()
	produceBench(b, br.Addrs(), records)
	want := uint64(records * 50)
	for i := 0; i < b.N; i++ {
		if i > 0 {
			if err := conn.Exec(context.Background(), "TRUNCATE TABLE events"); err != nil {
				b.Fatal(err)
			}
		}
		cmd := exec.Command(bin, "rollup")
		cmd.Env = append(os.Environ(), "SVC_KAFKA_BROKERS="+strings.Join(br.Addrs(), ","),
			"SVC_CLICKHOUSE_ADDR="+ch.Addr, "SVC_CLICKHOUSE_DB="+ch.Database,
			"SVC_ROLLUP_GROUP=bench-"+strconv.Itoa(i)+"-"+strconv.FormatInt(time.Now().UnixNano(), 36),
			"SVC_HTTP_ADDR=127.0.0.1:0", "SVC_METRICS_ADDR=off", "SVC_LOG_LEVEL=warn")
		cmd.Stderr = os.Stderr
		start := time.Now()
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
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
		el, cpu := time.Since(start), processCPU(b, cmd.Process.Pid)
		_ = cmd.Process.Signal(syscall.SIGTERM)
		if err := cmd.Wait(); err != nil {
			b.Fatalf("svc rollup: %v", err)
		}
		b.ReportMetric(float64(want)/el.Seconds(), "events/s")
		b.ReportMetric(float64(want)/cpu.Seconds(), "events/consumer-cpu-s")
	}
}

// produceBench writes records of 50 events each into the events topic, uncompressed as
// the edge writes to the embedded broker.
func produceBench(b *testing.B, seeds []string, records int) {
	prod, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()),
		kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err != nil {
		b.Fatal(err)
	}
	defer prod.Close()
	batches := chtest.Batches(1000)
	for done := 0; done < records; {
		rs := make([]*kgo.Record, 0, 1000)
		for j := 0; j < 1000 && done < records; j, done = j+1, done+1 {
			bt := &batches[j]
			for k := range bt.Events {
				bt.Events[k].ID[3], bt.Events[k].ID[4] = byte(done>>8), byte(done>>16) // distinct ids
			}
			rs = append(rs, &kgo.Record{Topic: schema.TopicEvents, Key: bt.Pixel[:], Value: schema.AppendBatch(nil, bt),
				Headers: []kgo.RecordHeader{{Key: schema.HeaderClientIDs, Value: []byte("0")}}}) // as the edge: no event_id
		}
		if err := prod.ProduceSync(context.Background(), rs...).FirstErr(); err != nil {
			b.Fatal(err)
		}
	}
}

// processCPU is process pid's user+system CPU time so far (/proc/<pid>/stat).
func processCPU(b *testing.B, pid int) time.Duration {
	f, err := procStat("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		b.Fatal(err)
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * (time.Second / 100) // USER_HZ
}
