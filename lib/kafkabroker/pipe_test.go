package kafkabroker

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// connNetworks records the network of every connection a client makes to a broker.
type connNetworks struct {
	mu   sync.Mutex
	seen []string
}

func (h *connNetworks) OnBrokerConnect(_ kgo.BrokerMetadata, _ time.Duration, c net.Conn, err error) {
	if err == nil {
		h.mu.Lock()
		h.seen = append(h.seen, c.RemoteAddr().Network())
		h.mu.Unlock()
	}
}

func (h *connNetworks) networks() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.seen...)
}

// roundTrip produces a record to topic and consumes it back through a client with
// opts; it returns the networks of the client's connections.
func roundTrip(t *testing.T, seeds []string, topic string, opts ...kgo.Opt) []string {
	t.Helper()
	h := &connNetworks{}
	cl, err := kgo.NewClient(append(opts, kgo.SeedBrokers(seeds...), kgo.WithHooks(h),
		kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	for {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("the record did not come back: %v", err)
		}
		if fs.NumRecords() > 0 {
			return h.networks()
		}
	}
}

// TestClientsOfTheProcessUsePipes: a client dialing through Dial reaches the embedded
// broker of its own process over pipes (every connection, the seed's and the one to the
// address the metadata advertises), a client without it over TCP (kcat, other processes);
// once the broker is closed Dial no longer finds it.
func TestClientsOfTheProcessUsePipes(t *testing.T) {
	e, err := StartEmbedded(Config{EmbeddedAddr: "127.0.0.1:0", Partitions: 1}, "pipes")
	if err != nil {
		t.Fatal(err)
	}
	seeds := e.Addrs()
	for _, n := range roundTrip(t, seeds, "pipes", kgo.Dialer(Dial)) {
		if n != "pipe" {
			t.Fatalf("a client dialing through Dial connected over %q, want pipes only", n)
		}
	}
	tcp := roundTrip(t, seeds, "pipes")
	if len(tcp) == 0 {
		t.Fatal("no connection seen")
	}
	for _, n := range tcp {
		if n != "tcp" {
			t.Fatalf("a client with the default dialer connected over %q, want tcp", n)
		}
	}
	e.Close()
	if _, ok := inProcess.Load(seeds[0]); ok {
		t.Fatal("a closed broker is still found by Dial")
	}
}
