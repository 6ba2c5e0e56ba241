// Package broker connects roles to Kafka: either the brokers named in SVC_KAFKA_BROKERS,
// or, when that is empty, an embedded kfake broker that speaks the real Kafka protocol on
// SVC_EMBEDDED_KAFKA_ADDR (so kcat and other standard tools can read it) and persists to
// SVC_DATA_DIR/kafka, so a restart keeps every acknowledged batch.
package kafkabroker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"svc/lib/logs"
	"svc/lib/process"
	"svc/lib/settings"
)

// Config says where Kafka is.
type Config struct {
	// Brokers are seed brokers (SVC_KAFKA_BROKERS, comma-separated). Empty means: run
	// the embedded broker in this process.
	Brokers []string
	// EmbeddedAddr is where the embedded broker listens (SVC_EMBEDDED_KAFKA_ADDR,
	// default 127.0.0.1:9092). Port 0 picks a free port (tests).
	EmbeddedAddr string
	// DataDir is the root data directory (SVC_DATA_DIR, default .data); the embedded
	// broker keeps its log under DataDir/kafka. Empty DataDir keeps it in memory.
	DataDir string
	// Partitions is the partition count of topics the embedded broker creates
	// (SVC_KAFKA_PARTITIONS, default 8).
	Partitions int
	// SyncWrites fsyncs every produced batch in the embedded broker
	// (SVC_EMBEDDED_KAFKA_FSYNC, default false). Without it a killed process still
	// keeps every acknowledged batch (the OS holds the pages); only a machine crash can
	// lose the last moments, as with Kafka's own defaults.
	SyncWrites bool
	// Retain is how long the embedded broker keeps records after every consumer group
	// of their topic has committed past them (SVC_EMBEDDED_KAFKA_RETAIN, default 10m;
	// 0 keeps them for Kafka's default 7 days). It bounds the broker's memory and disk
	// under steady load; records no group has finished with are never deleted.
	Retain time.Duration
	// TrimInterval is how often that is checked (SVC_EMBEDDED_KAFKA_TRIM_INTERVAL,
	// default 30s).
	TrimInterval time.Duration
	// Log receives the embedded broker's lines and its trimmer's (nil: slog.Default()).
	// Not from the environment: the process sets its logger naming role broker.
	Log *slog.Logger
}

// ConfigFromEnv reads the SVC_* variables named on each field.
func ConfigFromEnv(r *settings.Reader) Config {
	return Config{
		Brokers:      r.List("SVC_KAFKA_BROKERS"),
		EmbeddedAddr: r.String("SVC_EMBEDDED_KAFKA_ADDR"),
		DataDir:      r.String("SVC_DATA_DIR"),
		Partitions:   r.Int("SVC_KAFKA_PARTITIONS"),
		SyncWrites:   r.Bool("SVC_EMBEDDED_KAFKA_FSYNC"),
		Retain:       r.Duration("SVC_EMBEDDED_KAFKA_RETAIN"),
		TrimInterval: r.Duration("SVC_EMBEDDED_KAFKA_TRIM_INTERVAL"),
	}
}

// Validate reports every field that cannot work, all at once.
func (c Config) Validate() error {
	var errs []error
	if len(c.Brokers) == 0 {
		if _, _, err := net.SplitHostPort(c.EmbeddedAddr); err != nil {
			errs = append(errs, fmt.Errorf("SVC_EMBEDDED_KAFKA_ADDR %q: %v", c.EmbeddedAddr, err))
		}
	}
	if c.Partitions < 1 || c.Partitions > 1024 {
		errs = append(errs, fmt.Errorf("SVC_KAFKA_PARTITIONS %d: want 1..1024", c.Partitions))
	}
	if c.Retain < 0 {
		errs = append(errs, fmt.Errorf("SVC_EMBEDDED_KAFKA_RETAIN %s: want 0 (off) or more", c.Retain))
	}
	if c.Retain > 0 && c.TrimInterval < 10*time.Millisecond {
		errs = append(errs, fmt.Errorf("SVC_EMBEDDED_KAFKA_TRIM_INTERVAL %s: want at least 10ms", c.TrimInterval))
	}
	return errors.Join(errs...)
}

// ConnectTo returns the brokers a process that runs no broker of its own connects to:
// Brokers, or else the address of the embedded broker another process runs (svc broker,
// svc ingest, svc dev).
func (c Config) ConnectTo() []string {
	if len(c.Brokers) > 0 {
		return c.Brokers
	}
	return []string{c.EmbeddedAddr}
}

func (c Config) log() *slog.Logger {
	if c.Log != nil {
		return c.Log
	}
	return slog.Default()
}

// Embedded is a running in-process broker.
type Embedded struct {
	cluster  *kfake.Cluster
	stopTrim func()
}

// Addrs returns the addresses the broker listens on.
func (e *Embedded) Addrs() []string { return e.cluster.ListenAddrs() }

// Close stops the broker and writes its state to disk.
func (e *Embedded) Close() {
	if e.stopTrim != nil {
		e.stopTrim()
	}
	e.cluster.Close()
}

// Cluster exposes the kfake cluster for fault injection in tests.
func (e *Embedded) Cluster() *kfake.Cluster { return e.cluster }

// StartEmbedded starts a kfake broker per c, creating topics (each with c.Partitions
// partitions) at once; others are created when first asked for.
func StartEmbedded(c Config, topics ...string) (*Embedded, error) {
	host, portStr, err := net.SplitHostPort(c.EmbeddedAddr)
	if err != nil {
		return nil, fmt.Errorf("embedded kafka address %q: %w", c.EmbeddedAddr, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return nil, fmt.Errorf("embedded kafka port %q: %w", portStr, err)
	}
	opts := []kfake.Opt{
		kfake.Ports(port),
		kfake.ListenFn(func(network, _ string) (net.Listener, error) {
			return listenInProcess(network, net.JoinHostPort(host, strconv.Itoa(port)))
		}),
		kfake.AllowAutoTopicCreation(),
		kfake.DefaultNumPartitions(c.Partitions),
		kfake.SeedTopics(int32(c.Partitions), topics...),
		kfake.GroupMinSessionTimeout(time.Second),
		kfake.WithLogger(logs.Kfake(c.log())),
	}
	var logDir string
	if c.DataDir != "" {
		logDir = filepath.Join(c.DataDir, "kafka")
		opts = append(opts, kfake.DataDir(logDir))
	}
	if c.SyncWrites {
		opts = append(opts, kfake.SyncWrites())
	}
	cl, err := kfake.NewCluster(opts...)
	if err != nil {
		return nil, fmt.Errorf("start embedded kafka on %s: %w", c.EmbeddedAddr, err)
	}
	e := &Embedded{cluster: cl}
	if c.Retain > 0 {
		hold, err := newSegmentHold(logDir, filepath.Join(c.DataDir, "kafka-trimmed"))
		if err == nil {
			e.stopTrim, err = startTrimmer(cl.ListenAddrs(), hold, c.Retain, c.TrimInterval, c.log())
		}
		if err != nil {
			cl.Close()
			return nil, fmt.Errorf("embedded kafka trimmer: %w", err)
		}
	}
	return e, nil
}

// Seeds returns the brokers to connect to: Config.Brokers, or the address of an embedded
// broker started here with topics (stop it with the returned function, after every
// client using it has closed).
func Seeds(c Config, topics ...string) ([]string, func(), error) {
	if err := c.Validate(); err != nil {
		return nil, nil, err
	}
	if len(c.Brokers) > 0 {
		return c.Brokers, func() {}, nil
	}
	e, err := StartEmbedded(c, topics...)
	if err != nil {
		return nil, nil, err
	}
	return e.Addrs(), e.Close, nil
}

// Role starts the brokers' side of a process: it returns the seeds and a role whose
// Close stops an embedded broker (list it first, so it closes after every client).
func Role(c Config, topics ...string) ([]string, process.Role, error) {
	seeds, stop, err := Seeds(c, topics...)
	if err != nil {
		return nil, process.Role{}, err
	}
	return seeds, process.Role{Name: "broker", Close: func(context.Context) error { stop(); return nil }}, nil
}
