package privacy

import (
	"errors"
	"fmt"
	"time"

	"svc/lib/chpool"
	"svc/lib/settings"
)

// Config of the privacy worker (SVC_PRIVACY_*).
type Config struct {
	// Poll is how often the worker looks for erasures to run (SVC_PRIVACY_POLL, 2s).
	Poll time.Duration
	// Batch is the most erasures run together, with one mutation of events and one
	// rebuild per rollup table (SVC_PRIVACY_BATCH, 100).
	Batch int
	// MutationTimeout bounds the wait for one mutation; past it the run fails and the
	// next one resumes (SVC_PRIVACY_MUTATION_TIMEOUT, 1h).
	MutationTimeout time.Duration
	// HoldLease is how long pixels stay held while their rollups are rebuilt; the
	// worker extends it before inserting (SVC_PRIVACY_HOLD_LEASE, 5m).
	HoldLease time.Duration
	// RetentionInterval is how often raw events past their workspace's retention are
	// removed (SVC_PRIVACY_RETENTION_INTERVAL, 1h).
	RetentionInterval time.Duration
	// KeepIdentities is how long an identity erased without suppression stays in the
	// pipeline's list (events received before the request may still be in Kafka, which
	// keeps records 7 days) (SVC_PRIVACY_KEEP_IDENTITIES, 192h).
	KeepIdentities time.Duration
	// ClickHouse is where the events and rollups are (SVC_CLICKHOUSE_*); the worker
	// opens a pool of its own (Open).
	ClickHouse chpool.Config
}

// ConfigFromEnv reads the SVC_PRIVACY_* and SVC_CLICKHOUSE_* variables.
func ConfigFromEnv(r *settings.Reader) Config {
	return Config{
		Poll:              r.Duration("SVC_PRIVACY_POLL"),
		Batch:             r.Int("SVC_PRIVACY_BATCH"),
		MutationTimeout:   r.Duration("SVC_PRIVACY_MUTATION_TIMEOUT"),
		HoldLease:         r.Duration("SVC_PRIVACY_HOLD_LEASE"),
		RetentionInterval: r.Duration("SVC_PRIVACY_RETENTION_INTERVAL"),
		KeepIdentities:    r.Duration("SVC_PRIVACY_KEEP_IDENTITIES"),
		ClickHouse:        chpool.ConfigFromEnv(r),
	}
}

// Validate reports a configuration that cannot work.
func (c Config) Validate() error {
	var errs []error
	if c.Poll < 10*time.Millisecond || c.Poll > time.Hour {
		errs = append(errs, fmt.Errorf("SVC_PRIVACY_POLL %v: want 10ms..1h", c.Poll))
	}
	if c.Batch < 1 || c.Batch > 1000 {
		errs = append(errs, fmt.Errorf("SVC_PRIVACY_BATCH %d: want 1..1000", c.Batch))
	}
	if c.MutationTimeout < time.Second {
		errs = append(errs, fmt.Errorf("SVC_PRIVACY_MUTATION_TIMEOUT %v: want at least 1s", c.MutationTimeout))
	}
	if c.HoldLease < 10*time.Second {
		errs = append(errs, fmt.Errorf("SVC_PRIVACY_HOLD_LEASE %v: want at least 10s", c.HoldLease))
	}
	if c.RetentionInterval < time.Second {
		errs = append(errs, fmt.Errorf("SVC_PRIVACY_RETENTION_INTERVAL %v: want at least 1s", c.RetentionInterval))
	}
	if c.KeepIdentities < 7*24*time.Hour {
		errs = append(errs, fmt.Errorf("SVC_PRIVACY_KEEP_IDENTITIES %v: want at least 168h (Kafka's retention)", c.KeepIdentities))
	}
	return errors.Join(append(errs, c.ClickHouse.Validate())...)
}
