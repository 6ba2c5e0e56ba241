package docs

import "svc/lib/problem"

// Documentation of GET /rejections (schema/rejection): what the edge refused. init adds
// it to Operations; components() merges rejectionComponents().

var exRejectionObj = map[string]any{
	"request_id": "req_8f14e45fceea167a5a36dedd", "received_at": "2026-09-14T10:15:00Z",
	"pixel_id": exPixel, "pixel_id_uuid": uuidOf(exPixel), "key_id": exKey, "key_id_uuid": uuidOf(exKey),
	"status": 202, "batch_events": 50, "event_index": 3, "field": "currency", "rule": "iso4217", "value": "EURO",
}

func init() {
	Operations["GET /rejections"] = Op{Tag: "Events", Description: "What became of a pixel's refused events, newest first, by cursor: " +
		"every event a 202 rejected (event_index its index in the batch) and every batch refused as a whole with its pixel known " +
		"(422, 409, 429; event_index null), with its request_id (the one the answer carried), key, time, field, rule and the value received. " +
		"Identity values are never stored: theirs, and any value with an @ in it, is \"(withheld)\". Dry runs are not recorded; " +
		"a 413 is not either (its body is never read). Rejections appear within seconds of the answer and are kept 30 days. " +
		"Stored rejections are capped per pixel and minute (100 by default); meta.rejections counts every rejection of the filter exactly, " +
		"meta.not_stored those past the cap, which the list cannot show.",
		Params: params([]Param{
			{Name: "pixel_id", In: "query", Required: true, Desc: "pxl_<uuid> or the raw UUID.", Schema: Schema{"type": "string"}, Example: exPixel},
			{Name: "since", In: "query", Desc: "Only rejections received from this instant on (RFC 3339; rounded down to its minute).", Schema: timeSchema, Example: "2026-09-14T10:00:00Z"},
			{Name: "rule", In: "query", Desc: "Only rejections of this rule (e.g. iso4217, required, rate_limited).", Schema: Schema{"type": "string", "maxLength": 64}, Example: "iso4217"},
		}, pList),
		Response: Schema{"type": "object", "required": []string{"data", "meta"}, "properties": Schema{
			"data": Schema{"type": "array", "items": ref("Rejection")},
			"meta": object("Paging, and the exact counts of the filter.", []string{"next_cursor", "rejections", "not_stored"}, Schema{
				"next_cursor": Schema{"type": []string{"string", "null"}, "description": "Pass as cursor for the next page; null on the last page."},
				"next_offset": Schema{"type": "integer", "description": "Deprecated offset paging only: where the next page starts."},
				"rejections":  integer("Every rejection of the pixel matching since and rule, exactly (stored or not)."),
				"not_stored":  integer("Those counted but not stored (past the per-pixel-per-minute cap): not in data."),
			}),
		}},
		Example: map[string]any{"data": []any{exRejectionObj}, "meta": map[string]any{"next_cursor": exCursor, "rejections": 1, "not_stored": 0}},
		Codes:   []problem.Code{problem.InvalidRequest, problem.NotFound}}
}

func rejectionComponents() map[string]Schema {
	return map[string]Schema{
		"Rejection": withIDs(object("A rejected event, or a batch refused as a whole.", []string{"request_id", "received_at", "pixel_id", "status", "event_index", "field", "rule", "value"}, Schema{
			"request_id":   str("The request: its answer's request_id and Request-Id header."),
			"received_at":  timeSchema,
			"pixel_id":     id("pxl_", "The pixel"),
			"key_id":       id("key_", "The key that sent it"),
			"status":       Schema{"type": "integer", "enum": []any{202, 409, 422, 429}, "description": "The answer's status: 202 (the event alone was rejected), 422, 409 or 429 (the batch)."},
			"batch_events": integer("Events in the batch (0 when the batch was refused before it was read: 409, 429)."),
			"event_index":  Schema{"type": []string{"integer", "null"}, "minimum": 0, "description": "The event's index in the batch; null for the batch as a whole."},
			"field":        str("The field at fault, as in errors[] (\"\" for a refusal of the whole request)."),
			"rule":         str("The rule it broke: as in the answer's rejections[] or errors[], or the problem code (rate_limited, quota_exceeded, idempotency_key_in_use, idempotency_key_reuse)."),
			"value":        Schema{"description": "The value received, as JSON; \"(withheld)\" for identity values and any value with an @."},
		}), "pixel_id", "key_id"),
	}
}
