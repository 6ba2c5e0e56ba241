package rollup

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"svc/lib/settings"
)

func TestConfigFromEnvAndValidate(t *testing.T) {
	vars := map[string]string{}
	r := &settings.Reader{Lookup: func(k string) (string, bool) { v, ok := vars[k]; return v, ok }}
	cfg := ConfigFromEnv(r)
	if err := r.Err(); err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("defaults invalid: %v", err)
	}
	if cfg.Group != "svc-rollup" || cfg.BatchRows != 200000 || cfg.BatchInterval != time.Second ||
		cfg.EventIDWindow != 48*time.Hour || (Config{}).eventIDWindow() != 48*time.Hour || // the documented 48 h
		cfg.LoopNice != 10 {
		t.Fatalf("defaults: %+v", cfg)
	}
	for name, c := range map[string]struct{ k, v, want string }{
		"rows low":  {"SVC_ROLLUP_BATCH_ROWS", "999", "SVC_ROLLUP_BATCH_ROWS"},
		"rows high": {"SVC_ROLLUP_BATCH_ROWS", "1000001", "SVC_ROLLUP_BATCH_ROWS"},
		"interval":  {"SVC_ROLLUP_BATCH_INTERVAL", "5ms", "SVC_ROLLUP_BATCH_INTERVAL"},
		"retry":     {"SVC_ROLLUP_RETRY_MAX", "1ms", "SVC_ROLLUP_RETRY_MIN"},
		"group":     {"SVC_ROLLUP_GROUP", " ", ""},
		"db":        {"SVC_CLICKHOUSE_DB", "bad-name", "SVC_CLICKHOUSE_DB"},
		"addr":      {"SVC_CLICKHOUSE_ADDR", "nohostport", "SVC_CLICKHOUSE_ADDR"},
		"window":    {"SVC_EVENT_ID_WINDOW", "169h", "SVC_EVENT_ID_WINDOW"},
		"window ms": {"SVC_EVENT_ID_WINDOW", "1500ms", "SVC_EVENT_ID_WINDOW"},
		"window 3s": {"SVC_EVENT_ID_WINDOW", "3s", ""},
		"nice high": {"SVC_ROLLUP_LOOP_NICE", "20", "SVC_ROLLUP_LOOP_NICE"},
		"nice low":  {"SVC_ROLLUP_LOOP_NICE", "-1", "SVC_ROLLUP_LOOP_NICE"},
		"nice off":  {"SVC_ROLLUP_LOOP_NICE", "0", ""},
	} {
		vars = map[string]string{c.k: c.v}
		cfg := ConfigFromEnv(r)
		err := cfg.Validate()
		if c.want == "" {
			if err != nil {
				t.Errorf("%s: %v", name, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error naming %s", name, err, c.want)
		}
	}
}

// The events' consumer's fetch bound: 64 KiB from the embedded broker by default,
// franz-go's own from a Kafka cluster, a setting's value from either, a partition a
// quarter of it; resolved by New, which then points the brokers at the seeds it is
// given (the embedded broker's address too).
func TestFetchMaxBytes(t *testing.T) {
	fetch := func(cfg Config) (total, partition int32) {
		t.Helper()
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers("127.0.0.1:1")}, cfg.fetchOpts()...)...)
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		return cl.OptValue(kgo.FetchMaxBytes).(int32), cl.OptValue(kgo.FetchMaxPartitionBytes).(int32)
	}
	consumer := func(cfg Config) Config {
		t.Helper()
		c, err := New(cfg, []string{"127.0.0.1:9092"}, prometheus.NewRegistry(), nil)
		if err != nil {
			t.Fatal(err)
		}
		return c.cfg
	}
	vars := map[string]string{}
	r := &settings.Reader{Lookup: func(k string) (string, bool) { v, ok := vars[k]; return v, ok }}
	embedded := ConfigFromEnv(r)
	if n, p := fetch(consumer(embedded)); n != 64<<10 || p != 16<<10 {
		t.Errorf("embedded broker: fetch %d, partition %d; want 65536, 16384", n, p)
	}
	cluster := embedded
	cluster.Kafka.Brokers = []string{"kafka-1:9092"}
	cl, err := kgo.NewClient(kgo.SeedBrokers("127.0.0.1:1"))
	if err != nil {
		t.Fatal(err)
	}
	defaultTotal, defaultPartition := cl.OptValue(kgo.FetchMaxBytes).(int32), cl.OptValue(kgo.FetchMaxPartitionBytes).(int32)
	cl.Close()
	if n, p := fetch(consumer(cluster)); n != defaultTotal || p != defaultPartition || n <= 64<<10 {
		t.Errorf("Kafka cluster: fetch %d, partition %d; want franz-go's %d, %d", n, p, defaultTotal, defaultPartition)
	}
	for _, c := range []Config{embedded, cluster} {
		c.FetchMaxBytes = 1 << 20
		if n, p := fetch(consumer(c)); n != 1<<20 || p != 1<<18 {
			t.Errorf("SVC_ROLLUP_FETCH_MAX_BYTES 1 MiB (brokers %v): fetch %d, partition %d", c.Kafka.Brokers, n, p)
		}
	}
	for _, bad := range []int{-1, 1000, 512 << 20} {
		c := embedded
		c.FetchMaxBytes = bad
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "SVC_ROLLUP_FETCH_MAX_BYTES") {
			t.Errorf("FetchMaxBytes %d: %v", bad, err)
		}
	}
}
