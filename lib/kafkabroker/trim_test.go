package kafkabroker

import (
	"bytes"
	"context"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Two topics the embedded broker creates at start, as a process creates schema.Topics.
const topicEvents, topicDead = "events.test", "dead.test"

// The trimmer deletes only what every group reading a topic has committed: the lowest
// commit per partition, nothing of a partition one reader has not committed, nothing of
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
	cl := manualClient(t, e.Addrs())
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

// manualClient is a client of the brokers at addrs that produces to the partition each
// record names (the caller closes it, before the brokers).
func manualClient(t *testing.T, addrs []string) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	return cl
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

// The trimmer links exactly the files kfake's DeleteRecords removes, so that kfake only
// drops a name in its loop and the trimmer frees the data: the files linked are the
// files removed, each linked file had two names and its original one is gone after the
// trim, the trimmer freed them all, and no link is left. Against a change of kfake's
// layout or of its rule for whole segments, this fails.
func TestTrimFreesSegmentFilesOutsideTheBrokerLoop(t *testing.T) {
	dir := t.TempDir()
	logDir := filepath.Join(dir, "kafka")
	cluster, err := kfake.NewCluster(kfake.Ports(0), kfake.DataDir(logDir), kfake.SeedTopics(1, topicEvents),
		kfake.BrokerConfigs(map[string]string{"log.segment.bytes": "2048"}))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cl := manualClient(t, cluster.ListenAddrs())
	defer cl.Close()
	for i := 0; i < 200; i++ {
		rec := &kgo.Record{Topic: topicEvents, Value: bytes.Repeat([]byte("x"), 100)}
		if err := cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	// The commit lands on the first offset of a segment in the middle: the boundary of
	// kfake's rule (a segment goes once the next one starts at or before the new start).
	partDir := filepath.Join(logDir, "partitions", topicEvents+"-0")
	before := segmentFiles(t, partDir)
	bases := removedSegments(partDir, math.MaxInt64)
	if len(bases) < 6 {
		t.Fatalf("%d segments, want 2048-byte segments", len(bases))
	}
	at := bases[len(bases)/2]
	adm := kadm.NewClient(cl)
	var commit kadm.Offsets
	commit.AddOffset(topicEvents, 0, at, -1)
	if err := adm.CommitAllOffsets(ctx, "reader", commit); err != nil {
		t.Fatal(err)
	}
	hold, err := newSegmentHold(logDir, filepath.Join(dir, "kafka-trimmed"))
	if err != nil {
		t.Fatal(err)
	}
	links := hold.link(commit)
	if len(links) < 4 {
		t.Fatalf("linked %d files before offset %d of %d files: want several whole segments", len(links), at, len(before))
	}
	linked := map[string]bool{}
	for _, l := range links {
		if n := nlink(t, l); n != 2 {
			t.Errorf("%s has %d names, want 2", l, n)
		}
		linked[filepath.Base(l)[len(topicEvents+"-0-"):]] = true
	}
	if n := hold.release(links); n != len(links) {
		t.Fatalf("released %d of %d links", n, len(links))
	}

	tr := &trimmer{adm: adm, hold: hold, log: slog.Default()}
	if err := tr.tick(ctx, time.Now()); err != nil {
		t.Fatal(err)
	}
	after := segmentFiles(t, partDir)
	for name := range before {
		if removed := !after[name]; removed != linked[name] {
			t.Errorf("%s: removed by kfake %v, linked by the trimmer %v", name, removed, linked[name])
		}
	}
	if tr.freed != len(links) {
		t.Errorf("the trimmer freed %d files, want %d", tr.freed, len(links))
	}
	if left, _ := os.ReadDir(hold.trash); len(left) != 0 {
		t.Errorf("%d links left in %s", len(left), hold.trash)
	}
	got, err := adm.ListStartOffsets(ctx, topicEvents)
	if err != nil {
		t.Fatal(err)
	}
	if s := start(got, topicEvents, 0); s != at {
		t.Errorf("starts at %d, want %d", s, at)
	}
}

func segmentFiles(t *testing.T, dir string) map[string]bool {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]bool{}
	for _, e := range entries {
		if ext := filepath.Ext(e.Name()); ext == ".dat" || ext == ".idx" {
			files[e.Name()] = true
		}
	}
	return files
}

func nlink(t *testing.T, name string) uint64 {
	t.Helper()
	fi, err := os.Stat(name)
	if err != nil {
		t.Fatal(err)
	}
	return uint64(fi.Sys().(*syscall.Stat_t).Nlink)
}
