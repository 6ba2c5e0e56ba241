package docs

import "svc/lib/problem"

// Documentation of the pipeline's visibility reads (schema/trace): the life of one batch
// (GET /batches/{id}) and the pixels' health (GET /pixels, GET /pixels/{id}). init adds them to Operations; components() merges
// visibilityComponents().

const exRequest = "req_5f2c9a0b1d3e4f5a6b7c8d9e"

var exBatchObj = map[string]any{
	"request_id": exRequest, "pixel_id": exPixel, "pixel_id_uuid": uuidOf(exPixel), "key_id": exKey, "key_id_uuid": uuidOf(exKey),
	"status": 202, "received_at": "2026-09-14T10:15:00Z", "events": 5, "accepted": 2, "rejected": 1,
	"rejected_by_rule": map[string]any{"iso4217": 1}, "duplicates": 2, "kafka_partition": 7, "kafka_offset": 1048576,
	"stored_at": "2026-09-14T10:15:01Z", "stored_copies": 1, "time_zone": "America/New_York",
	"days": []any{map[string]any{"date": "2026-09-12", "events": 1}, map[string]any{"date": "2026-09-14", "events": 1}},
}

var exPixelObj = map[string]any{
	"id": exPixel, "id_uuid": uuidOf(exPixel), "name": "Checkout", "time_zone": "America/New_York", "created_at": "2026-09-01T08:00:00Z",
	"last_accepted_at": "2026-09-14T10:15:00Z", "kafka_partition": 7, "ingested_through": "2026-09-14T10:15:02.750Z", "lag_seconds": 0.4,
	"days": []any{map[string]any{"date": "2026-09-14", "received": 1204, "accepted": 1180, "rejected": 20,
		"rejected_by_rule": map[string]any{"iso4217": 12, "required": 8}, "duplicates": 4}},
}

var pDays = Param{Name: "days", In: "query", Desc: "How many local days, today included (1–31, default 7).",
	Schema: Schema{"type": "integer", "minimum": 1, "maximum": 31, "default": 7}, Example: 7}

const pixelHealthDesc = "Per local day of the pixel's reporting zone (the last days days, today included, oldest first): accepted, the events of the day " +
	"as the rollups count them (by occurred_at, as GET /pixel-rollups); rejected by rule and duplicates (rule duplicate_event_id), " +
	"by the day they were received, counted exactly (GET /rejections' counts); received, their sum. last_accepted_at: when the edge " +
	"received the latest stored event within those days. kafka_partition: the partition of events.v1 the pixel's batches go to; " +
	"ingested_through: that partition's completeness watermark (every event of the pixel a 202 accepted before it is stored); " +
	"lag_seconds: now minus it (about 0.25–0.5 s when the consumer keeps up); the three are null until the consumer has published them."

func init() {
	Operations["GET /pixels"] = Op{Tag: "Events", Description: "The workspace's pixels by id, by cursor, each with its health. " + pixelHealthDesc,
		Params: params([]Param{pDays}, pList), Response: list("Pixel"),
		Example: map[string]any{"data": []any{exPixelObj}, "meta": map[string]any{"next_cursor": exCursor}},
		Codes:   []problem.Code{problem.InvalidRequest}}
	Operations["GET /pixels/{id}"] = Op{Tag: "Events", Description: "One pixel of the workspace with its health. " + pixelHealthDesc,
		Params: []Param{pID("pxl_", "pixel"), pDays}, Response: ref("Pixel"), Example: exPixelObj,
		Codes: []problem.Code{problem.InvalidRequest, problem.NotFound}}
	Operations["GET /batches/{id}"] = Op{Tag: "Events", Description: "The life of one POST /events request of the key's workspace and environment, " +
		"by the request_id its answer carried: when it was received, how many of its events were stored (accepted), rejected (by rule) " +
		"and dropped as duplicates (rule duplicate_event_id: a copy in the batch, refused by the edge, or a copy of an event of an earlier batch, " +
		"dropped by the consumer after the 202; rule duplicate_batch: the events of a retry with the same Idempotency-Key stored as a copy of " +
		"its first attempt, which holds them), the Kafka partition and offset it was written at, when ClickHouse stored its events, " +
		"and the local days of the pixel's reporting zone its events counted in (by occurred_at, as GET /pixel-rollups counts them). " +
		"stored_copies is the number of Kafka records whose rows hold the request: 1 once it is stored, never more (exactly once). " +
		"A batch refused whole (422, 409, 429) is found too, with nothing stored. A request is looked for among the 8 days before now " +
		"(the shortest raw-event retention); an unknown request id, one of another workspace or environment, one older than that, " +
		"one not yet stored (seconds after its 202) and an id that is not a request id are 404. A 202's rejections are all counted, " +
		"also those past the per-pixel-per-minute cap of stored ones (GET /rejections, meta.not_stored); a batch refused whole past " +
		"that cap is only counted per pixel and minute, so 404 by its id.",
		Params: []Param{{Name: "id", In: "path", Required: true, Desc: "The request id (req_ and 24 hex digits): the answer's request_id and Request-Id header.",
			Schema: Schema{"type": "string"}, Example: exRequest}},
		Response: ref("BatchLife"), Example: exBatchObj, Codes: []problem.Code{problem.NotFound}}
}

func visibilityComponents() map[string]Schema {
	day := object("Events of one local day.", []string{"date", "events"}, Schema{
		"date": Schema{"type": "string", "format": "date", "description": "A calendar day of time_zone."}, "events": integer("Events."),
	})
	return map[string]Schema{
		"Pixel": withIDs(object("A pixel and its health.", []string{"id", "name", "time_zone", "created_at", "last_accepted_at",
			"kafka_partition", "ingested_through", "lag_seconds", "days"}, Schema{
			"id":               id("pxl_", "The pixel"),
			"name":             str("Its name."),
			"time_zone":        str("Its reporting zone (IANA): the pixel's, else its workspace's, else UTC."),
			"created_at":       timeSchema,
			"last_accepted_at": nullable(timeSchema),
			"kafka_partition":  Schema{"type": []string{"integer", "null"}, "minimum": 0, "description": "The partition of events.v1 its batches go to."},
			"ingested_through": Schema{"type": []string{"string", "null"}, "format": "date-time", "description": "Every event of the pixel a 202 accepted before this instant is stored (RFC 3339, ms)."},
			"lag_seconds":      Schema{"type": []string{"number", "null"}, "minimum": 0, "description": "Now minus ingested_through: the pipeline's lag for the pixel."},
			"days": array(object("One local day.", []string{"date", "received", "accepted", "rejected", "rejected_by_rule", "duplicates"}, Schema{
				"date":             Schema{"type": "string", "format": "date", "description": "A calendar day of time_zone."},
				"received":         integer("accepted + rejected + duplicates."),
				"accepted":         integer("Events of the day, as the rollups count them."),
				"rejected":         integer("Events and batches rejected, duplicates excluded (the sum of rejected_by_rule)."),
				"rejected_by_rule": Schema{"type": "object", "additionalProperties": Schema{"type": "integer", "minimum": 0}, "description": "Rejections by rule."},
				"duplicates":       integer("Events dropped as a later copy of an event_id."),
			}), "The last days, oldest first."),
		}), "id"),
		"BatchLife": withIDs(object("What became of one POST /events request.", []string{"request_id", "pixel_id", "status", "received_at", "events",
			"accepted", "rejected", "rejected_by_rule", "duplicates", "kafka_partition", "kafka_offset", "stored_at", "stored_copies", "time_zone", "days"}, Schema{
			"request_id":       str("The request: its answer's request_id."),
			"pixel_id":         id("pxl_", "The pixel"),
			"key_id":           id("key_", "The key that sent it"),
			"status":           Schema{"type": "integer", "enum": []any{202, 409, 422, 429}, "description": "The answer's status."},
			"received_at":      timeSchema,
			"events":           Schema{"type": []string{"integer", "null"}, "minimum": 0, "description": "Events in the request; null when none was read: a batch refused before its body was read (409, 429), or a 422 whose body held no event."},
			"accepted":         integer("Events stored: the 202's accepted less the copies the consumer dropped."),
			"rejected":         integer("Events rejected, duplicates excluded (the sum of rejected_by_rule)."),
			"rejected_by_rule": Schema{"type": "object", "additionalProperties": Schema{"type": "integer", "minimum": 0}, "description": "Rejected events by rule (as GET /rejections names them)."},
			"duplicates":       integer("Events dropped as a later copy of an event_id (in the batch, or of an earlier batch)."),
			"kafka_partition":  Schema{"type": []string{"integer", "null"}, "minimum": 0, "description": "The partition of events.v1 the batch was written to; null when nothing of it was stored."},
			"kafka_offset":     Schema{"type": []string{"integer", "null"}, "minimum": 0, "description": "Its offset in that partition; null when nothing of it was stored."},
			"stored_at":        nullable(timeSchema),
			"stored_copies":    integer("Kafka records whose rows hold the request: 1 once stored (0 before, or when nothing was accepted)."),
			"time_zone":        str("The pixel's reporting zone (IANA), whose days days are."),
			"days":             array(day, "The local days its stored events counted in, in order."),
		}), "pixel_id", "key_id"),
	}
}
