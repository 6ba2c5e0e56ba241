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
// for a request with a rejection, and never a ClickHouse round trip or a wait:
//
//   - A 202 that rejected events: its record is handed to the producer once Kafka has
//     acknowledged the batch's, before the 202 is written; an attempt whose batch Kafka
//     failed (a 503) writes none, so a retry without an Idempotency-Key does not count
//     them twice; one answered 503 with its outcome unknown writes it if the batch
//     lands after all. The record is lost if the edge dies within the producer's linger
//     after the acknowledgement, or if the producer's buffer is full (counted). It was
//     produced beside the batch's and the 202 waited for both: Kafka could then take it
//     and fail the batch (TestRejectionsOfA503NotKept). Carrying it inside the batch's
//     record, for the events' consumer to forward, is exact but needs a Redis claim per
//     record to count a re-forward once, and those claims doubled the p99 at 200k
//     (DESIGN.md, "Rejections kept").
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

// rejWork is a rejection record; the producer owns it from send until its callback,
// which returns it to the pool.
type rejWork struct {
	rec kgo.Record
	buf []byte
	key [16]byte
	r   rejection.Record
}

var rejPool = sync.Pool{New: func() any { return &rejWork{} }}

var rejectionsV1 = []byte(rejection.SchemaV1)

// rejectionMetrics counts rejection records by outcome: produced, failed (the
// producer refused or Kafka failed).
type rejectionMetrics struct{ produced, failed prometheus.Counter }

func newRejectionMetrics(reg prometheus.Registerer) *rejectionMetrics {
	v := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "svc_ingest_rejection_records_total",
		Help: "Rejection records (one per request with a rejection) by outcome: produced, failed."},
		[]string{"outcome"})
	reg.MustRegister(v)
	return &rejectionMetrics{v.WithLabelValues("produced"), v.WithLabelValues("failed")}
}

// rejectionRecord encodes the record of r's rejections (answered status, events in the
// batch, entries from fill); nil when fill adds none. The caller sends it or drops it.
func rejectionRecord(r *httpserver.Request, px workspace.Pixel, status, events int, fill func(*[]rejection.Entry)) *rejWork {
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
	return w
}

// sendRejections hands w (nil: nothing) to the producer without waiting.
func (e *Edge) sendRejections(w *rejWork) {
	if w == nil {
		return
	}
	m := e.rejm
	e.producer.TryProduce(context.Background(), &w.rec, func(_ *kgo.Record, err error) {
		if err != nil {
			m.failed.Inc()
		} else {
			m.produced.Inc()
		}
		rejPool.Put(w)
	})
}

// dropRejections returns w (nil: nothing) unsent: its batch did not land.
func dropRejections(w *rejWork) {
	if w != nil {
		rejPool.Put(w)
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
	e.sendRejections(rejectionRecord(r, px, p.Status, b.Total, fill))
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
	e.sendRejections(rejectionRecord(r, px, p.Status, 0, fieldRejections(p.Errors, p.Code)))
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
