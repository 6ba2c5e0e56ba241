package kafkabroker

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The trimmer deletes only what every group reading a topic has committed: the lowest
// commit per partition, nothing of a partition one reader has not committed, nothing of
// Two topics the embedded broker creates at start, as a process creates schema.Topics.
const topicEvents, topicDead = "events.test", "dead.test"

// a topic no group reads.
func TestTrimDeletesOnlyWhatEveryGroupCommitted(t *testing.T) {
	e, err := StartEmbedded(Config{EmbeddedAddr: "127.0.0.1:0", Partitions: 2,
		Retain: time.Millisecond, TrimInterval: 50 * time.Millisecond}, topicEvents, topicDead)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.Addrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for _, tp := range []struct {
		topic string
		part  int32
		n     int
	}{{topicEvents, 0, 100}, {topicEvents, 1, 100}, {topicDead, 0, 10}} {
		for i := 0; i < tp.n; i++ {
			if err := cl.ProduceSync(ctx, &kgo.Record{Topic: tp.topic, Partition: tp.part, Value: []byte("x")}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	adm := kadm.NewClient(cl)
	commit := func(group string, offs map[int32]int64) {
		var os kadm.Offsets
		for p, at := range offs {
			os.AddOffset(topicEvents, p, at, -1)
		}
		if err := adm.CommitAllOffsets(ctx, group, os); err != nil {
			t.Fatalf("commit %s: %v", group, err)
		}
	}
	commit("reader-a", map[int32]int64{0: 60})        // has not committed partition 1
	commit("reader-b", map[int32]int64{0: 80, 1: 50}) // further on partition 0

	want := map[string]map[int32]int64{topicEvents: {0: 60, 1: 0}, topicDead: {0: 0}}
	var got kadm.ListedOffsets
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, err = adm.ListStartOffsets(ctx, topicEvents, topicDead)
		if err != nil {
			t.Fatal(err)
		}
		if start(got, topicEvents, 0) == 60 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond) // several more ticks: nothing further may go
	if got, err = adm.ListStartOffsets(ctx, topicEvents, topicDead); err != nil {
		t.Fatal(err)
	}
	for topic, parts := range want {
		for p, at := range parts {
			if s := start(got, topic, p); s != at {
				t.Errorf("%s/%d starts at %d, want %d", topic, p, s, at)
			}
		}
	}
}

func start(l kadm.ListedOffsets, topic string, p int32) int64 {
	o, ok := l.Lookup(topic, p)
	if !ok {
		return -1
	}
	return o.Offset
}

// A retain period holds back what groups committed until it has passed.
func TestTrimWaitsForRetain(t *testing.T) {
	tr := &trimmer{retain: time.Minute}
	t0 := time.Now()
	var floor kadm.Offsets
	floor.AddOffset(topicEvents, 0, 10, -1)
	tr.snaps = []floorSnapshot{{at: t0, floor: floor}}
	if due := tr.due(t0.Add(59 * time.Second)); due != nil {
		t.Fatalf("applied %v before retain passed", due)
	}
	if due := tr.due(t0.Add(time.Minute)); start2(due) != 10 {
		t.Fatalf("after retain: %v, want the floor of t0", due)
	}
	if len(tr.snaps) != 0 {
		t.Fatalf("an applied snapshot stays: %d left", len(tr.snaps))
	}
}

func start2(o kadm.Offsets) int64 {
	x, ok := o.Lookup(topicEvents, 0)
	if !ok {
		return -1
	}
	return x.At
}

func TestConfigValidateRetain(t *testing.T) {
	c := Config{EmbeddedAddr: "127.0.0.1:0", Partitions: 1, Retain: -time.Second}
	if c.Validate() == nil {
		t.Fatal("a negative SVC_EMBEDDED_KAFKA_RETAIN passed")
	}
	c.Retain, c.TrimInterval = time.Minute, 0
	if c.Validate() == nil {
		t.Fatal("a zero SVC_EMBEDDED_KAFKA_TRIM_INTERVAL passed with trimming on")
	}
}
