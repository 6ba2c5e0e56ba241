package ingest

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"svc/lib/apikey"
	"svc/lib/httpserver"
	"svc/lib/problem"
	"svc/schema"
	"svc/schema/rejection"
	"svc/schema/workspace"
)

// Rejections kept (schema/rejection). The edge writes one record per request it
// rejected something of to the topic rejections.v1, keyed by pixel; the consumer
// (rollup/rejections.go) writes them to ClickHouse in bulk, and GET /rejections lists
// them. The hot path pays one more record handed to the producer it already has, only
// for a request with a rejection, and never a ClickHouse round trip:
//
//   - A 202 that rejected events: its record is produced beside the batch's and the 202
//     waits for both acknowledgements (they travel together: no added wait in the
//     common case). A 202 therefore promises its rejections are kept as it promises its
//     events are. Should the rejection record fail while the batch landed, the 202 is
//     still given (the events are in) and svc_ingest_rejection_records_total{outcome}
//     counts it.
//   - A batch refused as a whole (422 from the parser with a pixel of the key's
//     workspace; the server's 429s and 409s and the Idempotency-Key's 422 via
//     Route.Refused, the pixel read from the body): its record is handed to the producer
//     and the answer does not wait. A refusal must stay cheap (a flood of 429s is what
//     the limits protect the edge from), so its record is lost if the edge dies within
//     the producer's linger, or if the producer's buffer is full (counted).
//
// Not recorded: a 413 (the body is never read, so the pixel is unknown: refusing an
// oversized body before reading it is what keeps it cheap), a request whose pixel is
// malformed, unknown or of another workspace (there is no pixel of the key's to file
// it under, and another workspace's must not learn of it), an authentication or scope
// refusal (no key allowed to write), a dry run (nothing is stored), and 5xx answers (not
// a rejection). A batch run twice by an Idempotency-Key takeover (its first edge died
// or its acknowledgement was overdue) has its rejections recorded by each run, under
// each run's request_id.

// rejWork is a rejection record in flight; the producer owns it until its callback.
type rejWork struct {
	rec     kgo.Record
	buf     []byte
	key     [16]byte
	r       rejection.Record
	ack     chan error
	discard bool // nobody waits: the callback returns it to the pool
}

var rejPool = sync.Pool{New: func() any { return &rejWork{ack: make(chan error, 1)} }}

var rejectionsV1 = []byte(rejection.SchemaV1)

// rejectionMetrics counts rejection records by outcome: produced, failed (the producer
// refused or Kafka failed), unconfirmed (a 202 answered before its acknowledgement).
type rejectionMetrics struct{ produced, failed, unconfirmed prometheus.Counter }

func newRejectionMetrics(reg prometheus.Registerer) *rejectionMetrics {
	v := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "svc_ingest_rejection_records_total",
		Help: "Rejection records (one per request with a rejection) by outcome: produced, failed, unconfirmed (a 202 answered before its acknowledgement)."},
		[]string{"outcome"})
	reg.MustRegister(v)
	return &rejectionMetrics{v.WithLabelValues("produced"), v.WithLabelValues("failed"), v.WithLabelValues("unconfirmed")}
}

// produceRejections hands the record of r's rejections to the producer. With wait, it
// returns the work whose ack the caller must read (awaitRejections); otherwise nil,
// and the record is on its own.
func (e *Edge) produceRejections(r *httpserver.Request, px workspace.Pixel, status, events int, fill func(*[]rejection.Entry), wait bool) *rejWork {
	w := rejPool.Get().(*rejWork)
	w.r = rejection.Record{Sandbox: r.Key.Env == apikey.Sandbox, Workspace: schema.UUID(r.Key.WorkspaceID), Pixel: schema.UUID(px.ID),
		Key: schema.UUID(r.Key.ID), ReceivedAt: time.Now().UnixMilli(), RequestID: r.ID, Status: status, Events: events,
		Entries: w.r.Entries[:0]}
	fill(&w.r.Entries)
	if len(w.r.Entries) == 0 {
		rejPool.Put(w)
		return nil
	}
	w.buf = rejection.Append(w.buf[:0], &w.r)
	w.key = px.ID
	w.rec = kgo.Record{Topic: schema.TopicRejections, Key: w.key[:], Value: w.buf,
		Headers: append(w.rec.Headers[:0], kgo.RecordHeader{Key: schema.HeaderSchema, Value: rejectionsV1})}
	w.discard = !wait
	m := e.rejm
	e.producer.TryProduce(context.Background(), &w.rec, func(_ *kgo.Record, err error) {
		if err != nil {
			m.failed.Inc()
		} else {
			m.produced.Inc()
		}
		if w.discard {
			rejPool.Put(w)
			return
		}
		w.ack <- err
	})
	if !wait {
		return nil
	}
	return w
}

// awaitRejections waits for w's acknowledgement (w nil: nothing to wait for) until
// deadline fires; a late one is counted as unconfirmed and w is left to the collector.
func (e *Edge) awaitRejections(w *rejWork, deadline <-chan time.Time) {
	if w == nil {
		return
	}
	select {
	case <-w.ack:
		rejPool.Put(w)
	case <-deadline:
		e.rejm.unconfirmed.Inc()
	}
}

// eventRejections fills entries from a batch's rejected events.
func eventRejections(rs []Rejection) func(*[]rejection.Entry) {
	return func(out *[]rejection.Entry) {
		for _, rj := range rs {
			*out = append(*out, rejection.Entry{Index: rj.Index, Field: rj.Field, Rule: rj.Rule, Value: rejection.Redact(rj.Field, rj.Value)})
		}
	}
}

// fieldRejections fills entries, each about the batch as a whole, from errors[].
func fieldRejections(errs []problem.FieldError, code problem.Code) func(*[]rejection.Entry) {
	return func(out *[]rejection.Entry) {
		for _, fe := range errs {
			*out = append(*out, rejection.Entry{Index: rejection.Batch, Field: fe.Field, Rule: fe.Rule, Value: rejection.Redact(fe.Field, fe.Value)})
		}
		if len(errs) == 0 {
			*out = append(*out, rejection.Entry{Index: rejection.Batch, Rule: string(code), Value: "null"})
		}
	}
}

// rejected records a batch the parser refused as a whole (422), when its pixel is one
// of the key's workspace. The answer does not wait for it.
func (e *Edge) rejected(r *httpserver.Request, b *Batch, p *problem.Problem) {
	if r.DryRun() || b.PixelID == "" {
		return
	}
	px, err := workspace.PixelOfKey(r.Context(), e.keys, r.Key, b.PixelID, problem.FieldError{})
	if err != nil {
		return
	}
	fill := fieldRejections(p.Errors, p.Code)
	if len(b.Envelope) == 0 { // no event acceptable: the events' own rejections
		fill = eventRejections(b.Rejections)
	}
	e.produceRejections(r, px, p.Status, b.Total, fill, false)
}

// refused is the route's Refused hook (httpserver.Route.Refused): a 429, 409 or 422
// the server answered before the handler, recorded when the body names a pixel of the
// key's workspace (never a dry run's). It reads only the body's pixel_id member, not the
// events. A 429 of the brake (brake.go) is then held, its body released first, a dry
// run's too.
func (e *Edge) refused(r *httpserver.Request, p *problem.Problem) {
	if !r.DryRun() {
		e.recordRefusal(r, p)
	}
	if r.Ctx.UserValue(brakeHeld{}) != nil {
		r.ReleaseBody()
		e.brake.hold(r.Ctx.Done())
	}
}

// recordRefusal records a refusal the server answered, when the body names a pixel of
// the key's workspace.
func (e *Edge) recordRefusal(r *httpserver.Request, p *problem.Problem) {
	raw := pixelOf(r.Body())
	if raw == "" {
		return
	}
	px, err := workspace.PixelOfKey(r.Context(), e.keys, r.Key, raw, problem.FieldError{})
	if err != nil {
		return
	}
	e.produceRejections(r, px, p.Status, 0, fieldRejections(p.Errors, p.Code), false)
}

// pixelOf returns the string value of the body's top-level pixel_id ("" when there is
// none or the body is not a JSON object up to it).
func pixelOf(body []byte) string {
	s := scanner{b: body}
	if s.kind() != kObject || !s.objectStart() {
		return ""
	}
	for s.err == nil {
		name := s.member()
		if s.err != nil {
			return ""
		}
		if string(name) == "pixel_id" {
			if s.kind() != kString {
				return ""
			}
			return string(s.str())
		}
		s.skip(0)
		if !s.next('}') {
			return ""
		}
	}
	return ""
}
