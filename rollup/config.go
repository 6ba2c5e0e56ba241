package rollup

import (
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kgo"

	"svc/lib/chpool"
	"svc/lib/kafkabroker"
	"svc/lib/logs"
	"svc/lib/settings"
	"svc/schema"
)

// Config configures `svc rollup`.
type Config struct {
	// Group is the Kafka consumer group (SVC_ROLLUP_GROUP, default svc-rollup). Every
	// instance of the role joins the same group; partitions are spread across them.
	Group string
	// BatchRows flushes when this many events are buffered (SVC_ROLLUP_BATCH_ROWS,
	// default 200000, allowed 1000..1000000). One flush is one INSERT, one part; at
	// 200,000 events/s on 18.16, flushing every 200,000 rows instead of 50,000 cut
	// ClickHouse's CPU from about 0.38 to 0.25 cores (bench/HISTORY.md). Below that rate
	// BatchInterval flushes first, so freshness does not change.
	BatchRows int
	// BatchInterval flushes buffered events at most this long after the first of them
	// arrived (SVC_ROLLUP_BATCH_INTERVAL, default 1s, allowed 10ms..1m).
	BatchInterval time.Duration
	// RetryMin and RetryMax bound the exponential backoff between failed flushes while
	// ClickHouse or Kafka is unavailable (SVC_ROLLUP_RETRY_MIN, default 100ms;
	// SVC_ROLLUP_RETRY_MAX, default 10s). Fetching stops while a flush is failing.
	RetryMin, RetryMax time.Duration
	// InsertTimeout bounds one INSERT attempt (SVC_ROLLUP_INSERT_TIMEOUT, default 30s).
	// It must stay below RebalanceTimeout.
	InsertTimeout time.Duration
	// RevokeTimeout bounds the flush in a rebalance callback; past it the revoked
	// partitions' buffered rows are dropped uncommitted and the next owner re-reads them
	// (SVC_ROLLUP_REVOKE_TIMEOUT, default 15s).
	RevokeTimeout time.Duration
	// SessionTimeout is the consumer group session timeout: a member that stops
	// heartbeating (killed) loses its partitions after it (SVC_ROLLUP_SESSION_TIMEOUT,
	// default 6s, allowed 1s..5m). Heartbeats go every SessionTimeout/6, at most 1s, and
	// run beside flushes, so a long INSERT does not end a session. 6 s is Kafka's default
	// group.min.session.timeout.ms; with it a SIGKILLed member's partitions are consumed
	// again within about 8 s (franz-go's and Kafka's 45 s default stalled them 51 s).
	SessionTimeout time.Duration
	// RebalanceTimeout is how long the group waits for every member to rejoin during a
	// rebalance; a member killed mid-rebalance holds the group up to it
	// (SVC_ROLLUP_REBALANCE_TIMEOUT, default 60s, allowed 2s..10m). It must exceed
	// InsertTimeout and RevokeTimeout: a member finishes its flush within it.
	RebalanceTimeout time.Duration
	// Table is the raw events table (SVC_ROLLUP_TABLE, default events).
	Table string
	// RejectionSamples is how many rejections of one pixel and minute are stored
	// (SVC_ROLLUP_REJECTION_SAMPLES, default 100, allowed 0..100000); past it they are
	// only counted (rejections.go).
	RejectionSamples int
	// RejectionRetention is how long rows of the rejections table are kept at least
	// (SVC_ROLLUP_REJECTION_RETENTION, default 720h; 0 keeps everything): whole UTC days
	// are dropped once older (rejections_run.go).
	RejectionRetention time.Duration
	// EventIDWindow is how long a client event_id deduplicates (SVC_EVENT_ID_WINDOW,
	// default 48h, whole seconds, 1s..168h; 0 is the default): a copy of an event the
	// edge accepted less than this after the stored copy is dropped (eventdedup.go).
	// With Redis only.
	EventIDWindow time.Duration
	// FetchMaxBytes bounds one fetch of the events' consumer (SVC_ROLLUP_FETCH_MAX_BYTES;
	// 0, the default, is 64 KiB from the embedded broker and franz-go's 50 MiB from a
	// Kafka cluster; allowed 0 or 16 KiB..256 MiB); a partition's share of a fetch is a
	// quarter of it. The embedded broker builds a fetch's answer on the loop that also
	// acknowledges produced batches, so a large fetch holds the edge's 202s back: at
	// 200,000 events/s with every event an event_id, fetches of 64 KiB took the p99 from
	// due from 42–65 ms to 14–24 ms, at the same CPU per event (bench/HISTORY.md,
	// "2026-11-28 (morning)"). A Kafka broker answers fetches on threads of their own.
	// The rejections' consumer keeps franz-go's bound.
	FetchMaxBytes int
	// LoopNice is the nice value of the OS thread each of the consumer's poll loops (the
	// events' and the rejections') runs on, a thread of its own (SVC_ROLLUP_LOOP_NICE,
	// default 10, allowed 0..19; 0 leaves the loops to Go's scheduler on any thread).
	// Decoding, claims, sorting and encoding a flush run on that thread, so the kernel
	// gives the process's other threads the CPU first. Go's scheduler has no priorities:
	// in `svc dev`, where the edge shares the process, a flush's bursts delayed the edge's
	// handlers; at 200,000 events/s with event ids the 202's p90 fell from 5.60 to 4.94 ms
	// (medians of eleven runs a side, lower in ten pairs of eleven; the p99 12.9 against
	// 12.4 ms, within the noise) for about 3% more of svc's CPU (the thread's hand-offs),
	// at 500,000 the p99 from 190 to 159 ms in one pair, caught up as soon
	// (bench/HISTORY.md, stop 48).
	// The consumer still gets what the edge leaves: at nice 10 about a tenth of the CPU
	// its group's nice-0 threads contend for. A nice value ranks threads within their CPU
	// group (a systemd unit's or a pod's: the process's own).
	LoopNice int
	// Topic is the events topic (schema.TopicEvents); DeadTopic receives undecodable
	// records (schema.TopicDeadEvent). Not set from the environment.
	Topic, DeadTopic string
	// Kafka and ClickHouse say where the brokers and the database are.
	Kafka      kafkabroker.Config
	ClickHouse chpool.Config
	// Registerer receives the metrics; nil means prometheus.DefaultRegisterer.
	Registerer prometheus.Registerer
	// Redis holds batch-id claims that skip a second copy of a batch (see dedup.go);
	// nil disables that check. `svc rollup` and `svc dev` connect it (SVC_REDIS_URL or SVC_REDIS_CLUSTER).
	Redis redis.UniversalClient
	// Owned, when set, counts the partitions this member owns (readiness: /readyz
	// reports a consumer without partitions as not ready).
	Owned *atomic.Int64
	// Log receives the consumer's lines and its Kafka client's; nil means
	// slog.Default() with role rollup. `svc rollup` and `svc dev` set the process's
	// logger naming role rollup.
	Log *slog.Logger

	// testAfterInsert, when set, runs after a successful INSERT and before the commit;
	// returning an error makes the consumer stop at once without committing, as a
	// SIGKILL at that moment would. Tests only.
	testAfterInsert func() error
	// testAfterRejectionInsert is testAfterInsert for the rejections' consumer. Tests only.
	testAfterRejectionInsert func() error
	// testBeforeInsert, when set, runs before each INSERT is sent (after the flush's
	// records were handled and their claims made); returning an error stops the
	// consumer at once, as a SIGKILL mid-flush would. Tests only.
	testBeforeInsert func() error
	// testKgoOpts are appended to the Kafka client options (faster heartbeats). Tests only.
	testKgoOpts []kgo.Opt
}

// DefaultEventIDWindow is SVC_EVENT_ID_WINDOW's default (Meta's and TikTok's
// conversions APIs deduplicate an event_id for 48 hours).
const DefaultEventIDWindow = 48 * time.Hour

// eventIDWindow is EventIDWindow, or the default when it is 0.
func (c Config) eventIDWindow() time.Duration {
	if c.EventIDWindow == 0 {
		return DefaultEventIDWindow
	}
	return c.EventIDWindow
}

// MaxEventIDWindow bounds SVC_EVENT_ID_WINDOW: the edge takes no event older than
// schema.MaxEventAge, and Redis holds a claim per event for the window (deploy/README.md
// has the capacity formula).
const MaxEventIDWindow = schema.MaxEventAge

// embeddedFetchMaxBytes is FetchMaxBytes' default from the embedded broker.
const embeddedFetchMaxBytes = 64 << 10

// fetchMaxBytes is FetchMaxBytes with its default resolved: 64 KiB when Kafka is the
// embedded broker (no SVC_KAFKA_BROKERS). New resolves it before it sets the brokers to
// the seeds it connects to, which name the embedded broker too.
func (c Config) fetchMaxBytes() int {
	if c.FetchMaxBytes == 0 && len(c.Kafka.Brokers) == 0 {
		return embeddedFetchMaxBytes
	}
	return c.FetchMaxBytes
}

// fetchOpts are the Kafka client's fetch bounds (FetchMaxBytes; 0: franz-go's).
func (c Config) fetchOpts() []kgo.Opt {
	n := c.FetchMaxBytes
	if n == 0 {
		return nil
	}
	return []kgo.Opt{kgo.FetchMaxBytes(int32(n)), kgo.FetchMaxPartitionBytes(int32(n / 4))}
}

// heartbeatInterval is how often a member heartbeats for a session timeout: six beats
// per session, at most one a second (a surviving member learns of a rebalance at its
// next heartbeat).
func heartbeatInterval(session time.Duration) time.Duration {
	return min(session/6, time.Second)
}

// ConfigFromEnv reads the SVC_* variables named on each field.
func ConfigFromEnv(r *settings.Reader) Config {
	return Config{
		Group:              r.String("SVC_ROLLUP_GROUP"),
		BatchRows:          r.Int("SVC_ROLLUP_BATCH_ROWS"),
		BatchInterval:      r.Duration("SVC_ROLLUP_BATCH_INTERVAL"),
		RetryMin:           r.Duration("SVC_ROLLUP_RETRY_MIN"),
		RetryMax:           r.Duration("SVC_ROLLUP_RETRY_MAX"),
		InsertTimeout:      r.Duration("SVC_ROLLUP_INSERT_TIMEOUT"),
		RevokeTimeout:      r.Duration("SVC_ROLLUP_REVOKE_TIMEOUT"),
		SessionTimeout:     r.Duration("SVC_ROLLUP_SESSION_TIMEOUT"),
		RebalanceTimeout:   r.Duration("SVC_ROLLUP_REBALANCE_TIMEOUT"),
		Table:              r.String("SVC_ROLLUP_TABLE"),
		RejectionSamples:   r.Int("SVC_ROLLUP_REJECTION_SAMPLES"),
		RejectionRetention: r.Duration("SVC_ROLLUP_REJECTION_RETENTION"),
		EventIDWindow:      r.Duration("SVC_EVENT_ID_WINDOW"),
		FetchMaxBytes:      r.Int("SVC_ROLLUP_FETCH_MAX_BYTES"),
		LoopNice:           r.Int("SVC_ROLLUP_LOOP_NICE"),
		Topic:              schema.TopicEvents,
		DeadTopic:          schema.TopicDeadEvent,
		Kafka:              kafkabroker.ConfigFromEnv(r),
		ClickHouse:         chpool.ConfigFromEnv(r),
	}
}

// Validate reports a configuration that cannot work.
func (c Config) Validate() error {
	var errs []error
	if c.Group == "" {
		errs = append(errs, errors.New("SVC_ROLLUP_GROUP: must not be empty"))
	}
	if c.BatchRows < 1000 || c.BatchRows > 1_000_000 {
		errs = append(errs, fmt.Errorf("SVC_ROLLUP_BATCH_ROWS %d: want 1000..1000000", c.BatchRows))
	}
	if c.BatchInterval < 10*time.Millisecond || c.BatchInterval > time.Minute {
		errs = append(errs, fmt.Errorf("SVC_ROLLUP_BATCH_INTERVAL %v: want 10ms..1m", c.BatchInterval))
	}
	if c.RetryMin <= 0 || c.RetryMax < c.RetryMin {
		errs = append(errs, fmt.Errorf("SVC_ROLLUP_RETRY_MIN %v / SVC_ROLLUP_RETRY_MAX %v: want 0 < min <= max", c.RetryMin, c.RetryMax))
	}
	if c.RebalanceTimeout < 2*time.Second || c.RebalanceTimeout > 10*time.Minute {
		errs = append(errs, fmt.Errorf("SVC_ROLLUP_REBALANCE_TIMEOUT %v: want 2s..10m", c.RebalanceTimeout))
	}
	if c.InsertTimeout <= 0 || c.InsertTimeout >= c.RebalanceTimeout {
		errs = append(errs, fmt.Errorf("SVC_ROLLUP_INSERT_TIMEOUT %v: want 0 < t < SVC_ROLLUP_REBALANCE_TIMEOUT (%v)", c.InsertTimeout, c.RebalanceTimeout))
	}
	if c.RevokeTimeout <= 0 || c.RevokeTimeout >= c.RebalanceTimeout {
		errs = append(errs, fmt.Errorf("SVC_ROLLUP_REVOKE_TIMEOUT %v: want 0 < t < SVC_ROLLUP_REBALANCE_TIMEOUT (%v)", c.RevokeTimeout, c.RebalanceTimeout))
	}
	if c.SessionTimeout < time.Second || c.SessionTimeout > 5*time.Minute {
		errs = append(errs, fmt.Errorf("SVC_ROLLUP_SESSION_TIMEOUT %v: want 1s..5m", c.SessionTimeout))
	}
	if c.RejectionSamples < 0 || c.RejectionSamples > 100_000 {
		errs = append(errs, fmt.Errorf("SVC_ROLLUP_REJECTION_SAMPLES %d: want 0..100000", c.RejectionSamples))
	}
	if c.RejectionRetention < 0 || c.RejectionRetention > 0 && c.RejectionRetention < time.Hour {
		errs = append(errs, fmt.Errorf("SVC_ROLLUP_REJECTION_RETENTION %v: want 0 (keep everything) or at least 1h", c.RejectionRetention))
	}
	if w := c.EventIDWindow; w != 0 && (w < time.Second || w > MaxEventIDWindow || w%time.Second != 0) {
		errs = append(errs, fmt.Errorf("SVC_EVENT_ID_WINDOW %v: want whole seconds, 1s..%v", w, MaxEventIDWindow))
	}
	if n := c.FetchMaxBytes; n != 0 && (n < 16<<10 || n > 256<<20) {
		errs = append(errs, fmt.Errorf("SVC_ROLLUP_FETCH_MAX_BYTES %d: want 0 (the default) or 16384..268435456", n))
	}
	if c.LoopNice < 0 || c.LoopNice > 19 {
		errs = append(errs, fmt.Errorf("SVC_ROLLUP_LOOP_NICE %d: want 0..19", c.LoopNice))
	}
	if c.Table == "" || c.Topic == "" || c.DeadTopic == "" {
		errs = append(errs, errors.New("table, topic and dead-letter topic must be set"))
	}
	if err := c.Kafka.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := c.ClickHouse.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// log is Log, or slog.Default() naming role rollup.
func (c Config) log() *slog.Logger {
	if c.Log != nil {
		return c.Log
	}
	return slog.Default().With(logs.RoleKey, "rollup")
}
