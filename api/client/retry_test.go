package client_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"testing"
	"time"

	"svc/api/client"
	"svc/lib/apikey"
	"svc/schema/catalog"
	"svc/schema/workspace"
)

// sent is what one attempt sent, and the Retry-After it got back ("" when its response
// was lost or carried none).
type sent struct {
	method, path, idemKey string
	body                  []byte
	retryAfter            string
}

// wire is an http.RoundTripper in front of next (a recorder) that keeps every attempt's
// body, Idempotency-Key and Retry-After; onResponse, when set, sees each response the
// client is about to read.
type wire struct {
	next       http.RoundTripper
	onResponse func(*http.Response)
	mu         sync.Mutex
	attempts   []sent
}

func (w *wire) RoundTrip(r *http.Request) (*http.Response, error) {
	s := sent{method: r.Method, path: r.URL.Path, idemKey: r.Header.Get("Idempotency-Key")}
	if r.Body != nil {
		b, err := io.ReadAll(r.Body)
		r.Body.Close()
		if err != nil {
			return nil, err
		}
		s.body = b
		r = r.Clone(r.Context())
		r.Body = io.NopCloser(bytes.NewReader(b))
	}
	resp, err := w.next.RoundTrip(r)
	if resp != nil {
		s.retryAfter = resp.Header.Get("Retry-After")
		if w.onResponse != nil {
			w.onResponse(resp)
		}
	}
	w.mu.Lock()
	w.attempts = append(w.attempts, s)
	w.mu.Unlock()
	return resp, err
}

func (w *wire) log() []sent {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]sent(nil), w.attempts...)
}

// seconds reads a Retry-After of delay-seconds (-1 s when it is not one, which no wait equals).
func seconds(h string) time.Duration {
	n, err := strconv.Atoi(h)
	if err != nil {
		return -time.Second
	}
	return time.Duration(n) * time.Second
}

// retryClient is a client of rg with secret over w, with no pacing (it meets every
// refusal) and its waits recorded instead of slept (waits()).
func retryClient(rg *rig, secret string, w *wire) (c *client.Client, waits func() []time.Duration) {
	c = client.New(rg.URL+"/v1", secret)
	c.HTTP = &http.Client{Transport: w, Timeout: 30 * time.Second}
	c.BaseDelay = 20 * time.Millisecond
	c.PaceBelow = -1
	var mu sync.Mutex
	var ws []time.Duration
	client.SetSleep(c, func(_ context.Context, d time.Duration) error {
		mu.Lock()
		ws = append(ws, d)
		mu.Unlock()
		return nil
	})
	return c, func() []time.Duration {
		mu.Lock()
		defer mu.Unlock()
		return append([]time.Duration(nil), ws...)
	}
}

// README.md: "Retries: network errors and problems with retryable: true, at most
// MaxAttempts (5)" (client.go: "MaxAttempts bounds the attempts of one call, the first
// included (default 5)"). A call whose every response is lost, or whose every answer is
// a retryable 429, makes exactly 5 attempts by default, and exactly MaxAttempts when set.
func TestRetriesStopAtMaxAttempts(t *testing.T) {
	rg := newReadRig(t, false)
	tn := rg.Tenant(t, false)
	ctx := context.Background()

	for _, maxAttempts := range []int{0, 2, -1} { // 0 or less: the default
		w := &wire{next: &recorder{lose: func(int, *http.Request) bool { return true }}}
		c, waits := retryClient(rg, tn.Secret, w)
		c.MaxAttempts = maxAttempts
		if maxAttempts < 0 {
			c.BaseDelay, c.MaxDelay = -time.Second, -time.Second // no panic: the defaults
		}
		err := c.Get(ctx, "/me", nil, nil)
		var p *client.Problem
		if err == nil || errors.As(err, &p) {
			t.Fatalf("MaxAttempts %d, every response lost: %v, want the network error", maxAttempts, err)
		}
		want := maxAttempts
		if want <= 0 {
			want = 5
		}
		if n := len(w.log()); n != want {
			t.Fatalf("MaxAttempts %d, every response lost: %d attempts, want %d", maxAttempts, n, want)
		}
		if n := len(waits()); n != want-1 {
			t.Fatalf("MaxAttempts %d: %d waits between %d attempts", maxAttempts, n, want)
		}
	}

	// A retryable problem: the burst of a key allowed one request a minute, spent.
	k, secret := rg.Key(t, workspace.KeySpec{WorkspaceID: tn.Workspace.ID, Env: apikey.Live, Burst: 1})
	spend(t, rg, k, 1)
	w := &wire{next: &recorder{}}
	c, waits := retryClient(rg, secret, w)
	err := c.Get(ctx, "/me", nil, nil)
	var p *client.Problem
	if !errors.As(err, &p) || p.Code != "rate_limited" || !p.Retryable {
		t.Fatalf("burst spent: %v, want the rate_limited problem", err)
	}
	log := w.log()
	if len(log) != 5 {
		t.Fatalf("a retryable problem every time: %d attempts, want 5", len(log))
	}
	// Each wait is the Retry-After of the answer before it (about a minute: under
	// MaxRetryAfter).
	ws := waits()
	if len(ws) != 4 {
		t.Fatalf("waits %v between 5 attempts", ws)
	}
	for i, d := range ws {
		if d != seconds(log[i].retryAfter) {
			t.Errorf("wait %d: %s after an answer with Retry-After %q", i+1, d, log[i].retryAfter)
		}
	}
}

// README.md: "waits Retry-After when sent (up to MaxRetryAfter, 2 min)"; client.go:
// "MaxRetryAfter bounds how long a Retry-After is honoured before the call gives up with
// the problem instead (default 2 minutes)". A daily quota of 720 is one request per 120
// s (Retry-After at most 120: waited); one of 700, one per 123.4 s (Retry-After past
// 120: the quota_exceeded problem at once, no wait, one attempt). A bound equal to the
// answer's Retry-After is waited; a second under it is not.
func TestRetryAfterIsWaitedUpToMaxRetryAfter(t *testing.T) {
	rg := newReadRig(t, false)
	tn := rg.Tenant(t, false)
	ctx := context.Background()
	quotaSpent := func(daily int) string {
		k, secret := rg.Key(t, workspace.KeySpec{WorkspaceID: tn.Workspace.ID, Env: apikey.Live, Burst: 10000, Daily: daily})
		spend(t, rg, k, daily)
		return secret
	}
	quotaProblem := func(err error) *client.Problem {
		t.Helper()
		var p *client.Problem
		if !errors.As(err, &p) || p.Code != "quota_exceeded" || !p.Retryable {
			t.Fatalf("daily quota spent: %v, want the retryable quota_exceeded problem", err)
		}
		return p
	}

	// Within the default bound: waited, then tried again.
	w := &wire{next: &recorder{}}
	c, waits := retryClient(rg, quotaSpent(720), w)
	c.MaxAttempts = 2
	p := quotaProblem(c.Get(ctx, "/me", nil, nil))
	log := w.log()
	ra, _ := strconv.Atoi(log[0].retryAfter)
	if ra < 100 || ra > 120 {
		t.Fatalf("a daily quota of 720, spent: Retry-After %q, want about 120", log[0].retryAfter)
	}
	if ws := waits(); len(log) != 2 || len(ws) != 1 || ws[0] != seconds(log[0].retryAfter) {
		t.Fatalf("Retry-After %d s, within the default MaxRetryAfter: %d attempts, waits %v; want it waited once", ra, len(log), ws)
	}

	// Past the default bound: the problem at once.
	w = &wire{next: &recorder{}}
	c, waits = retryClient(rg, quotaSpent(700), w)
	p = quotaProblem(c.Get(ctx, "/me", nil, nil))
	if p.RetryAfter <= 2*time.Minute {
		t.Fatalf("a daily quota of 700, spent: Retry-After %s, want past 2 minutes", p.RetryAfter)
	}
	if n, ws := len(w.log()), waits(); n != 1 || len(ws) != 0 {
		t.Fatalf("Retry-After %s, past the default MaxRetryAfter: %d attempts, waits %v; want the problem at once", p.RetryAfter, n, ws)
	}

	// The bound itself: MaxRetryAfter set, as each answer arrives, to its Retry-After
	// (waited), then to a second less (returned at once).
	for _, under := range []time.Duration{0, time.Second} {
		w = &wire{next: &recorder{}}
		c, waits = retryClient(rg, quotaSpent(720), w)
		c.MaxAttempts = 2
		w.onResponse = func(r *http.Response) { c.MaxRetryAfter = seconds(r.Header.Get("Retry-After")) - under }
		quotaProblem(c.Get(ctx, "/me", nil, nil))
		log, ws := w.log(), waits()
		switch {
		case under == 0 && (len(log) != 2 || len(ws) != 1 || ws[0] != seconds(log[0].retryAfter)):
			t.Fatalf("MaxRetryAfter equal to Retry-After %s s: %d attempts, waits %v; want it waited once", log[0].retryAfter, len(log), ws)
		case under > 0 && (len(log) != 1 || len(ws) != 0):
			t.Fatalf("MaxRetryAfter a second under Retry-After %s s: %d attempts, waits %v; want the problem at once", log[0].retryAfter, len(log), ws)
		}
	}
}

// README.md: "SendEvents and ImportActuals send one Idempotency-Key per call (generated,
// or …), the same on every retry; the body is encoded once and resent byte for byte";
// go-client.md: "ImportActuals make one Idempotency-Key per call (or take yours) and send
// the same key on every retry, so a retry never counts twice". The first two responses
// lost, the third attempt is answered from the first one's record.
func TestImportActualsSendsOneIdempotencyKeyOnEveryRetry(t *testing.T) {
	rg := newReadRig(t, true)
	ctx := context.Background()
	_, secret := rg.Key(t, workspace.KeySpec{WorkspaceID: catalog.ShowroomWorkspace, Env: apikey.Sandbox, Burst: 100, Daily: 1000,
		Scopes: []string{"plans:read", "actuals:write"}})
	plain := rg.client(secret, &recorder{})
	var plans, lines struct {
		Data []client.Object `json:"data"`
	}
	if err := plain.Get(ctx, "/plans", url.Values{"limit": {"1"}}, &plans); err != nil || len(plans.Data) == 0 {
		t.Fatalf("plans: %v %v", plans.Data, err)
	}
	planID := plans.Data[0]["id"].(string)
	if err := plain.Get(ctx, "/plans/"+planID+"/lines", nil, &lines); err != nil || len(lines.Data) == 0 {
		t.Fatalf("lines: %v %v", lines.Data, err)
	}
	lineID := lines.Data[0]["id"].(string)

	for i, given := range []string{"", client.NewIdempotencyKey()} {
		w := &wire{next: &recorder{lose: func(n int, _ *http.Request) bool { return n < 2 }}}
		c, _ := retryClient(rg, secret, w)
		rows := []client.ActualsRow{{PlanID: planID, LineID: lineID, Date: "2026-09-1" + strconv.Itoa(i+4), Impressions: 10,
			Spend: "1.5", Currency: "EUR"}}
		res, err := c.ImportActuals(ctx, rows, given)
		if err != nil || res.Upserted != 1 || !res.Replayed {
			t.Fatalf("key %q: %+v %v, want one row upserted, answered from the first attempt's record", given, res, err)
		}
		log := w.log()
		if len(log) != 3 {
			t.Fatalf("key %q: %d attempts, want 3 (two responses lost)", given, len(log))
		}
		key := log[0].idemKey
		if key == "" || (given != "" && key != given) {
			t.Fatalf("key %q: first attempt sent Idempotency-Key %q", given, key)
		}
		for j, s := range log {
			if s.method != "POST" || s.path != "/v1/imports/actuals" || s.idemKey != key || !bytes.Equal(s.body, log[0].body) {
				t.Errorf("key %q: attempt %d sent %s %s with Idempotency-Key %q, body %s; want %q and the first body %s",
					given, j+1, s.method, s.path, s.idemKey, s.body, key, log[0].body)
			}
		}
	}
}

// TestBackoffIsFullJitterUpToMaxDelay: after a lost response, wait i is drawn from
// (0, min(BaseDelay·2^(i−1), MaxDelay)] (README.md: exponential backoff with full jitter),
// so over many draws the waits reach into the top half of each bound, never past it.
func TestBackoffIsFullJitterUpToMaxDelay(t *testing.T) {
	rg := newReadRig(t, false)
	tn := rg.Tenant(t, false)
	top := make([]time.Duration, 9) // the largest wait i seen
	for run := 0; run < 40; run++ {
		w := &wire{next: &recorder{lose: func(int, *http.Request) bool { return true }}}
		c, waits := retryClient(rg, tn.Secret, w)
		c.MaxAttempts, c.BaseDelay, c.MaxDelay = 10, 10*time.Millisecond, 40*time.Millisecond
		if err := c.Get(context.Background(), "/me", nil, nil); err == nil {
			t.Fatal("every response lost, and no error")
		}
		for i, d := range waits() {
			bound := min(10*time.Millisecond<<i, 40*time.Millisecond)
			if d <= 0 || d > bound {
				t.Fatalf("wait %d: %s, want in (0, %s]", i+1, d, bound)
			}
			top[i] = max(top[i], d)
		}
	}
	for i, d := range top {
		if bound := min(10*time.Millisecond<<i, 40*time.Millisecond); d <= bound/2 {
			t.Fatalf("wait %d: at most %s in 40 runs, bound %s: not drawn up to the bound", i+1, d, bound)
		}
	}
}

// Retry-After in either form RFC 9110 allows: the service sends seconds, a proxy in
// between may send an HTTP date.
func TestRetryAfterForms(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	for v, want := range map[string]time.Duration{
		"7": 7 * time.Second, "0": 0, "-3": 0, "": 0, "soon": 0,
		now.Add(time.Hour).Format(http.TimeFormat):    time.Hour,
		now.Add(-time.Hour).Format(http.TimeFormat):   0,
		now.Add(90 * time.Second).Format(time.RFC850): 90 * time.Second,
	} {
		if got := client.RetryAfter(v, now); got != want {
			t.Errorf("Retry-After %q: %s, want %s", v, got, want)
		}
	}
}

// The pacing's refill interval is the window RateLimit-Limit and RateLimit-Reset
// describe, also when two windows share a quota.
func TestRefillIntervalOfTheWindowDescribed(t *testing.T) {
	const both = `"burst";q=100;w=60, "daily";q=100;w=86400`
	for _, c := range []struct {
		policy       string
		limit, reset int
		want         time.Duration
	}{
		{both, 100, 30, 600 * time.Millisecond}, // a reset under a minute: the burst's
		{both, 100, 5000, 864 * time.Second},    // only the daily window is that long
		{`"burst";q=120;w=60, "daily";q=10000;w=86400`, 10000, 20, 8640 * time.Millisecond},
		{`"burst";q=120;w=60, "daily";q=10000;w=86400`, 120, 20, 500 * time.Millisecond},
		{`"burst";q=120;w=60`, 50, 10, 0},
	} {
		if got := client.RefillInterval(c.policy, c.limit, c.reset); got != c.want {
			t.Errorf("%s, limit %d, reset %d: %s, want %s", c.policy, c.limit, c.reset, got, c.want)
		}
	}
}
