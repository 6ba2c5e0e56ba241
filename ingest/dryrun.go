package ingest

import (
	"fmt"

	json "github.com/goccy/go-json"
	"github.com/valyala/fasthttp"

	"svc/lib/httpserver"
	"svc/lib/problem"
)

// DryRunParam is the query parameter of POST /events that asks for a dry run:
// `POST /events?validate_only=true` (httpserver.Route.DryRunParam).
//
// A dry run runs every check a real request runs, in the same order and with the same
// answers: the key (revocation, expiry, allow-list), the version, the scope
// events:write, the body ceiling, the rate limits, the Idempotency-Key's shape, the
// batch's shape and each event's rules, the pixel's ownership. It then answers 200 with
// the body a 202 would carry ({accepted, rejected, rejections, request_id}) and stores
// and produces nothing: no Kafka record, no Idempotency-Key reservation or stored
// answer, no rejection record (rejections.go), no event counted in the edge's metrics.
// A batch with no acceptable event is the same 422 as for a real request.
//
// Quota: a dry run answered 200 spends one request of the key's windows, as any request
// does; one answered 4xx spends nothing, as any request does. A dry run costs the edge
// what a real request costs short of the produce (the parse, the email hashes, the key,
// pixel and gate look-ups), so it is paced by the same windows: free dry runs would let
// a key make unbounded work of the edge, and would let a client find out whether its
// windows are spent without spending (a 429 is still answered to a dry run once they
// are). Kafka's state does not matter: a dry run answers 200 while Kafka is down.
const DryRunParam = httpserver.DryRunQuery

// dryRun answers a dry run of b (parsed, its pixel checked): 200 with the 202's body,
// or the 422 a real request would get.
func dryRun(r *httpserver.Request, b *Batch) error {
	if len(b.Events) == 0 {
		return problem.Invalid(fmt.Sprintf("None of the %d events is acceptable; see errors[].", b.Total), fieldErrors(b.Rejections)...)
	}
	body, err := json.Marshal(Accepted{Accepted: len(b.Events), Rejected: len(b.Rejections), Duplicates: b.Duplicates,
		Rejections: nonNil(b.Rejections), RequestID: r.ID})
	if err != nil {
		return err
	}
	r.Raw(fasthttp.StatusOK, "application/json", body)
	return nil
}
