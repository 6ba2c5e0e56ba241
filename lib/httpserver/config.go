package httpserver

import (
	"cmp"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"time"

	"svc/lib/settings"
)

// Config is the HTTP side of every role: where it listens, how it names itself, and
// how patient it is with clients. (Metrics, Redis and logging are the process's:
// lib/process.Config.)
type Config struct {
	// HTTPAddr is the listen address (SVC_HTTP_ADDR, default 127.0.0.1:8080).
	HTTPAddr string
	// PublicURL is the base URL clients use (SVC_PUBLIC_URL, default http://HTTPAddr).
	// Problem types, doc_url and discovery documents are built from it.
	PublicURL string
	// TrustedProxies are addresses or CIDR ranges whose X-Forwarded-For is believed
	// (SVC_TRUSTED_PROXIES, comma-separated; default none: the peer address is the
	// client address).
	TrustedProxies []netip.Prefix
	// MaxBodyBytes caps request bodies; larger ones get 413 before parsing
	// (SVC_MAX_BODY_BYTES, default 1 MiB).
	MaxBodyBytes int
	// MaxInflightBodyBytes bounds the request-body bytes the process holds at once, over
	// every connection (SVC_MAX_INFLIGHT_BODY_BYTES, default 64 MiB; at least
	// MaxBodyBytes). Bodies are read only after the key is checked, into buffers that grow
	// with the bytes received; a request that would pass this bound gets 503
	// service_unavailable with Retry-After instead.
	MaxInflightBodyBytes int
	// MaxInflightPublicBodyBytes bounds, apart from MaxInflightBodyBytes, the body bytes
	// held at once by requests no key has vouched for: the bodies of public routes that
	// take one (the inbound webhook receiver, which checks its signature after reading)
	// (SVC_MAX_INFLIGHT_PUBLIC_BODY_BYTES, default 4 MiB; at least 4 KiB, one buffer).
	// Anonymous clients can fill this budget, never the authenticated one; past it a
	// public request gets 503 service_unavailable with Retry-After.
	MaxInflightPublicBodyBytes int
	// MaxConnsPerIP bounds the open connections from one client address (an IPv6 client
	// by its /64) (SVC_MAX_CONNS_PER_IP, default 1024; 0 disables it). Trusted proxies
	// (TrustedProxies) are exempt. A connection past it is answered 429 rate_limited and
	// closed.
	MaxConnsPerIP int
	// ReadTimeout bounds reading one request, headers and body (SVC_READ_TIMEOUT, 10s).
	ReadTimeout time.Duration
	// WriteTimeout bounds writing one response (SVC_WRITE_TIMEOUT, 10s).
	WriteTimeout time.Duration
	// IdleTimeout closes keep-alive connections idle this long (SVC_IDLE_TIMEOUT, 60s).
	IdleTimeout time.Duration
	// ShutdownTimeout bounds draining in-flight requests on SIGTERM
	// (SVC_SHUTDOWN_TIMEOUT, 20s).
	ShutdownTimeout time.Duration
	// KeyCacheTTL bounds how stale a key record may be in this process, and so how long
	// a revocation takes to reach it (SVC_KEY_CACHE_TTL, 500ms; at most 1s).
	KeyCacheTTL time.Duration
	// IdempotencyPendingTTL is how long an Idempotency-Key stays reserved when the
	// process that took it died before answering (SVC_IDEMPOTENCY_PENDING_TTL, 60s):
	// retries meanwhile get idempotency_key_in_use.
	IdempotencyPendingTTL time.Duration
	// RedisAutoPipeline batches the hot path's Redis commands (the rate-limit and
	// idempotency script of each request, and the stored answer) from concurrent requests
	// into shared pipelined round trips (SVC_REDIS_AUTOPIPELINE, default true): fewer
	// system calls on both sides, at the cost of waiting for the batch in flight.
	RedisAutoPipeline bool
	// RedisFullDuplex, with RedisAutoPipeline, streams those commands over one held
	// connection per Redis node, each written as it comes and answered as Redis replies
	// (a writer and a reader goroutine), instead of one batch per round trip that the
	// next batch waits for (SVC_REDIS_FULL_DUPLEX, default true). Requests then wait for
	// their own reply, not for a whole batch: at 4,000 req/s on two cores the median
	// request fell from 6.3 to 4.2 ms (bench/HISTORY.md), for about 0.04 more cores of
	// svc and 0.03 of Redis (smaller batches). Without RedisAutoPipeline it does nothing.
	RedisFullDuplex bool
	// GateCallsInFlight bounds the gate's Redis calls in flight at once
	// (SVC_GATE_CALLS_IN_FLIGHT, default 2; 0: no bound, one call per request): on one
	// Redis server all of them, on a Redis Cluster those of each hash slot of the keys'
	// windows. A request that finds them all in flight waits for one to return, and the
	// requests that waited go out together as one call (reserve_gate gates several
	// requests, each as its own call would): under load Redis spends less per request
	// (reading the record directories and the windows once a call), and on a cluster one
	// API key's windows, all on one master, take a call per batch instead of per request,
	// for a wait of at most one call. An idle server is not slowed. On a cluster an
	// Idempotency-Key's reservation is a call of its own, on its record's master.
	GateCallsInFlight int
}

// ConfigFromEnv reads the SVC_* variables named on each field.
func ConfigFromEnv(r *settings.Reader) Config {
	c := Config{
		HTTPAddr:                   r.String("SVC_HTTP_ADDR"),
		MaxBodyBytes:               r.Int("SVC_MAX_BODY_BYTES"),
		MaxInflightBodyBytes:       r.Int("SVC_MAX_INFLIGHT_BODY_BYTES"),
		MaxInflightPublicBodyBytes: r.Int("SVC_MAX_INFLIGHT_PUBLIC_BODY_BYTES"),
		MaxConnsPerIP:              r.Int("SVC_MAX_CONNS_PER_IP"),
		ReadTimeout:                r.Duration("SVC_READ_TIMEOUT"),
		WriteTimeout:               r.Duration("SVC_WRITE_TIMEOUT"),
		IdleTimeout:                r.Duration("SVC_IDLE_TIMEOUT"),
		ShutdownTimeout:            r.Duration("SVC_SHUTDOWN_TIMEOUT"),
		KeyCacheTTL:                r.Duration("SVC_KEY_CACHE_TTL"),
		IdempotencyPendingTTL:      r.Duration("SVC_IDEMPOTENCY_PENDING_TTL"),
		RedisAutoPipeline:          r.Bool("SVC_REDIS_AUTOPIPELINE"),
		RedisFullDuplex:            r.Bool("SVC_REDIS_FULL_DUPLEX"),
		GateCallsInFlight:          r.Int("SVC_GATE_CALLS_IN_FLIGHT"),
	}
	c.PublicURL = strings.TrimRight(cmp.Or(r.String("SVC_PUBLIC_URL"), "http://"+c.HTTPAddr), "/")
	for _, s := range r.List("SVC_TRUSTED_PROXIES") {
		p, err := parsePrefix(s)
		if err != nil {
			c.TrustedProxies = append(c.TrustedProxies, netip.Prefix{}) // reported by Validate
			continue
		}
		c.TrustedProxies = append(c.TrustedProxies, p)
	}
	return c
}

func parsePrefix(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		return netip.ParsePrefix(s)
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// Validate reports every field that cannot work, all at once.
func (c Config) Validate() error {
	var errs []error
	if _, _, err := net.SplitHostPort(c.HTTPAddr); err != nil {
		errs = append(errs, fmt.Errorf("SVC_HTTP_ADDR %q: %v", c.HTTPAddr, err))
	}
	for _, p := range c.TrustedProxies {
		if !p.IsValid() {
			errs = append(errs, errors.New("SVC_TRUSTED_PROXIES: every entry must be an address or CIDR range"))
			break
		}
	}
	if c.GateCallsInFlight < 0 {
		errs = append(errs, fmt.Errorf("SVC_GATE_CALLS_IN_FLIGHT %d: want 0 (no bound) or more", c.GateCallsInFlight))
	}
	if c.MaxBodyBytes < 1024 {
		errs = append(errs, fmt.Errorf("SVC_MAX_BODY_BYTES %d: want at least 1024", c.MaxBodyBytes))
	}
	if c.MaxInflightBodyBytes < c.MaxBodyBytes {
		errs = append(errs, fmt.Errorf("SVC_MAX_INFLIGHT_BODY_BYTES %d: want at least SVC_MAX_BODY_BYTES (%d)", c.MaxInflightBodyBytes, c.MaxBodyBytes))
	}
	if c.MaxInflightPublicBodyBytes < bodyChunk {
		errs = append(errs, fmt.Errorf("SVC_MAX_INFLIGHT_PUBLIC_BODY_BYTES %d: want at least %d (one body buffer)", c.MaxInflightPublicBodyBytes, bodyChunk))
	}
	if c.MaxConnsPerIP < 0 {
		errs = append(errs, fmt.Errorf("SVC_MAX_CONNS_PER_IP %d: want 0 (no limit) or more", c.MaxConnsPerIP))
	}
	if c.IdempotencyPendingTTL < time.Second {
		errs = append(errs, fmt.Errorf("SVC_IDEMPOTENCY_PENDING_TTL %s: want at least 1s", c.IdempotencyPendingTTL))
	}
	if c.KeyCacheTTL <= 0 || c.KeyCacheTTL > time.Second {
		errs = append(errs, fmt.Errorf("SVC_KEY_CACHE_TTL %s: want more than 0 and at most 1s (revocations must apply within a second)", c.KeyCacheTTL))
	}
	for _, d := range []struct {
		name string
		d    time.Duration
	}{{"SVC_READ_TIMEOUT", c.ReadTimeout}, {"SVC_WRITE_TIMEOUT", c.WriteTimeout}, {"SVC_IDLE_TIMEOUT", c.IdleTimeout}, {"SVC_SHUTDOWN_TIMEOUT", c.ShutdownTimeout}} {
		if d.d <= 0 {
			errs = append(errs, fmt.Errorf("%s must be positive", d.name))
		}
	}
	return errors.Join(errs...)
}

// DocsURL is the developer pages' base URL.
func (c Config) DocsURL() string { return c.PublicURL + "/developers" }
