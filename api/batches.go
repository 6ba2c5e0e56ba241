package api

import (
	"errors"
	"time"

	"svc/lib/apikey"
	"svc/lib/httpserver"
	"svc/lib/ids"
	"svc/lib/problem"
	"svc/schema"
	"svc/schema/trace"
	"svc/schema/workspace"
)

// BatchLife is the body of GET /batches/{request_id}: what became of one request to
// POST /events of the key's workspace, read from the stores (schema/trace).
type BatchLife struct {
	RequestID   string `json:"request_id"`
	PixelID     string `json:"pixel_id"`
	PixelIDUUID string `json:"pixel_id_uuid"`
	KeyID       string `json:"key_id"`
	KeyIDUUID   string `json:"key_id_uuid"`
	Status      int    `json:"status"`      // the answer: 202, or 422, 409, 429 refused whole
	ReceivedAt  string `json:"received_at"` // at the edge, RFC 3339, seconds
	Events      *int   `json:"events"`      // events in the request (null: refused before it was read)
	Accepted    uint64 `json:"accepted"`    // events stored
	// Rejected counts the stored rejections other than duplicates; RejectedByRule splits
	// them by rule.
	Rejected       uint64            `json:"rejected"`
	RejectedByRule map[string]uint64 `json:"rejected_by_rule"`
	Duplicates     uint64            `json:"duplicates"`
	// KafkaPartition, KafkaOffset: the record the batch was written as (null when no
	// event of it was stored); StoredAt: when ClickHouse stored its events.
	KafkaPartition *int32   `json:"kafka_partition"`
	KafkaOffset    *int64   `json:"kafka_offset"`
	StoredAt       *string  `json:"stored_at"`
	StoredCopies   int      `json:"stored_copies"` // Kafka records whose rows hold the request: 1 once stored
	TimeZone       string   `json:"time_zone"`
	Days           []DayNum `json:"days"` // the local days its events counted in
}

// DayNum is a number of events on one local day.
type DayNum struct {
	Date   string `json:"date"`
	Events uint64 `json:"events"`
}

func (a *API) batchRoutes() []httpserver.Route {
	return []httpserver.Route{{Method: "GET", Path: "/batches/{id}", Scope: ScopePixels,
		Summary: "The life of one POST /events request: received, accepted, rejected, duplicates, Kafka position, stored, local days.",
		Handle:  a.batch}}
}

// batch serves GET /batches/{request_id}: a request of the key's workspace and
// environment received within trace.LookBack, else 404 (as an id that is not a request
// id: in a path, every id that names nothing of the workspace is the same answer).
func (a *API) batch(r *httpserver.Request) error {
	raw := r.Param("id")
	if !ids.ValidRequestID(raw) {
		return notFound("request", raw)
	}
	ctx, cancel := a.ctx(r)
	defer cancel()
	b, found, err := trace.FindBatch(ctx, a.Conn, r.Key.WorkspaceID, r.Key.Env == apikey.Sandbox, raw, a.now())
	if err != nil {
		return a.storeErr(r, err)
	}
	if !found {
		return requestNotFound(raw)
	}
	zone, err := a.Keys.TimeZone(r.Context(), workspace.Pixel{ID: b.Pixel, WorkspaceID: r.Key.WorkspaceID})
	if errors.Is(err, workspace.ErrNotFound) {
		zone = workspace.Zone{Name: schema.UTC}
	} else if err != nil {
		return problem.Unavailable("the key store", 1)
	}
	loc, err := schema.LoadZone(zone.Name)
	if err != nil {
		loc, zone.Name = time.UTC, schema.UTC
	}
	out := BatchLife{RequestID: raw, PixelID: ids.Format(ids.Pixel, b.Pixel), PixelIDUUID: b.Pixel.String(),
		KeyID: ids.Format(ids.Key, b.Key), KeyIDUUID: b.Key.String(), Status: int(b.Status),
		ReceivedAt: b.ReceivedAt.Format(time.RFC3339), Accepted: b.Accepted(), RejectedByRule: b.Rejected,
		Duplicates: b.Duplicates, StoredCopies: len(b.Stored), TimeZone: zone.Name, Days: []DayNum{}}
	for _, n := range b.Rejected {
		out.Rejected += n
	}
	if b.BatchEvents > 0 || b.Status == 202 {
		n := int(max(b.BatchEvents, out.Accepted)) // a 202 with nothing rejected: all stored
		out.Events = &n
	}
	if len(b.Stored) > 0 {
		p := b.Stored[0]
		at := p.StoredAt.Format(time.RFC3339)
		out.KafkaPartition, out.KafkaOffset, out.StoredAt = &p.Partition, &p.Offset, &at
	}
	for _, d := range b.Days(loc) {
		out.Days = append(out.Days, DayNum{Date: day(d.Date), Events: d.Events})
	}
	return r.JSON(200, out)
}

// requestNotFound is the 404 of a well-formed request id with nothing on record: its
// detail names the cases a client holding that id can meet (pipeline.md).
func requestNotFound(raw string) error {
	p := problem.New(problem.NotFound, "No request %q of this key's workspace and environment is on record for the last %d days. "+
		"A batch answered 202 is on record once the pipeline has stored it, usually a second or two after its answer: poll. "+
		"A batch refused whole past the cap of stored rejections of its pixel and minute is only counted (GET /rejections, meta.not_stored), "+
		"not kept by its request id.", raw, int(trace.LookBack.Hours()/24))
	p.SuggestedAction = "Within seconds of the request's answer, poll again; later, check the request id (from the answer's request_id or Request-Id)."
	return p
}
