// Package client is a Go client of the svc API for customers' backends. Beside the
// standard library it uses only svc/lib/problem and svc/lib/signature, which use only
// the standard library.
//
//   - Writes (SendEvents, ImportActuals) carry one Idempotency-Key per logical call,
//     generated unless given, and send that same key on every retry: a retry never
//     counts a batch twice.
//   - Network errors and problems with "retryable": true are retried with exponential
//     backoff and jitter, at most MaxAttempts attempts, waiting Retry-After when the
//     server sends it (up to MaxRetryAfter: a longer one returns the problem at once); a
//     problem that is not retryable is returned at once.
//   - Pacing: the RateLimit-Policy, RateLimit-Remaining and RateLimit-Reset headers of
//     each response are remembered; when few requests remain, the next request waits
//     the window's refill interval (or the reset, when none remain), so a busy client
//     slows down before the server has to refuse it.
//   - Failures are *Problem errors carrying the RFC 9457 problem document.
//   - Lists are read with an Iterator that follows meta.next_cursor.
//   - VerifyWebhook checks an SVC-Signature header.
//
// A Client is safe for concurrent use.
package client

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	mrand "math/rand/v2"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"svc/lib/problem"
)

// Client calls the API at BaseURL with one API key.
type Client struct {
	// BaseURL is the API's base URL, with the version segment
	// (https://api.example.com/v1): the discovery document's base_url.
	BaseURL string
	// HTTP sends the requests (http.DefaultClient with a 30 s timeout when nil).
	HTTP *http.Client
	// MaxAttempts bounds the attempts of one call, the first included (default 5). For
	// it and the three delays below, 0 or less means the default.
	MaxAttempts int
	// BaseDelay is the first backoff delay without Retry-After (default 500 ms); each
	// further retry doubles it, up to MaxDelay (default 30 s), with full jitter.
	BaseDelay, MaxDelay time.Duration
	// MaxRetryAfter bounds how long a Retry-After is honoured before the call gives up
	// with the problem instead (default 2 minutes).
	MaxRetryAfter time.Duration
	// PaceBelow is the share of a window's quota under which requests are paced
	// (default 0.1; a negative value disables pacing).
	PaceBelow float64
	// UserAgent is sent on every request.
	UserAgent string

	key   string
	mu    sync.Mutex
	state rateState
	sleep func(ctx context.Context, d time.Duration) error
}

// rateState is what the last response said about the key's windows.
type rateState struct {
	known     bool
	at        time.Time
	limit     int
	remaining int
	reset     time.Duration
	interval  time.Duration // refill interval of the window described (w/q)
}

// New returns a client of baseURL (the discovery document's base_url) with key.
func New(baseURL, key string) *Client {
	return &Client{BaseURL: strings.TrimRight(baseURL, "/"), key: key, UserAgent: "svc-go-client/1"}
}

func (c *Client) httpClient() *http.Client {
	if c.HTTP != nil {
		return c.HTTP
	}
	return defaultHTTP
}

var defaultHTTP = &http.Client{Timeout: 30 * time.Second}

func orDefault[T int | float64 | time.Duration](v, d T) T {
	if v == 0 {
		return d
	}
	return v
}

// positiveOr is v, or d when v is unset or negative (a count or a delay below zero
// means nothing).
func positiveOr[T int | time.Duration](v, d T) T {
	if v <= 0 {
		return d
	}
	return v
}

// Problem is an API failure: the RFC 9457 problem document (the service's own type,
// svc/lib/problem), its HTTP status and Retry-After.
type Problem struct {
	problem.Problem
	// RetryAfter is the response's Retry-After (0 when absent).
	RetryAfter time.Duration `json:"-"`
	// Raw is the document as received.
	Raw json.RawMessage `json:"-"`
}

// FieldError is one entry of a problem's errors[].
type FieldError = problem.FieldError

func (p *Problem) Error() string {
	s := fmt.Sprintf("svc: %d %s: %s", p.Status, p.Code, p.Detail)
	if p.RequestID != "" {
		s += " (" + p.RequestID + ")"
	}
	return s
}

// Response is a successful answer.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
	// Replayed is true when the server answered from an earlier request with the same
	// Idempotency-Key (Idempotent-Replayed: true).
	Replayed bool
	// Attempts is the number of HTTP requests the call took.
	Attempts int
}

// Do sends method path (relative to BaseURL, with its query) with body (nil, or a value
// marshalled to JSON once and resent byte for byte on retries) and, when
// idempotencyKey is not empty, that Idempotency-Key on every attempt. It retries as
// the package comment says and returns the successful response or an error: a
// *Problem for an API failure, or the last transport error.
func (c *Client) Do(ctx context.Context, method, path string, body any, idempotencyKey string) (*Response, error) {
	var payload []byte
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, fmt.Errorf("svc: encoding the body: %w", err)
		}
		payload = b
	}
	attempts := positiveOr(c.MaxAttempts, 5)
	var lastErr error
	for attempt := 1; attempt <= attempts; attempt++ {
		if err := c.pace(ctx); err != nil {
			return nil, err
		}
		resp, err := c.once(ctx, method, path, payload, idempotencyKey)
		if err == nil {
			resp.Attempts = attempt
			return resp, nil
		}
		lastErr = err
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		wait, retry := c.retryDelay(err, attempt)
		if !retry || attempt == attempts {
			break
		}
		if err := c.wait(ctx, wait); err != nil {
			return nil, err
		}
	}
	return nil, lastErr
}

// retryDelay decides whether err is worth another attempt, and after how long.
func (c *Client) retryDelay(err error, attempt int) (time.Duration, bool) {
	var p *Problem
	if errors.As(err, &p) {
		if !p.Retryable {
			return 0, false
		}
		if p.RetryAfter > 0 {
			if p.RetryAfter > positiveOr(c.MaxRetryAfter, 2*time.Minute) {
				return 0, false
			}
			return p.RetryAfter, true
		}
	}
	base, maxD := positiveOr(c.BaseDelay, 500*time.Millisecond), positiveOr(c.MaxDelay, 30*time.Second)
	d := time.Duration(float64(base) * math.Pow(2, float64(attempt-1)))
	if d > maxD || d <= 0 {
		d = maxD
	}
	return time.Duration(mrand.Int64N(int64(d)) + 1), true // full jitter
}

func (c *Client) wait(ctx context.Context, d time.Duration) error {
	if c.sleep != nil {
		return c.sleep(ctx, d)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// pace waits before a request when the last response said few requests remain.
func (c *Client) pace(ctx context.Context) error {
	share := orDefault(c.PaceBelow, 0.1)
	if share < 0 {
		return nil
	}
	c.mu.Lock()
	st := c.state
	c.mu.Unlock()
	if !st.known || st.limit <= 0 {
		return nil
	}
	var d time.Duration
	switch {
	case st.remaining <= 0:
		d = st.interval
		if d <= 0 || d > st.reset {
			d = st.reset
		}
	case float64(st.remaining) < share*float64(st.limit):
		d = st.interval
	}
	d -= time.Since(st.at)
	if d <= 0 {
		return nil
	}
	return c.wait(ctx, d)
}

var policyEntry = regexp.MustCompile(`"([a-z]+)";q=(\d+);w=(\d+)`)

// refillInterval is w/q of the policy entry that RateLimit-Limit (limit) and
// RateLimit-Reset (reset, seconds) describe: of the entries with that quota, one whose
// window is at least reset long, the shortest (two windows may share a quota: a burst
// and a daily of 100 each; a reset under a minute is then the burst's), else 0.
func refillInterval(policy string, limit, reset int) time.Duration {
	best := time.Duration(0)
	for _, m := range policyEntry.FindAllStringSubmatch(policy, -1) {
		q, _ := strconv.Atoi(m[2])
		w, _ := strconv.Atoi(m[3])
		if q != limit || q <= 0 || w < reset {
			continue
		}
		if d := time.Duration(float64(w) / float64(q) * float64(time.Second)); best == 0 || d < best {
			best = d
		}
	}
	return best
}

// observe remembers what a response's RateLimit headers say.
func (c *Client) observe(h http.Header) {
	limit, err1 := strconv.Atoi(h.Get("RateLimit-Limit"))
	remaining, err2 := strconv.Atoi(h.Get("RateLimit-Remaining"))
	reset, err3 := strconv.Atoi(h.Get("RateLimit-Reset"))
	if err1 != nil || err2 != nil || err3 != nil {
		return
	}
	st := rateState{known: true, at: time.Now(), limit: limit, remaining: remaining, reset: time.Duration(reset) * time.Second}
	st.interval = refillInterval(h.Get("RateLimit-Policy"), limit, reset)
	c.mu.Lock()
	c.state = st
	c.mu.Unlock()
}

func (c *Client) once(ctx context.Context, method, path string, payload []byte, idemKey string) (*Response, error) {
	var body io.Reader
	if payload != nil {
		body = bytes.NewReader(payload)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.BaseURL+path, body)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.key)
	req.Header.Set("Accept", "application/json")
	if c.UserAgent != "" {
		req.Header.Set("User-Agent", c.UserAgent)
	}
	if payload != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if idemKey != "" {
		req.Header.Set("Idempotency-Key", idemKey)
	}
	resp, err := c.httpClient().Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, err
	}
	c.observe(resp.Header)
	if resp.StatusCode < 400 {
		return &Response{Status: resp.StatusCode, Header: resp.Header, Body: b,
			Replayed: resp.Header.Get("Idempotent-Replayed") == "true"}, nil
	}
	p := &Problem{Raw: b}
	if err := json.Unmarshal(b, p); err != nil || p.Code == "" {
		// Not a problem document (a proxy in between): retry 5xx, not 4xx.
		p = &Problem{Problem: problem.Problem{Status: resp.StatusCode, Code: problem.Code("http_" + strconv.Itoa(resp.StatusCode)),
			Detail: strings.TrimSpace(string(b)), Retryable: resp.StatusCode >= 500 || resp.StatusCode == 429}, Raw: b}
	}
	if p.Status == 0 {
		p.Status = resp.StatusCode
	}
	p.RetryAfter = retryAfter(resp.Header.Get("Retry-After"), time.Now())
	return nil, p
}

// retryAfter reads Retry-After: delay-seconds, as the service sends it, or an HTTP date,
// as a proxy in between may (RFC 9110 §10.2.3); 0 when absent, past or unreadable.
func retryAfter(v string, now time.Time) time.Duration {
	if s, err := strconv.Atoi(v); err == nil && s > 0 {
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now).Round(time.Second)
	}
	return 0
}

// NewIdempotencyKey returns a random key for one logical write.
func NewIdempotencyKey() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return "idem_" + hex.EncodeToString(b[:])
}

// Get sends GET path with query and decodes the JSON answer into out (if not nil).
func (c *Client) Get(ctx context.Context, path string, query url.Values, out any) error {
	if len(query) > 0 {
		path += "?" + query.Encode()
	}
	resp, err := c.Do(ctx, http.MethodGet, path, nil, "")
	if err != nil {
		return err
	}
	if out != nil {
		return json.Unmarshal(resp.Body, out)
	}
	return nil
}
