package ingest

import (
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	json "github.com/goccy/go-json"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/valyala/fasthttp"

	"svc/lib/apikey"
	"svc/lib/httpserver"
	"svc/lib/idempotency"
	"svc/lib/kafkabroker"
	"svc/lib/logs"
	"svc/lib/problem"
	"svc/lib/process"
	"svc/lib/settings"
	"svc/schema"
	"svc/schema/erasure"
	"svc/schema/workspace"
)

// Config of the edge role (the HTTP side is httpserver.Config, Kafka is kafkabroker.Config).
type Config struct {
	// DeliveryTimeout is how long an accepted batch may wait for Kafka's
	// acknowledgement before the request is answered 503 (SVC_INGEST_DELIVERY_TIMEOUT,
	// default 5s). The producer fails a record only when that is safe (it was never
	// sent, or the broker answered), so a 503 never hides a record that lands later;
	// when the outcome is unknown, an Idempotency-Key stays reserved until it is known,
	// or until a retry takes it over (TakeoverAfter).
	DeliveryTimeout time.Duration
	// MaxBufferedRecords bounds records waiting for Kafka (SVC_INGEST_MAX_BUFFERED,
	// default 20000 batches). When full, requests get 503 at once instead of queuing.
	MaxBufferedRecords int
	// Linger is how long the producer waits to fill a batch per partition
	// (SVC_INGEST_LINGER, default 2ms): higher means fewer, larger produce requests.
	Linger time.Duration
	// Compression of produced batches (SVC_INGEST_COMPRESSION: auto, none, lz4, zstd,
	// snappy; default auto = none with the embedded broker, whose "network" is loopback,
	// and lz4 with real brokers).
	Compression string
	// InvalidRate is how many batches a second one key may have refused whole (422)
	// by one edge, in bursts of twice that, before its next POST /events are answered
	// 429 (SVC_INGEST_INVALID_RATE, default 10; 0: never; brake.go).
	InvalidRate int
	// BrakeHold is how long a braked request's 429 is held before it is written (0: the
	// default, brakeHold, 1s; brake.go). Not from the environment: tests shorten it.
	BrakeHold time.Duration
	// Log receives the Kafka client's warnings (nil: slog.Default()). Not from the
	// environment: Start sets the process's logger.
	Log *slog.Logger
}

// ConfigFromEnv reads the SVC_INGEST_* variables.
func ConfigFromEnv(r *settings.Reader) Config {
	return Config{
		DeliveryTimeout:    r.Duration("SVC_INGEST_DELIVERY_TIMEOUT"),
		MaxBufferedRecords: r.Int("SVC_INGEST_MAX_BUFFERED"),
		Linger:             r.Duration("SVC_INGEST_LINGER"),
		Compression:        r.String("SVC_INGEST_COMPRESSION"),
		InvalidRate:        r.Int("SVC_INGEST_INVALID_RATE"),
	}
}

// Validate reports a configuration that cannot work.
func (c Config) Validate() error {
	if c.DeliveryTimeout < 100*time.Millisecond {
		return fmt.Errorf("SVC_INGEST_DELIVERY_TIMEOUT %s: want at least 100ms", c.DeliveryTimeout)
	}
	if c.InvalidRate < 0 {
		return fmt.Errorf("SVC_INGEST_INVALID_RATE %d: want 0 (never) or more", c.InvalidRate)
	}
	if c.MaxBufferedRecords < 1 {
		return fmt.Errorf("SVC_INGEST_MAX_BUFFERED %d: want at least 1", c.MaxBufferedRecords)
	}
	if c.Linger < 0 || c.Linger > time.Second {
		return fmt.Errorf("SVC_INGEST_LINGER %s: want 0..1s", c.Linger)
	}
	if _, ok := codecs[c.Compression]; !ok && c.Compression != "auto" && c.Compression != "" {
		return fmt.Errorf("SVC_INGEST_COMPRESSION %q: want auto, none, lz4, zstd or snappy", c.Compression)
	}
	return nil
}

var codecs = map[string]kgo.CompressionCodec{"none": kgo.NoCompression(), "lz4": kgo.Lz4Compression(),
	"zstd": kgo.ZstdCompression(), "snappy": kgo.SnappyCompression()}

// codec resolves "auto" against the broker configuration.
func (c Config) codec(bc kafkabroker.Config) kgo.CompressionCodec {
	if cc, ok := codecs[c.Compression]; ok {
		return cc
	}
	if len(bc.Brokers) == 0 {
		return kgo.NoCompression()
	}
	return kgo.Lz4Compression()
}

// NewProducer returns a Kafka client for the edge: acks from all in-sync replicas,
// idempotent (franz-go's default), records keyed by pixel.
func NewProducer(bc kafkabroker.Config, seeds []string, c Config) (*kgo.Client, error) {
	return kgo.NewClient(
		kgo.SeedBrokers(seeds...),
		kgo.Dialer(kafkabroker.Dial),
		kgo.DefaultProduceTopic(schema.TopicEvents),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordDeliveryTimeout(c.DeliveryTimeout),
		kgo.MaxBufferedRecords(c.MaxBufferedRecords),
		kgo.ProducerLinger(c.Linger),
		kgo.ProducerBatchCompression(c.codec(bc), kgo.NoCompression()),
		kgo.AllowAutoTopicCreation(),
		kgo.RetryBackoffFn(retryBackoff),
		kgo.WithLogger(logs.Kgo(cmp.Or(c.Log, slog.Default()))),
	)
}

// retryBackoff is the producer's wait between retries (of a produce, a metadata
// request, a dial): 50ms doubling to at most 250ms. franz-go's default grows to 5s, so
// after a broker outage of a few seconds the producer could sleep that long after the
// broker was back; capped, it sends within about 250ms of the edge accepting again.
func retryBackoff(fails int) time.Duration {
	if fails > 3 {
		return 250 * time.Millisecond
	}
	return min(250*time.Millisecond, 50*time.Millisecond<<max(fails-1, 0))
}

// Metrics of the edge.
type Metrics struct {
	Events  *prometheus.CounterVec // svc_ingest_events_total{outcome,reason}
	Produce prometheus.Histogram   // svc_ingest_produce_duration_seconds
	braked  prometheus.Counter     // svc_ingest_braked_requests_total (brake.go)
}

func newMetrics(reg prometheus.Registerer, client *kgo.Client, capacity int) *Metrics {
	m := &Metrics{
		Events: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "svc_ingest_events_total",
			Help: "Events by outcome (accepted or rejected) and, for rejections, the rule broken."},
			[]string{"outcome", "reason"}),
		Produce: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "svc_ingest_produce_duration_seconds",
			Help:    "Time from handing a batch to the producer to Kafka's acknowledgement.",
			Buckets: []float64{.0005, .001, .002, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5}}),
		braked: prometheus.NewCounter(prometheus.CounterOpts{Name: "svc_ingest_braked_requests_total",
			Help: "POST /events answered 429 before their events were read: the key's recent batches were all refused (SVC_INGEST_INVALID_RATE)."}),
	}
	reg.MustRegister(m.Events, m.Produce, m.braked,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "svc_ingest_producer_buffered_records",
			Help: "Batches buffered in the producer, not yet acknowledged by Kafka."},
			func() float64 { return float64(client.BufferedProduceRecords()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "svc_ingest_producer_buffer_capacity",
			Help: "Most batches the producer buffers before the edge answers 503."},
			func() float64 { return float64(capacity) }))
	return m
}

// Edge serves POST /events.
type Edge struct {
	cfg      Config
	producer *kgo.Client
	keys     *workspace.Store
	metrics  *Metrics
	work     sync.Pool // *work
	accepted prometheus.Counter
	health   *brokerHealth
	// suppress holds the identities erased with suppression (suppress.go); nil: none.
	suppress   *erasure.Registry
	suppressed prometheus.Counter
	rejm       *rejectionMetrics // rejection records (rejections.go)
	brake      *invalidBrake     // keys whose batches are all refused (brake.go); nil: none
}

// work is the per-request scratch a pooled goroutine reuses: parser, batch, record
// buffer and the acknowledgement channel. While a record is in the producer, its work
// belongs to the producer's callback.
type work struct {
	parser  Parser
	batch   Batch
	rec     kgo.Record
	buf     []byte
	batchID []byte
	acked   chan error
}

// NewEdge returns the edge over an open producer and key store.
func NewEdge(cfg Config, producer *kgo.Client, ks *workspace.Store, reg prometheus.Registerer) *Edge {
	e := &Edge{cfg: cfg, producer: producer, keys: ks, metrics: newMetrics(reg, producer, cfg.MaxBufferedRecords),
		brake: newInvalidBrake(cfg)}
	e.work.New = func() any { return &work{acked: make(chan error, 1)} }
	e.accepted = e.metrics.Events.WithLabelValues("accepted", "")
	e.rejm = newRejectionMetrics(reg)
	e.health = startHealth(producer.Ping, producer.ForceMetadataRefresh, producer.Context().Done(), probeEvery, probeTimeout, cmp.Or(cfg.Log, slog.Default()))
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "svc_ingest_kafka_up",
		Help: "1 while the producer reaches Kafka (the last probe answered), 0 while POST /events answers 503 at once."},
		func() float64 {
			if e.health.Down() {
				return 0
			}
			return 1
		}))
	return e
}

// takeoverMargin is how long past the edge's own answer deadline (DeliveryTimeout + 1 s)
// a reservation of POST /events stays the first request's: slack for clock skew
// between edges and the Redis round trips.
const takeoverMargin = time.Second

// TakeoverAfter is how long after an Idempotency-Key was reserved an identical retry of
// POST /events may take it over (httpserver.Route.TakeoverAfter): the edge that reserved it has
// answered by then (202, or 503 when Kafka's acknowledgement is overdue) or is dead. The
// retry produces the same batch under the same batch id (BatchID), and the consumer
// stores one copy of it (its batch claim, rollup/dedup.go), so the events count once
// whichever lands. With the default 5 s delivery timeout it is 7 s: a client that
// retries every second gets its answer within 8 s of the reservation (README.md,
// "Exactly once").
func (c Config) TakeoverAfter() time.Duration {
	return c.DeliveryTimeout + time.Second + takeoverMargin
}

// Routes returns the edge's operations.
func (e *Edge) Routes() []httpserver.Route {
	return []httpserver.Route{{Method: "POST", Path: "/events", Scope: "events:write", Idempotent: true,
		TakeoverAfter: e.cfg.TakeoverAfter(), DryRunParam: DryRunParam, Refused: e.refused, Admit: e.admit,
		Summary: "Send a batch of up to 50 events for one pixel.", Handle: e.postEvents}}
}

// Ready is the edge's readiness check: the producer has room.
func (e *Edge) Ready() process.Check {
	return process.Check{Name: "kafka_producer", Fn: func(ctx context.Context) error {
		if n := e.producer.BufferedProduceRecords(); n >= int64(e.cfg.MaxBufferedRecords)*9/10 {
			return fmt.Errorf("producer buffer %d of %d", n, e.cfg.MaxBufferedRecords)
		}
		return e.producer.Ping(ctx)
	}}
}

// Close stops the Kafka probes, flushes what the producer holds (bounded by ctx) and
// closes it.
func (e *Edge) Close(ctx context.Context) error {
	e.health.Stop()
	err := e.producer.Flush(ctx)
	e.producer.Close()
	return err
}

// Accepted is the 202 body of POST /events. Duplicates counts the events refused as a
// later copy of an event_id earlier in the same batch (rule duplicate_event_id, among
// Rejected and Rejections); copies across batches are dropped by the consumer, after
// the 202 (rollup/eventdedup.go).
type Accepted struct {
	Accepted   int         `json:"accepted"`
	Rejected   int         `json:"rejected"`
	Duplicates int         `json:"duplicates"`
	Rejections []Rejection `json:"rejections"`
	RequestID  string      `json:"request_id"`
}

func (e *Edge) postEvents(r *httpserver.Request) error {
	w := e.work.Get().(*work)
	keep := true
	defer func() {
		if keep {
			e.work.Put(w)
		}
	}()
	b := &w.batch
	whole := false // refused whole (422, a dry run's too): the brake counts it
	admitted, took := e.brake.take(r.Key.ID, time.Now())
	if !admitted {
		return e.braked(r)
	}
	defer func() { e.brake.done(r.Key.ID, took, whole, time.Now()) }()
	if !w.parser.Parse(r.Body(), b) {
		p := problem.Invalid("The body is not a valid batch; see errors[].", b.Envelope...)
		e.rejected(r, b, p)
		whole = true
		return p
	}
	px, perr := e.pixel(r, b.PixelID)
	if perr != nil { // a pixel_id that is no pixel of the key's (4xx): refused whole, the body read
		var p *problem.Problem
		whole = errors.As(perr, &p) && p.Status < 500
		return perr
	}
	if r.DryRun() {
		err := dryRun(r, b)
		whole = err != nil
		return err
	}
	e.countRejections(b)
	e.dropSuppressed(r.Key.WorkspaceID, b)
	if len(b.Events) == 0 {
		p := problem.Invalid(fmt.Sprintf("None of the %d events is acceptable; see errors[].", b.Total), fieldErrors(b.Rejections)...)
		e.rejected(r, b, p)
		whole = true
		return p
	}
	base, idem := e.idBase(r)
	b.AssignIDs(base)
	w.buf = schema.AppendBatch(w.buf[:0], &schema.Batch{Sandbox: r.Key.Env == apikey.Sandbox,
		Workspace: schema.UUID(r.Key.WorkspaceID), Pixel: schema.UUID(px.ID), Key: schema.UUID(r.Key.ID),
		ReceivedAt: time.Now().UnixMilli(), RequestID: r.ID, Events: b.Events})
	body, _ := json.Marshal(Accepted{Accepted: len(b.Events), Rejected: len(b.Rejections), Duplicates: b.Duplicates,
		Rejections: nonNil(b.Rejections), RequestID: r.ID})
	clientIDs := noClientIDs
	if b.anyClientID() {
		clientIDs = someClientIDs
	}
	w.rec = kgo.Record{Topic: schema.TopicEvents, Key: w.rec.Key[:0], Value: w.buf,
		Headers: append(w.rec.Headers[:0], kgo.RecordHeader{Key: schema.HeaderSchema, Value: schemaV1},
			kgo.RecordHeader{Key: schema.HeaderClientIDs, Value: clientIDs})}
	if idem {
		w.rec.Headers = append(w.rec.Headers, kgo.RecordHeader{Key: schema.HeaderBatchID, Value: append(w.batchID[:0], base[:]...)})
	}
	w.rec.Key = append(w.rec.Key, px.ID[:]...)
	wentDown := e.health.WentDown()
	if e.health.Down() {
		return problem.Unavailable("Kafka (unreachable)", 1)
	}
	start := time.Now()
	var rej *rejWork // sent once the batch lands (rejections.go)
	if len(b.Rejections) > 0 {
		rej = rejectionRecord(r, px, fasthttp.StatusAccepted, b.Total, eventRejections(b.Rejections))
	}
	e.producer.TryProduce(context.Background(), &w.rec, func(_ *kgo.Record, err error) {
		if err != nil && !errors.Is(err, kgo.ErrMaxBuffered) {
			e.health.Kick()
		}
		w.acked <- err
	})
	timer := time.NewTimer(e.cfg.DeliveryTimeout + time.Second)
	defer timer.Stop()
	select {
	case err := <-w.acked:
		e.metrics.Produce.Observe(time.Since(start).Seconds())
		if err != nil {
			dropRejections(rej)
			return e.produceFailed(err)
		}
		e.sendRejections(rej)
	case <-timer.C:
		e.health.Kick()
		keep = false
		return e.pending(r, w, rej, body, "Kafka (acknowledgement overdue)", 2)
	case <-wentDown:
		keep = false
		return e.pending(r, w, rej, body, "Kafka (unreachable)", 1)
	}
	e.accepted.Add(float64(len(b.Events)))
	r.Raw(fasthttp.StatusAccepted, "application/json", body)
	return nil
}

// pending answers 503 for a record whose outcome is unknown (its acknowledgement is
// overdue, or Kafka went down while it waited): it may still land. The producer owns w
// until its callback; an idempotent request stays reserved until then, and its 202 is
// stored if the record lands. Its rejections' record rej is sent if the record lands,
// with or without an Idempotency-Key.
func (e *Edge) pending(r *httpserver.Request, w *work, rej *rejWork, body []byte, what string, retryAfter int) error {
	landed := make(chan bool, 1)
	go func() {
		err := <-w.acked
		e.work.Put(w)
		if err != nil {
			dropRejections(rej)
		} else {
			e.sendRejections(rej)
		}
		landed <- err == nil
	}()
	r.SetPending(func() (idempotency.Stored, bool) {
		return idempotency.Stored{Status: fasthttp.StatusAccepted, ContentType: "application/json", Body: body}, <-landed
	})
	return problem.Unavailable(what, retryAfter)
}

func nonNil(r []Rejection) []Rejection {
	if r == nil {
		return []Rejection{}
	}
	return r
}

func (e *Edge) produceFailed(err error) error {
	if errors.Is(err, kgo.ErrMaxBuffered) {
		return problem.Unavailable("Kafka (producer buffer full)", 1)
	}
	return problem.Unavailable("Kafka", 2)
}

// pixel resolves the batch's pixel within the key's workspace (workspace.PixelOfKey): an
// id that is not a pixel id (malformed, or of another kind) is 422, rule pixel_id, its
// value echoed as problem.Echo says (never a contact detail).
func (e *Edge) pixel(r *httpserver.Request, raw string) (workspace.Pixel, error) {
	return workspace.PixelOfKey(r.Context(), e.keys, r.Key, raw, problem.FieldError{Field: "pixel_id", Rule: "pixel_id", Pointer: "/pixel_id"})
}

var schemaV1 = []byte(schema.SchemaEventsV1)

// The values of schema.HeaderClientIDs: the consumer scans a record for client event
// ids only when it may hold one.
var noClientIDs, someClientIDs = []byte("0"), []byte("1")

// idBase is the seed of the events' ids: from the Idempotency-Key when there is one (so
// a retry carries the same ids, and the batch id lets the consumer drop a second copy),
// random otherwise. idem reports which.
func (e *Edge) idBase(r *httpserver.Request) (base [16]byte, idem bool) {
	if k := r.Ctx.Request.Header.Peek("Idempotency-Key"); len(k) > 0 && r.Idempotent() {
		return schema.BatchID(r.Key.ID, k), true
	}
	_, _ = rand.Read(base[:])
	return base, false
}

func (e *Edge) countRejections(b *Batch) {
	for _, rj := range b.Rejections {
		e.metrics.Events.WithLabelValues("rejected", rj.Rule).Inc()
	}
}

// fieldErrors turns rejections into errors[] entries with JSON Pointers.
func fieldErrors(rs []Rejection) []problem.FieldError {
	out := make([]problem.FieldError, len(rs))
	for i, rj := range rs {
		ptr := "/events/" + strconv.Itoa(rj.Index)
		if rj.Field != "event" {
			ptr += "/" + problem.Pointer(rj.Field)
		}
		out[i] = problem.FieldError{Field: "events[" + strconv.Itoa(rj.Index) + "]." + rj.Field, Rule: rj.Rule, Value: rj.Value, Pointer: ptr}
	}
	return out
}
