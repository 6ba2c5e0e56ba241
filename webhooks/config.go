package webhooks

import (
	"cmp"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"svc/lib/chpool"
	"svc/lib/settings"
	"svc/schema/webhook"
)

// Config is the webhooks role's configuration. ConfigFromEnv reads it; Validate checks it.
type Config struct {
	// InboundMaxBody is the largest inbound body accepted; larger ones get 413 before
	// parsing (SVC_WEBHOOKS_INBOUND_MAX_BODY, default 262144 = 256 KiB).
	InboundMaxBody int
	// Tolerance is how far a signature timestamp may be from our clock, either way
	// (SVC_WEBHOOKS_TOLERANCE, default 300s).
	Tolerance time.Duration
	// ReplayWindow is how long a processed inbound message id is remembered: a repeat
	// within it is ignored (SVC_WEBHOOKS_REPLAY_WINDOW, default 720h = 30 days).
	ReplayWindow time.Duration
	// InboundFailureBurst is how many refused messages (and replays) one client
	// address may send at once; past them it gets 429 until its bucket refills
	// (SVC_WEBHOOKS_INBOUND_FAILURE_BURST, default 20).
	InboundFailureBurst int
	// InboundFailuresPerMinute is the rate the bucket refills at
	// (SVC_WEBHOOKS_INBOUND_FAILURES_PER_MINUTE, default 6).
	InboundFailuresPerMinute int
	// InboundRetention is how long inbound log rows are kept at least; whole months
	// are dropped (SVC_WEBHOOKS_INBOUND_RETENTION, default 720h = 30 days; 0 keeps
	// everything).
	InboundRetention time.Duration
	// SecretOverlap is how long the previous inbound secret stays valid after
	// `svc admin webhook inbound-secret` issues a new one (SVC_WEBHOOKS_SECRET_OVERLAP,
	// default 24h).
	SecretOverlap time.Duration

	// Schedule is the delay before each attempt, from the previous one
	// (SVC_WEBHOOKS_SCHEDULE, comma-separated durations). Its length is the number of
	// attempts. The default makes each attempt at once, then 5 s, 5 min, 30 min, 2 h,
	// 5 h, 10 h, 14 h, 20 h, 24 h after the previous one: ten attempts over about three
	// days (75 h 35 min before jitter).
	Schedule []time.Duration
	// Jitter spreads each delay by up to ± this fraction (SVC_WEBHOOKS_JITTER_PERMILLE,
	// thousandths: default 100 = 0.1).
	Jitter float64
	// Timeout bounds one attempt: connect, send, and the answer's status line
	// (SVC_WEBHOOKS_TIMEOUT, default 15s).
	Timeout time.Duration
	// Lease is how long a claimed attempt belongs to one worker; a worker that dies
	// mid-attempt leaves it to another after this (SVC_WEBHOOKS_LEASE, default 60s;
	// more than Timeout).
	Lease time.Duration
	// MaxRetryAfter caps a receiver's Retry-After (SVC_WEBHOOKS_MAX_RETRY_AFTER, 24h).
	MaxRetryAfter time.Duration
	// DisableAfter disables an endpoint whose deliveries have failed without a single
	// success for this long (SVC_WEBHOOKS_DISABLE_AFTER, default 72h).
	DisableAfter time.Duration
	// Poll is how often the worker looks for due attempts (SVC_WEBHOOKS_POLL, 1s).
	Poll time.Duration
	// Concurrency is the number of attempts in flight per process
	// (SVC_WEBHOOKS_CONCURRENCY, default 8).
	Concurrency int
	// AllowNets are internal ranges deliveries may reach (SVC_WEBHOOKS_ALLOW_NETS,
	// comma-separated CIDRs or addresses; default none). Egress says what is internal;
	// cloud-metadata addresses stay refused whatever this says.
	AllowNets []netip.Prefix

	// ScanInterval is how often the triggers look for closed days and expiring keys
	// (SVC_WEBHOOKS_SCAN_INTERVAL, default 1m).
	ScanInterval time.Duration
	// DayGrace is how long after a UTC day ends it becomes final, unless the rollup
	// package says otherwise (SVC_WEBHOOKS_DAY_GRACE, default 1h).
	DayGrace time.Duration
	// KeyExpiringWithin is the notice given before a key expires
	// (SVC_WEBHOOKS_KEY_EXPIRING_WITHIN, default 168h = 7 days).
	KeyExpiringWithin time.Duration

	// Prefix is prepended to every Redis key of this package (SVC_WEBHOOKS_REDIS_PREFIX,
	// default "svc:wh:"). Tests use a unique one.
	Prefix string
	// Worker names this process in the delivery log (SVC_WEBHOOKS_WORKER, default the
	// host name and pid).
	Worker string

	// ClickHouse holds the inbound and delivery logs and the actuals (SVC_CLICKHOUSE_*).
	ClickHouse chpool.Config
}

// DefaultConfig returns the defaults of lib/settings's table (the worker named after
// this host and process).
func DefaultConfig() Config { return ConfigFromEnv(settings.Defaults()) }

// ConfigFromEnv reads the SVC_WEBHOOKS_* variables named on each field.
func ConfigFromEnv(r *settings.Reader) Config {
	c := Config{
		InboundMaxBody:           r.Int("SVC_WEBHOOKS_INBOUND_MAX_BODY"),
		Tolerance:                r.Duration("SVC_WEBHOOKS_TOLERANCE"),
		ReplayWindow:             r.Duration("SVC_WEBHOOKS_REPLAY_WINDOW"),
		SecretOverlap:            r.Duration("SVC_WEBHOOKS_SECRET_OVERLAP"),
		InboundFailureBurst:      r.Int("SVC_WEBHOOKS_INBOUND_FAILURE_BURST"),
		InboundFailuresPerMinute: r.Int("SVC_WEBHOOKS_INBOUND_FAILURES_PER_MINUTE"),
		InboundRetention:         r.Duration("SVC_WEBHOOKS_INBOUND_RETENTION"),
		Jitter:                   float64(r.Int("SVC_WEBHOOKS_JITTER_PERMILLE")) / 1000,
		Timeout:                  r.Duration("SVC_WEBHOOKS_TIMEOUT"),
		Lease:                    r.Duration("SVC_WEBHOOKS_LEASE"),
		MaxRetryAfter:            r.Duration("SVC_WEBHOOKS_MAX_RETRY_AFTER"),
		DisableAfter:             r.Duration("SVC_WEBHOOKS_DISABLE_AFTER"),
		Poll:                     r.Duration("SVC_WEBHOOKS_POLL"),
		Concurrency:              r.Int("SVC_WEBHOOKS_CONCURRENCY"),
		ScanInterval:             r.Duration("SVC_WEBHOOKS_SCAN_INTERVAL"),
		DayGrace:                 r.Duration("SVC_WEBHOOKS_DAY_GRACE"),
		KeyExpiringWithin:        r.Duration("SVC_WEBHOOKS_KEY_EXPIRING_WITHIN"),
		Prefix:                   r.String("SVC_WEBHOOKS_REDIS_PREFIX"),
		Worker:                   cmp.Or(r.String("SVC_WEBHOOKS_WORKER"), defaultWorker()),
		ClickHouse:               chpool.ConfigFromEnv(r),
	}
	for _, s := range r.List("SVC_WEBHOOKS_SCHEDULE") {
		v, err := time.ParseDuration(s)
		if err != nil {
			v = -1 // reported by Validate
		}
		c.Schedule = append(c.Schedule, v)
	}
	for _, s := range r.List("SVC_WEBHOOKS_ALLOW_NETS") {
		c.AllowNets = append(c.AllowNets, webhook.ParseNet(s)) // an invalid one is reported by Validate
	}
	return c
}

// Egress is the delivery address policy this configuration makes.
func (c Config) Egress() Egress { return Egress{Allow: c.AllowNets} }

// Validate reports every field that cannot work.
func (c Config) Validate() error {
	var errs []error
	if c.InboundMaxBody < 1024 {
		errs = append(errs, fmt.Errorf("SVC_WEBHOOKS_INBOUND_MAX_BODY %d: want at least 1024", c.InboundMaxBody))
	}
	if c.Tolerance < time.Second {
		errs = append(errs, fmt.Errorf("SVC_WEBHOOKS_TOLERANCE %s: want at least 1s", c.Tolerance))
	}
	if c.InboundFailureBurst < 1 || c.InboundFailureBurst > 10000 {
		errs = append(errs, fmt.Errorf("SVC_WEBHOOKS_INBOUND_FAILURE_BURST %d: want 1..10000", c.InboundFailureBurst))
	}
	if c.InboundFailuresPerMinute < 1 || c.InboundFailuresPerMinute > 60000 {
		errs = append(errs, fmt.Errorf("SVC_WEBHOOKS_INBOUND_FAILURES_PER_MINUTE %d: want 1..60000", c.InboundFailuresPerMinute))
	}
	if c.InboundRetention < 0 {
		errs = append(errs, errors.New("SVC_WEBHOOKS_INBOUND_RETENTION must not be negative"))
	}
	if len(c.Schedule) == 0 || len(c.Schedule) > 50 {
		errs = append(errs, errors.New("SVC_WEBHOOKS_SCHEDULE: want 1 to 50 durations"))
	}
	for _, d := range c.Schedule {
		if d < 0 {
			errs = append(errs, errors.New("SVC_WEBHOOKS_SCHEDULE: every entry must be a duration such as 5m, not negative"))
			break
		}
	}
	if c.Jitter < 0 || c.Jitter >= 1 {
		errs = append(errs, fmt.Errorf("SVC_WEBHOOKS_JITTER_PERMILLE: want 0..999, got %v", c.Jitter))
	}
	if c.Timeout <= 0 {
		errs = append(errs, errors.New("SVC_WEBHOOKS_TIMEOUT must be positive"))
	}
	if c.Lease <= c.Timeout {
		errs = append(errs, fmt.Errorf("SVC_WEBHOOKS_LEASE %s: want more than SVC_WEBHOOKS_TIMEOUT %s", c.Lease, c.Timeout))
	}
	for name, d := range map[string]time.Duration{"SVC_WEBHOOKS_REPLAY_WINDOW": c.ReplayWindow,
		"SVC_WEBHOOKS_SECRET_OVERLAP": c.SecretOverlap, "SVC_WEBHOOKS_MAX_RETRY_AFTER": c.MaxRetryAfter,
		"SVC_WEBHOOKS_DISABLE_AFTER": c.DisableAfter, "SVC_WEBHOOKS_POLL": c.Poll,
		"SVC_WEBHOOKS_SCAN_INTERVAL": c.ScanInterval, "SVC_WEBHOOKS_KEY_EXPIRING_WITHIN": c.KeyExpiringWithin} {
		if d <= 0 {
			errs = append(errs, fmt.Errorf("%s must be positive", name))
		}
	}
	if c.DayGrace < 0 {
		errs = append(errs, errors.New("SVC_WEBHOOKS_DAY_GRACE must not be negative"))
	}
	if c.Concurrency < 1 || c.Concurrency > 256 {
		errs = append(errs, fmt.Errorf("SVC_WEBHOOKS_CONCURRENCY %d: want 1..256", c.Concurrency))
	}
	for _, p := range c.AllowNets {
		if !p.IsValid() {
			errs = append(errs, errors.New("SVC_WEBHOOKS_ALLOW_NETS: every entry must be a CIDR range or an address"))
			break
		}
	}
	if c.Prefix == "" {
		errs = append(errs, errors.New("SVC_WEBHOOKS_REDIS_PREFIX must not be empty"))
	}
	return errors.Join(append(errs, c.ClickHouse.Validate())...)
}
