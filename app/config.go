package app

import (
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"time"

	"svc/lib/chpool"
	"svc/lib/settings"
	"svc/schema/webhook"
)

// Config is the application role's configuration (`svc app`, and in `svc dev`).
type Config struct {
	// PublicURL is the base URL people open (SVC_PUBLIC_URL, read by the HTTP front's
	// config; main.go copies it here): sign-in links, the curl line, and whether the
	// session cookie is Secure (an https URL) derive from it.
	PublicURL string
	// SessionTTL is how long a session lasts from its sign-in (SVC_APP_SESSION_TTL,
	// default 12h; 5m..720h).
	SessionTTL time.Duration
	// SignInAttempts is how many failed sign-in attempts one email may make per
	// ThrottleWindow (SVC_APP_SIGNIN_ATTEMPTS, default 10; 1..1000).
	SignInAttempts int
	// AddressAttempts is the same bound per client address, unknown or used sign-in
	// links counted too (SVC_APP_ADDRESS_ATTEMPTS, default 50; 1..100000).
	AddressAttempts int
	// ThrottleWindow is the window of both bounds (SVC_APP_THROTTLE_WINDOW, default 15m;
	// 1s..24h).
	ThrottleWindow time.Duration
	// AuditRetention is how long audit-log entries are kept (SVC_APP_AUDIT_RETENTION,
	// default 9600h = 400 days; at least 24h). `svc admin` reads it too.
	AuditRetention time.Duration
	// ClickHouse holds the rollups the pixel screens chart (SVC_CLICKHOUSE_*).
	ClickHouse chpool.Config
	// Webhooks is where the webhooks role keeps its state (SVC_WEBHOOKS_REDIS_PREFIX)
	// and the internal ranges endpoints may be at (SVC_WEBHOOKS_ALLOW_NETS): the
	// Webhooks screens read and change the same state, under the same policy.
	Webhooks WebhookConfig
}

// WebhookConfig is what the Webhooks screens read of the webhooks role's settings.
type WebhookConfig struct {
	Prefix    string
	AllowNets []netip.Prefix
}

// ConfigFromEnv reads the SVC_APP_* variables named on each field and ClickHouse's;
// PublicURL is the HTTP front's (httpserver.Config.PublicURL), set by the caller.
func ConfigFromEnv(r *settings.Reader) Config {
	return Config{SessionTTL: r.Duration("SVC_APP_SESSION_TTL"), SignInAttempts: r.Int("SVC_APP_SIGNIN_ATTEMPTS"),
		AddressAttempts: r.Int("SVC_APP_ADDRESS_ATTEMPTS"), ThrottleWindow: r.Duration("SVC_APP_THROTTLE_WINDOW"),
		AuditRetention: r.Duration("SVC_APP_AUDIT_RETENTION"), ClickHouse: chpool.ConfigFromEnv(r),
		Webhooks: webhookConfigFromEnv(r)}
}

func webhookConfigFromEnv(r *settings.Reader) WebhookConfig {
	c := WebhookConfig{Prefix: r.String("SVC_WEBHOOKS_REDIS_PREFIX")}
	for _, s := range r.List("SVC_WEBHOOKS_ALLOW_NETS") {
		c.AllowNets = append(c.AllowNets, webhook.ParseNet(s)) // an invalid one is reported by Validate
	}
	return c
}

// Validate reports every field that cannot work, all at once. PublicURL is checked by
// the HTTP front's config; an empty one is left for the caller to set.
func (c Config) Validate() error {
	var errs []error
	if c.SessionTTL < 5*time.Minute || c.SessionTTL > 720*time.Hour {
		errs = append(errs, fmt.Errorf("SVC_APP_SESSION_TTL %s: want 5m..720h", c.SessionTTL))
	}
	if c.SignInAttempts < 1 || c.SignInAttempts > 1000 {
		errs = append(errs, fmt.Errorf("SVC_APP_SIGNIN_ATTEMPTS %d: want 1..1000", c.SignInAttempts))
	}
	if c.AddressAttempts < 1 || c.AddressAttempts > 100000 {
		errs = append(errs, fmt.Errorf("SVC_APP_ADDRESS_ATTEMPTS %d: want 1..100000", c.AddressAttempts))
	}
	if c.ThrottleWindow < time.Second || c.ThrottleWindow > 24*time.Hour {
		errs = append(errs, fmt.Errorf("SVC_APP_THROTTLE_WINDOW %s: want 1s..24h", c.ThrottleWindow))
	}
	if err := CheckAuditRetention(c.AuditRetention); err != nil {
		errs = append(errs, err)
	}
	if c.PublicURL != "" {
		if u, err := url.Parse(c.PublicURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, fmt.Errorf("SVC_PUBLIC_URL %q: want an http or https URL", c.PublicURL))
		}
	}
	if c.Webhooks.Prefix == "" {
		errs = append(errs, errors.New("SVC_WEBHOOKS_REDIS_PREFIX must not be empty"))
	}
	for _, p := range c.Webhooks.AllowNets {
		if !p.IsValid() {
			errs = append(errs, errors.New("SVC_WEBHOOKS_ALLOW_NETS: every entry must be a CIDR range or an address"))
			break
		}
	}
	return errors.Join(append(errs, c.ClickHouse.Validate())...)
}

// secure reports whether the application is served over TLS (its cookies are then
// Secure and carry the __Host- prefix).
func (c Config) secure() bool {
	u, err := url.Parse(c.PublicURL)
	return err == nil && u.Scheme == "https"
}

// plainOverNetwork reports whether the application is served over plain http on a
// host other than a loopback one (localhost, 127.0.0.0/8, ::1): its cookies then travel
// without Secure over a network, which New warns of at start.
func (c Config) plainOverNetwork() bool {
	u, err := url.Parse(c.PublicURL)
	if err != nil || u.Scheme != "http" {
		return false
	}
	host := u.Hostname()
	if host == "localhost" {
		return false
	}
	ip, err := netip.ParseAddr(host)
	return err != nil || !ip.IsLoopback()
}

// CheckAuditRetention refuses an audit-log retention under a day: every change written
// trims the workspace's log to it (XADD MINID), so a short one deletes the log. The
// application and `svc admin` (which writes to the same logs) both check it.
func CheckAuditRetention(d time.Duration) error {
	if d < 24*time.Hour {
		return fmt.Errorf("SVC_APP_AUDIT_RETENTION %s: want at least 24h", d)
	}
	return nil
}
