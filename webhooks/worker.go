package webhooks

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/textproto"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"

	json "github.com/goccy/go-json"
	"github.com/google/uuid"

	"svc/lib/ids"
	"svc/lib/process"
	"svc/lib/signature"
)

// Worker makes the delivery attempts that are due. Any number of workers (in one
// process or many) share the schedule in Redis: each attempt is claimed atomically
// with a lease (Store.claim), so two workers never make the same attempt, and an
// attempt whose worker died is claimed again, as the next attempt, once its lease ends.
type Worker struct {
	Config  Config
	Store   *Store
	Logs    *Logs
	Client  *http.Client
	Log     *slog.Logger
	Metrics *Metrics
	// Now is the clock of the schedule. Tests replace it to run the three-day schedule
	// in milliseconds; latency is always measured with the real clock.
	Now func() time.Time
	// Rand returns a number in [0, 1) for the jitter (tests may fix it).
	Rand func() float64

	inFlight atomic.Int32   // attempts Run has started and not finished (pool.go)
	freed    chan struct{}  // a signal that one of them finished
	running  sync.WaitGroup // every attempt Run started, waited for when it returns
}

// NewWorker returns a worker with an HTTP client of its own (cfg.Egress().Transport: no
// proxy from the environment, internal addresses refused on every connection) that
// times out after cfg.Timeout and does not follow redirects (a 3xx is a failed attempt).
func NewWorker(cfg Config, st *Store, logs *Logs, m *Metrics, log *slog.Logger) *Worker {
	return &Worker{Config: cfg, Store: st, Logs: logs, Metrics: m, Log: log, Now: time.Now, Rand: rand.Float64,
		freed: make(chan struct{}, 1),
		Client: &http.Client{Timeout: cfg.Timeout, Transport: cfg.Egress().Transport(cfg.Timeout),
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

func defaultWorker() string {
	h, err := os.Hostname()
	if err != nil {
		h = "svc"
	}
	return h + "-" + strconv.Itoa(os.Getpid())
}

// Run moves what the legacy schedule still holds (see MoveLegacySchedule), then makes
// due attempts every Config.Poll until ctx is done, at most Config.Concurrency at once
// (pool.go), and returns once the attempts it started have finished.
func (w *Worker) Run(ctx context.Context) error {
	if n, err := w.Store.MoveLegacySchedule(ctx); err != nil {
		w.Log.Warn("webhook worker: moving the legacy schedule", "err", err.Error())
	} else if n > 0 {
		w.Log.Info("webhook worker: moved deliveries from the legacy schedule", "deliveries", n)
	}
	process.Every(ctx, w.Config.Poll, w.drain, nil)
	w.running.Wait()
	return nil
}

// RunOnce claims up to Config.Concurrency due attempts, makes them in parallel, and
// returns how many it made once all of them are made (tests, and a one-off run).
func (w *Worker) RunOnce(ctx context.Context) (int, error) {
	claims, err := w.claim(ctx, w.Config.Concurrency)
	if err != nil {
		return 0, err
	}
	var wg sync.WaitGroup
	for _, c := range claims {
		wg.Add(1)
		go func(c Claim) {
			defer wg.Done()
			w.make(ctx, c)
		}(c)
	}
	wg.Wait()
	return len(claims), nil
}

// claim claims up to n due attempts. It first flushes the delivery-log and event rows
// queued while ClickHouse was unavailable.
func (w *Worker) claim(ctx context.Context, n int) ([]Claim, error) {
	w.flushQueuedLogs(ctx)
	w.flushQueuedEvents(ctx)
	return w.Store.ClaimDue(ctx, w.Now(), w.Config.Lease, n)
}

// make makes claimed attempt c. It finishes even when ctx is cancelled (shutdown): the
// attempt is bounded by Config.Timeout, and abandoning it would only waste an attempt of
// the schedule; the claim's lease bounds the rest.
func (w *Worker) make(ctx context.Context, c Claim) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), w.Config.Lease)
	defer cancel()
	w.attempt(cctx, c)
}

// attempt makes one claimed attempt and records it. On a store failure before the
// request is sent it returns without finishing: the lease runs out and the delivery is
// claimed again.
func (w *Worker) attempt(ctx context.Context, c Claim) {
	now := w.Now()
	row := DeliveryRow{WorkspaceID: c.Workspace, EndpointID: c.Endpoint, EventID: c.Event, Kind: c.Kind,
		Attempt: c.Attempt, AttemptedAt: now, Worker: w.Config.Worker}
	ep, err := w.Store.Endpoint(ctx, c.Endpoint)
	if errors.Is(err, ErrNotFound) {
		w.drop(ctx, c, row, "the endpoint was deleted")
		return
	}
	if err != nil {
		w.Log.Warn("webhook endpoint read failed", "endpoint_id", c.Endpoint.String(), "err", err.Error())
		return
	}
	if !ep.Enabled() {
		w.drop(ctx, c, row, "the endpoint is disabled")
		return
	}
	body, err := w.Store.EventBody(ctx, c.Event)
	if errors.Is(err, ErrNotFound) && w.Logs != nil {
		var se StoredEvent
		se, err = w.Logs.Event(ctx, c.Event)
		body = se.Body
	}
	if errors.Is(err, ErrNotFound) {
		w.drop(ctx, c, row, "the event expired")
		return
	}
	if err != nil {
		w.Log.Warn("webhook event read failed", "event_id", c.Event.String(), "err", err.Error())
		return
	}

	status, retryAfter, latency, sendErr := w.send(ctx, ep, c, body, now)
	row.StatusCode, row.LatencyMS = status, int(latency/time.Millisecond)
	if w.Metrics != nil {
		w.Metrics.Latency.Observe(latency.Seconds())
	}
	var next *time.Time
	state := "failed"
	switch {
	case sendErr == nil && status >= 200 && status < 300:
		row.Outcome, state = Delivered, "delivered"
		if err := w.Store.MarkSuccess(ctx, ep.ID); err != nil {
			w.Log.Warn("webhook endpoint state", "endpoint_id", ep.ID.String(), "err", err.Error())
		}
	case sendErr == nil && status == http.StatusGone:
		row.Outcome, row.Error = Disabled, "410 Gone: the endpoint is disabled"
		w.disable(ctx, ep.ID, "the endpoint answered 410 Gone")
	default:
		if sendErr != nil {
			row.Error = sendErr.Error()
			if refused(sendErr) != nil {
				w.Log.Warn("webhook delivery refused by the address policy", "endpoint_id", ep.ID.String(), "reason", row.Error)
			}
		} else {
			row.Error = fmt.Sprintf("HTTP %d", status)
		}
		since, err := w.Store.MarkFailure(ctx, ep.ID, now, w.Config.DisableAfter/2)
		if err != nil {
			w.Log.Warn("webhook endpoint state", "endpoint_id", ep.ID.String(), "err", err.Error())
		}
		k := c.Attempt - c.Round // attempts made in this round
		switch {
		case now.Sub(since) >= w.Config.DisableAfter:
			row.Outcome = Disabled
			row.Error += fmt.Sprintf("; failing since %s: the endpoint is disabled", since.UTC().Format(time.RFC3339))
			w.disable(ctx, ep.ID, "every delivery failed since "+since.UTC().Format(time.RFC3339))
		case k < len(w.Config.Schedule):
			d := w.jitter(w.Config.Schedule[k])
			if retryAfter > d {
				d = min(retryAfter, w.Config.MaxRetryAfter)
			}
			t := now.Add(d)
			next, state, row.Outcome, row.NextAttemptAt = &t, "pending", Retry, &t
		default:
			row.Outcome = GaveUp
		}
	}
	if ok, err := w.Store.Finish(ctx, c, next, state, status); err != nil {
		w.Log.Warn("webhook schedule update failed", "endpoint_id", ep.ID.String(), "event_id", c.Event.String(), "err", err.Error())
	} else if !ok {
		w.Log.Warn("webhook claim lost (lease ran out before the attempt finished)", "endpoint_id", ep.ID.String(),
			"event_id", c.Event.String(), "attempt", c.Attempt)
	}
	w.record(ctx, row)
}

// send makes the HTTP request. The error it returns names the failure without the URL
// (which may carry a token in its query) or any secret.
func (w *Worker) send(ctx context.Context, ep Endpoint, c Claim, body []byte, now time.Time) (status int, retryAfter, latency time.Duration, err error) {
	ctx, cancel := context.WithTimeout(ctx, w.Config.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, ep.URL, bytes.NewReader(body))
	if err != nil {
		return 0, 0, 0, errors.New("the endpoint URL cannot be requested")
	}
	h := req.Header
	h.Set("Content-Type", "application/json")
	h.Set("User-Agent", "svc-webhooks/1")
	h.Set(signature.MessageIDHeader, ids.Format(ids.Event, c.Event))
	h.Set("SVC-Event-Type", c.Kind)
	h.Set("SVC-Webhook-Attempt", strconv.Itoa(c.Attempt))
	h.Set(signature.Header, signature.Value(now.Unix(), body, ep.SigningSecrets(now)...))
	start := time.Now()
	resp, err := w.Client.Do(req)
	latency = time.Since(start)
	if err != nil {
		return 0, 0, latency, sendError(err, w.Config.Timeout)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	return resp.StatusCode, parseRetryAfter(resp.Header.Get("Retry-After"), now), latency, nil
}

// sendError names a failed request for the delivery log, which the workspace's members
// read: never the URL, never our resolver's address, never more than maxErrorText bytes
// of text the endpoint chose (Go's transport quotes a malformed status or header line
// in its error, and an endpoint could make that line 64 KiB).
func sendError(err error, timeout time.Duration) error {
	if ae := refused(err); ae != nil {
		return ae // "address_not_allowed: 127.0.0.1 is loopback"
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout() {
		return fmt.Errorf("no answer within %s", timeout)
	}
	var de *net.DNSError
	if errors.As(err, &de) {
		if de.IsNotFound {
			return fmt.Errorf("dns: %s: no such host", boundText(de.Name))
		}
		return fmt.Errorf("dns: %s: lookup failed", boundText(de.Name))
	}
	var pe textproto.ProtocolError
	if errors.As(err, &pe) || strings.Contains(err.Error(), "malformed HTTP") {
		return errors.New("malformed response: the status line or a header is not HTTP/1.1")
	}
	var oe *net.OpError
	if errors.As(err, &oe) {
		return fmt.Errorf("%s: %s", oe.Op, boundText(oe.Err.Error()))
	}
	return errors.New(boundText(err.Error()))
}

// maxErrorText bounds the text of a delivery-log error taken from an error's message.
const maxErrorText = 200

// boundText is s with its control characters and invalid bytes replaced by "?", cut at
// maxErrorText bytes on a character boundary, "…" marking the cut.
func boundText(s string) string {
	var b strings.Builder
	for _, r := range s {
		if b.Len() >= maxErrorText {
			b.WriteString("…")
			break
		}
		if r == utf8.RuneError || unicode.IsControl(r) {
			r = '?'
		}
		b.WriteRune(r)
	}
	return b.String()
}

// parseRetryAfter reads delay-seconds or an HTTP date; 0 when absent or unreadable.
func parseRetryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if n, err := strconv.Atoi(v); err == nil && n > 0 {
		return time.Duration(n) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// jitter spreads d uniformly over d × (1 ± Config.Jitter).
func (w *Worker) jitter(d time.Duration) time.Duration {
	if d <= 0 || w.Config.Jitter == 0 {
		return d
	}
	f := 1 + w.Config.Jitter*(2*w.Rand()-1)
	return time.Duration(float64(d) * f)
}

func (w *Worker) disable(ctx context.Context, id uuid.UUID, reason string) {
	ok, err := w.Store.DisableEndpoint(ctx, id, reason)
	if err != nil {
		w.Log.Error("webhook endpoint disable failed", "endpoint_id", id.String(), "err", err.Error())
		return
	}
	if ok {
		w.Log.Warn("webhook endpoint disabled", "endpoint_id", id.String(), "reason", reason)
		if w.Metrics != nil {
			w.Metrics.Disabled.Inc()
		}
	}
}

// drop ends a delivery that cannot be made, with a log row saying why.
func (w *Worker) drop(ctx context.Context, c Claim, row DeliveryRow, why string) {
	row.Outcome, row.Error = Dropped, why
	if _, err := w.Store.Finish(ctx, c, nil, "dropped", 0); err != nil {
		w.Log.Warn("webhook schedule update failed", "event_id", c.Event.String(), "err", err.Error())
	}
	w.record(ctx, row)
}

// record writes the attempt's log row; if ClickHouse cannot take it now, the row waits
// in Redis and a later RunOnce writes it.
func (w *Worker) record(ctx context.Context, row DeliveryRow) {
	if w.Metrics != nil {
		w.Metrics.Deliveries.WithLabelValues(row.Outcome).Inc()
	}
	if w.Logs != nil {
		err := w.Logs.InsertDeliveries(ctx, []DeliveryRow{row})
		if err == nil {
			return
		}
		w.Log.Warn("delivery log insert failed; queued in Redis", "event_id", row.EventID.String(), "err", err.Error())
	}
	b, _ := json.Marshal(queuedRow{row, row.WorkspaceID.String(), row.EndpointID.String(), row.EventID.String()})
	if err := w.Store.push(ctx, logQueue, b); err != nil {
		w.Log.Error("delivery log row lost", "event_id", row.EventID.String(), "attempt", row.Attempt, "err", err.Error())
	}
}

type queuedRow struct {
	DeliveryRow
	WS string `json:"ws"`
	EP string `json:"ep"`
	EV string `json:"ev"`
}

// flushQueuedLogs writes rows queued by record.
func (w *Worker) flushQueuedLogs(ctx context.Context) {
	if w.Logs == nil {
		return
	}
	raw, err := w.Store.pop(ctx, logQueue, 500)
	if err != nil || len(raw) == 0 {
		return
	}
	rows := make([]DeliveryRow, 0, len(raw))
	for _, s := range raw {
		var q queuedRow
		if json.Unmarshal([]byte(s), &q) != nil {
			continue
		}
		q.DeliveryRow.WorkspaceID, _ = uuid.Parse(q.WS)
		q.DeliveryRow.EndpointID, _ = uuid.Parse(q.EP)
		q.DeliveryRow.EventID, _ = uuid.Parse(q.EV)
		rows = append(rows, q.DeliveryRow)
	}
	if err := w.Logs.InsertDeliveries(ctx, rows); err != nil {
		for _, s := range raw {
			_ = w.Store.push(ctx, logQueue, []byte(s))
		}
	}
}
