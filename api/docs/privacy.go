package docs

import "svc/lib/problem"

// Documentation of the privacy operations (privacy/README.md): erasure of a person by
// identity. Kept beside the main tables so they can be read on their own; init adds
// them to Operations, and components() merges privacyComponents().

const exErasure = "era_4c7e2b1d-9a3f-4e6b-8c5d-1f2e3a4b5c6d"

var exErasureObj = map[string]any{
	"id": exErasure, "id_uuid": uuidOf(exErasure), "status": "completed",
	"identity":    map[string]any{"email_sha256": "b5fc85e55755f9e0d030a10ab4429b6b2944855f9a0d60077fe832becbc41d72"},
	"suppress":    false,
	"environment": "live", "workspace_id": exWorkspace, "workspace_id_uuid": uuidOf(exWorkspace),
	"requested_at": "2026-09-14T10:15:00Z", "started_at": "2026-09-14T10:15:02Z", "completed_at": "2026-09-14T10:15:09Z",
	"events_affected": 3, "events_remaining": 0,
	"days_recomputed": []any{map[string]any{"pixel_id": exPixel, "pixel_id_uuid": uuidOf(exPixel), "date": "2026-09-13"},
		map[string]any{"pixel_id": exPixel, "pixel_id_uuid": uuidOf(exPixel), "date": "2026-09-14"}},
	"request_id": "req_8f14e45fceea167a5a36dedd",
}

func init() {
	Operations["POST /erasures"] = Op{Tag: "Privacy", Description: "Erase a person from everything the workspace stores (GDPR art. 17, CCPA deletion): " +
		"every stored event of the key's workspace (and environment) carrying the identity loses it — the event and its value still count, as an unconsented event would — " +
		"and the daily rollups of every affected day are rebuilt so that unique_people no longer counts the person. Events still in flight are covered: " +
		"everything received up to the request. With suppress, later events of the identity lose it at the edge too. " +
		"Send identity.email (trimmed and lower-cased, as POST /events requires; hashed at once, never stored) or identity.email_sha256 (64 hex digits). " +
		"Answers 202 with the erasure record (status pending); follow it with GET /erasures/{id} or the erasure.completed webhook. Send an Idempotency-Key.",
		Body: "ErasureRequest", BodyExample: map[string]any{"identity": map[string]any{"email": "ada@example.com"}, "suppress": false},
		Status: 202, Response: ref("Erasure"),
		Example: func() map[string]any {
			m := map[string]any{}
			for k, v := range exErasureObj {
				m[k] = v
			}
			m["status"], m["started_at"], m["completed_at"], m["events_affected"], m["events_remaining"], m["days_recomputed"] =
				"pending", nil, nil, nil, nil, []any{}
			return m
		}(),
		Codes: []problem.Code{problem.InvalidRequest, problem.ServiceUnavailable}}
	Operations["GET /erasures"] = Op{Tag: "Privacy", Description: "Erasure requests of the workspace, newest first, by cursor: the audit trail to file as proof.",
		Params: params(pList, []Param{{Name: "status", In: "query", Desc: "Only erasures in this status (pending, running, completed).",
			Schema: enum("Status.", "pending", "running", "completed")}}),
		Response: list("Erasure"), Example: listExample(exErasureObj), Codes: []problem.Code{problem.InvalidRequest}}
	Operations["GET /erasures/{id}"] = Op{Tag: "Privacy", Description: "One erasure: its status, the events it affected, the days whose rollups were rebuilt, and when.",
		Params: []Param{pID("era_", "erasure")}, Response: ref("Erasure"), Example: exErasureObj, Codes: []problem.Code{problem.NotFound}}
}

func privacyComponents() map[string]Schema {
	return map[string]Schema{
		"ErasureRequest": object("Body of POST /erasures: exactly one of identity.email and identity.email_sha256.", []string{"identity"}, Schema{
			"identity": object("The person to erase.", nil, Schema{
				"email":        Schema{"type": "string", "maxLength": 254, "description": "Trimmed and lower-cased address; hashed on arrival, never stored or echoed."},
				"email_sha256": Schema{"type": "string", "pattern": "^[0-9a-fA-F]{64}$", "description": "Hex SHA-256 of the normalised address."},
			}),
			"suppress": boolean("Also drop the identity from every later event of the workspace at the edge (default false)."),
		}),
		"ErasureDay": withIDs(object("A pixel's UTC day whose rollups were rebuilt.", []string{"pixel_id", "date"}, Schema{
			"pixel_id": id("pxl_", "The pixel"), "date": dateSchema,
		}), "pixel_id"),
		"Erasure": withIDs(object("An erasure request and what was done for it.", []string{"id", "status", "identity", "requested_at"}, Schema{
			"id":     id("era_", "The erasure"),
			"status": enum("pending (accepted), running, completed.", "pending", "running", "completed"),
			"identity": object("The erased identity: only ever its hash.", []string{"email_sha256"}, Schema{
				"email_sha256": Schema{"type": "string", "pattern": "^[0-9a-f]{64}$", "description": "Hex SHA-256 of the normalised address."},
			}),
			"suppress":         boolean("Later events lose the identity at the edge."),
			"environment":      enum("live, or sandbox for a showroom workspace.", "live", "sandbox"),
			"workspace_id":     id("org_", "The workspace"),
			"requested_at":     timeSchema,
			"started_at":       nullable(timeSchema),
			"completed_at":     nullable(timeSchema),
			"events_affected":  Schema{"type": []string{"integer", "null"}, "minimum": 0, "description": "Stored events that lost the identity (null until counted)."},
			"events_remaining": Schema{"type": []string{"integer", "null"}, "minimum": 0, "description": "Stored events in scope still carrying the identity after the erasure: 0 once erased (null before)."},
			"days_recomputed":  array(ref("ErasureDay"), "Pixel-days whose rollups were rebuilt (listed once rebuilt)."),
			"request_id":       str("The request that asked for the erasure."),
		}), "id", "workspace_id"),
	}
}
