package docs

import (
	"svc/lib/apikey"
	"svc/lib/problem"
)

// Helpers that keep the schema table short.
func ref(name string) Schema { return Schema{"$ref": "#/components/schemas/" + name} }
func str(desc string) Schema { return Schema{"type": "string", "description": desc} }
func integer(desc string) Schema {
	return Schema{"type": "integer", "minimum": 0, "description": desc}
}
func boolean(desc string) Schema { return Schema{"type": "boolean", "description": desc} }
func object(desc string, required []string, props Schema) Schema {
	s := Schema{"type": "object", "description": desc, "properties": props}
	if len(required) > 0 {
		s["required"] = required
	}
	return s
}
func array(items Schema, desc string) Schema {
	return Schema{"type": "array", "items": items, "description": desc}
}
func enum(desc string, values ...string) Schema {
	return Schema{"type": "string", "enum": values, "description": desc}
}
func nullable(s Schema) Schema {
	c := Schema{}
	for k, v := range s {
		c[k] = v
	}
	c["type"] = []string{s["type"].(string), "null"}
	return c
}

// id is a prefixed public id, with its _uuid twin described separately.
func id(prefix, desc string) Schema {
	return Schema{"type": "string", "pattern": "^" + prefix + "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$", "description": desc + " (prefixed id; the raw UUID is in the _uuid twin)."}
}

var uuidSchema = Schema{"type": "string", "pattern": "^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$", "description": "The raw UUID of the id beside it."}

var dateSchema = Schema{"type": "string", "format": "date", "pattern": `^\d{4}-\d{2}-\d{2}$`, "description": "A day, YYYY-MM-DD (UTC)."}
var timeSchema = Schema{"type": "string", "format": "date-time", "description": "RFC 3339 timestamp, UTC."}
var decimalSchema = Schema{"type": "string", "pattern": `^-?\d{1,14}(\.\d{1,4})?$`, "description": "Decimal as a string, at most four decimals."}
var currencySchema = Schema{"type": "string", "pattern": "^[A-Z]{3}$", "description": "ISO 4217 currency code."}

// inboundCampaign is an inbound message's campaign id: cmp_<uuid> or the raw UUID.
var inboundCampaign = Schema{"type": "string", "pattern": "^(cmp_)?[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$",
	"description": "cmp_<uuid> or the raw UUID."}

// withMetrics adds an inbound message's figures (each optional, absent = 0) to props.
func withMetrics(props Schema) Schema {
	count := func(desc string) Schema {
		return Schema{"type": "integer", "minimum": 0, "description": desc + "; absent = 0."}
	}
	props["impressions"], props["clicks"], props["conversions"] = count("Impressions"), count("Clicks"), count("Conversions")
	props["spend"] = Schema{"type": []string{"string", "number"}, "pattern": `^\d{1,14}(\.\d{1,4})?$`,
		"description": "Non-negative decimal in the currency, a number or a string, at most four decimal places; absent = 0."}
	return props
}

// withIDs adds the <field>_uuid twin of every prefixed id field.
func withIDs(s Schema, fields ...string) Schema {
	props := s["properties"].(Schema)
	for _, f := range fields {
		props[f+"_uuid"] = uuidSchema
	}
	return s
}

func codeValues() []string {
	var out []string
	for _, c := range problem.Codes() {
		out = append(out, string(c))
	}
	return out
}

// components are the document's named schemas. Read resources list the fields a
// client can rely on; servers may add fields (additive changes never remove one).
func components() map[string]Schema {
	m := map[string]Schema{
		"Problem": object("RFC 9457 problem document: every failure.",
			[]string{"type", "title", "status", "code", "detail", "request_id", "doc_url", "retryable", "suggested_action"},
			Schema{
				"type":             Schema{"type": "string", "format": "uri", "description": "{docs_url}/errors/<code>: the code's page."},
				"title":            str("Short name of the problem."),
				"status":           Schema{"type": "integer", "minimum": 400, "maximum": 599, "description": "The HTTP status."},
				"code":             enum("Stable machine-readable code.", codeValues()...),
				"detail":           str("Explanation for this case."),
				"request_id":       Schema{"type": "string", "pattern": "^req_", "description": "Identifies the request (also the Request-Id header)."},
				"doc_url":          Schema{"type": "string", "format": "uri", "description": "The code's page; same as type."},
				"retryable":        boolean("Whether a retry (after Retry-After, if sent) can succeed."),
				"suggested_action": str("The one thing to change."),
				"required_scope":   str("Only on insufficient_scope."),
				"granted_scopes":   array(Schema{"type": "string"}, "Only on insufficient_scope."),
				"errors":           array(ref("FieldError"), "Only on invalid_request: one entry per field."),
				"expired_at":       Schema{"type": "string", "format": "date-time", "description": "Only on key_expired."},
				"client_ip":        str("Only on ip_not_allowed: the address seen."),
			}),
		"FieldError": object("One field that failed validation.", []string{"field", "rule", "value"}, Schema{
			"field":   str("Name of the field (dotted path for nested fields)."),
			"rule":    str("The rule it broke, e.g. required, max_items, normalised, format."),
			"value":   Schema{"description": "The value received (never a raw contact detail)."},
			"pointer": str("RFC 6901 JSON Pointer to the field in the body."),
			"detail":  str("Optional explanation."),
		}),
		"ListMeta": object("Paging of a list.", []string{"next_cursor"}, Schema{
			"next_cursor": Schema{"type": []string{"string", "null"}, "description": "Pass as cursor for the next page; null on the last page."},
			"next_offset": Schema{"type": "integer", "description": "Deprecated offset paging only: where the next page starts."},
		}),
		"Event": eventSchema(), // from schema.EventFields (event.go)
		"Batch": object("Body of POST /events.", []string{"pixel_id", "events"}, Schema{
			"pixel_id": Schema{"type": "string", "description": "pxl_<id> or the raw UUID; a pixel of the key's workspace."},
			"events":   Schema{"type": "array", "minItems": 1, "maxItems": 50, "items": ref("Event")},
		}),
		"EventRejection": object("One event rejected from an otherwise accepted batch (the 202's rejections[]; GET /rejections lists the records, Rejection).", []string{"index", "field", "rule", "value"}, Schema{
			"index": integer("Position of the event in events[]."),
			"field": str("The field."),
			"rule":  str("The rule it broke."),
			"value": Schema{"description": "The value received (never a raw contact detail)."},
		}),
		"EventsAccepted": object("202 answer of POST /events.", []string{"accepted", "rejected", "duplicates", "rejections", "request_id"}, Schema{
			"accepted": integer("Events accepted; they appear in the next daily rollup, except a copy of an event_id the pixel already has within the " +
				"deduplication window (48 h), which is dropped after this answer: it cannot say so."),
			"rejected":   integer("Events rejected (see rejections), duplicates included."),
			"duplicates": integer("Events refused as a later copy of an event_id earlier in this batch (rule duplicate_event_id, among rejected)."),
			"rejections": array(ref("EventRejection"), "Why each rejected event was refused."),
			"request_id": str("The request id."),
		}),
		"Me": withIDs(object("The calling key's own record.", []string{"id", "environment", "workspace_id", "scopes", "version"}, Schema{
			"id":             id("key_", "The key"),
			"environment":    enum("live or sandbox.", apikey.Live, apikey.Sandbox),
			"status":         enum("A key that answers is active.", "active"),
			"workspace_id":   id("org_", "The key's workspace"),
			"workspace_name": str("The workspace's name."),
			"showroom":       boolean("true for a showroom workspace (sandbox keys)."),
			"scopes":         array(enum("A scope.", apikey.Scopes...), "Scopes granted."),
			"expires_at":     nullable(timeSchema),
			"pinned_version": Schema{"type": []string{"string", "null"}, "description": "The version pinned on the key."},
			"version":        str("The API version this request used."),
			"allow":          array(Schema{"type": "string"}, "Address allow-list; empty: every address."),
			"limits":         array(ref("LimitWindow"), "The key's windows after this request (as GET /limits)."),
			"created_at":     timeSchema,
		}), "id", "workspace_id"),
		"Window": object("One rate-limit window.", []string{"name", "quota", "window_seconds", "seconds"}, Schema{
			"name":           enum("burst or daily.", "burst", "daily"),
			"quota":          integer("Requests per window."),
			"window_seconds": integer("Window length in seconds (the name GET /limits uses)."),
			"seconds":        integer("The same as window_seconds, under the name it had first; kept for existing clients."),
		}),
		"LimitWindow": object("One window of the calling key and its state.", []string{"name", "quota", "window_seconds", "remaining", "reset"}, Schema{
			"name":           enum("burst or daily.", "burst", "daily"),
			"quota":          integer("Requests per window."),
			"window_seconds": integer("Window length in seconds."),
			"remaining":      integer("Left after this request."),
			"reset":          integer("Seconds until the window is full again."),
			"scope":          enum("Counted per key, not per workspace.", "key"),
		}),
		"RateLimit": object("x-rateLimit: the windows an operation spends from.", []string{"scope", "windows", "policy"}, Schema{
			"scope":   enum("Windows are counted per API key.", "key"),
			"cost":    integer("Requests spent per call."),
			"windows": array(ref("Window"), "Burst and daily windows of a default key."),
			"policy":  str("The RateLimit-Policy header value of a default key."),
			"note":    str("How to learn the calling key's own windows."),
		}),
		"Limits": withIDs(object("GET /limits: the windows of the calling key.", []string{"policy", "limits"}, Schema{
			"key_id": id("key_", "The key"),
			"policy": str("The RateLimit-Policy header's value."),
			"limits": array(ref("LimitWindow"), "Burst and daily windows, after this request."),
		}), "key_id"),
		"Version": object("A served version.", []string{"version", "status"}, Schema{
			"version":  dateSchema,
			"status":   enum("Lifecycle.", "stable", "deprecated", "preview"),
			"released": dateSchema,
		}),
		"Versions": object("GET /versions.", []string{"data"}, Schema{
			"data":    array(ref("Version"), "Served versions, oldest first."),
			"aliases": Schema{"type": "object", "additionalProperties": dateSchema, "description": "stable and next → dated version."},
			"current": str("The version this request was served with."),
		}),
		"Account": withIDs(object("The organisation behind the workspace.", []string{"id"}, Schema{
			"id": id("org_", "The workspace"), "name": str("Trading name."), "legal_name": str("Legal name."),
			"country":  str("ISO 3166-1 alpha-2; \"\" when not set."),
			"currency": Schema{"type": "string", "pattern": "^([A-Z]{3})?$", "description": "ISO 4217 currency code of the organisation; \"\" when not set."},
			"timezone": str("The organisation's IANA zone, from its catalog; \"\" when not set. Not the reporting zone of rollups: each pixel's time_zone."),
			"industry": str("Industry."), "created_at": timeSchema,
			"environment":              enum("live, or sandbox for a showroom workspace.", "live", "sandbox"),
			"showroom":                 Schema{"type": "boolean", "description": "Whether the workspace is a showroom (sample data, sandbox keys)."},
			"raw_event_retention_days": Schema{"type": []string{"integer", "null"}, "minimum": 8, "description": "Days raw events are kept (null: unlimited); rollups keep every day."},
		}), "id"),
		"Plan": withIDs(object("A media plan.", []string{"id"}, Schema{
			"id": id("pln_", "The plan"), "name": str("Name."), "advertiser": str("Brand."),
			"objective": str("awareness, consideration, conversion or retention."), "status": str("draft, approved, live, completed or cancelled."),
			"start_date": dateSchema, "end_date": dateSchema, "budget": decimalSchema, "currency": currencySchema,
			"channels": array(Schema{"type": "string"}, "Channels."), "owner": str("Planner responsible."),
			"created_at": timeSchema, "updated_at": timeSchema,
		}), "id"),
		"Line": withIDs(object("A line item of a plan.", []string{"id"}, Schema{
			"id": id("lin_", "The line item"), "plan_id": id("pln_", "Its plan"), "name": str("Name."),
			"channel": str("Channel."), "publisher": str("Publisher."), "buy_type": str("cpm, cpc, cpa, cpv or flat."),
			"unit_cost": decimalSchema, "start_date": dateSchema, "end_date": dateSchema, "budget": decimalSchema,
			"currency": currencySchema, "planned_impressions": integer("Planned impressions."), "status": str("Status."),
		}), "id", "plan_id"),
		"Campaign": withIDs(object("A campaign in market.", []string{"id"}, Schema{
			"id": id("cmp_", "The campaign"), "plan_id": nullable(Schema{"type": "string", "description": "The plan it executes (pln_…), or null."}),
			"name": str("Name."), "objective": str("Objective."), "status": str("draft, scheduled, active, paused or completed."),
			"channels": array(Schema{"type": "string"}, "Channels."), "start_date": dateSchema, "end_date": dateSchema,
			"budget": decimalSchema, "currency": currencySchema,
		}), "id"),
		"Study": withIDs(object("A measurement study.", []string{"id"}, Schema{
			"id": id("std_", "The study"), "campaign_id": nullable(Schema{"type": "string", "description": "The campaign it measures (cmp_…), or null."}),
			"name": str("Name."), "kind": str("brand_lift, conversion_lift, geo_experiment, mmm, attribution or survey."),
			"status": str("planned, running or completed."), "period_start": dateSchema, "period_end": dateSchema,
			"methodology": str("Methodology."),
		}), "id"),
		"Finding": withIDs(object("One result of a study.", []string{"id"}, Schema{
			"id": id("fnd_", "The finding"), "study_id": id("std_", "Its study"), "metric": str("e.g. ad_recall_lift, roas."),
			"value": Schema{"type": "number"}, "unit": str("percent, points, ratio, count or currency."),
			"confidence": Schema{"type": "number", "minimum": 0, "maximum": 1}, "ci_lower": Schema{"type": "number"},
			"ci_upper": Schema{"type": "number"}, "summary": str("One sentence."),
		}), "id", "study_id"),
		"PlanActual": withIDs(object("Delivered performance of one line item on one day.", []string{"plan_id", "line_id", "date"}, Schema{
			"plan_id": id("pln_", "The plan"), "line_id": id("lin_", "The line item"), "date": dateSchema,
			"impressions": integer("Impressions."), "clicks": integer("Clicks."), "spend": decimalSchema,
			"currency": currencySchema, "conversions": integer("Conversions."),
		}), "plan_id", "line_id"),
		"CampaignActual": withIDs(object("Delivered performance of a campaign on one day.", []string{"campaign_id", "date"}, Schema{
			"campaign_id": id("cmp_", "The campaign"), "date": dateSchema, "impressions": integer("Impressions."),
			"clicks": integer("Clicks."), "spend": decimalSchema, "currency": currencySchema,
			"conversions": integer("Conversions."), "source": str("import or webhook."),
		}), "campaign_id"),
		"PixelRollup": withIDs(object("A pixel's events of one local day, per event name and currency.", []string{"pixel_id", "date", "time_zone", "event_name", "events"}, Schema{
			"pixel_id": id("pxl_", "The pixel"), "date": Schema{"type": "string", "format": "date", "description": "The calendar day (YYYY-MM-DD) in time_zone."},
			"time_zone":  str("The IANA time zone whose day date is (the request's time_zone, the pixel's, its workspace's, or UTC)."),
			"event_name": str("Event name."),
			"currency":   str("Currency of value (empty when none)."), "events": integer("Events."),
			"consented_events": integer("Events with consent.measurement true."),
			"value":            decimalSchema, "unique_people": integer("Distinct hashed emails."),
			"status": enum("open while the day can still change, final after.", "open", "final"),
		}), "pixel_id"),
		"ActualsRow": object("One line item on one day.", []string{"plan_id", "line_id", "date", "currency"}, Schema{
			"plan_id": Schema{"type": "string", "description": "pln_… or UUID."}, "line_id": Schema{"type": "string", "description": "lin_… or UUID; must belong to the plan."},
			"date": dateSchema, "impressions": integer("Impressions."), "clicks": integer("Clicks."),
			"spend":    Schema{"type": []string{"string", "number"}, "description": "Decimal, at most four places."},
			"currency": currencySchema, "conversions": integer("Conversions."),
		}),
		"ActualsImport": object("Body of POST /imports/actuals.", []string{"rows"}, Schema{
			"rows": Schema{"type": "array", "minItems": 1, "maxItems": 500, "items": ref("ActualsRow")},
		}),
		"ImportResult": object("Result of an actuals import.", []string{"rows", "upserted"}, Schema{
			"rows":       integer("Rows received."),
			"upserted":   integer("Rows written (each replaces its plan, line and day)."),
			"request_id": str("The request id."),
		}),
		"InboundMessage": Schema{"description": "A signed partner message: {type, data}. The two types that write campaign actuals have " +
			"the shapes below; a message of another type is recorded as ignored.",
			"oneOf": []any{ref("ActualsReported"), ref("CampaignActualsMessage")}},
		"ActualsReported": object("actuals.reported: one campaign, one or more days.", []string{"type", "data"}, Schema{
			"type": Schema{"const": "actuals.reported"},
			"data": object("The campaign and its days.", []string{"campaign_id", "currency", "days"}, Schema{
				"campaign_id": inboundCampaign, "currency": currencySchema,
				"days": Schema{"type": "array", "minItems": 1, "maxItems": 500, "description": "One entry per day.",
					"items": object("One day.", []string{"date"}, withMetrics(Schema{"date": dateSchema}))},
			}),
		}),
		"CampaignActualsMessage": object("campaign.actuals: rows of one or several campaigns.", []string{"type", "data"}, Schema{
			"type": Schema{"const": "campaign.actuals"},
			"data": object("The rows.", []string{"rows"}, Schema{
				"rows": Schema{"type": "array", "minItems": 1, "maxItems": 500, "description": "One entry per campaign and day.",
					"items": object("One campaign on one day.", []string{"campaign_id", "date", "currency"},
						withMetrics(Schema{"campaign_id": inboundCampaign, "date": dateSchema, "currency": currencySchema}))},
			}),
		}),
		"InboundResult": object("Outcome of an inbound message.", []string{"outcome", "message_id"}, Schema{
			"outcome":      enum("Recorded outcome.", "processed", "ignored", "failed"),
			"message_id":   str("SVC-Webhook-Id."),
			"type":         str("Message type."),
			"rows_written": integer("Actuals rows written."),
			"reason":       str("Why it was ignored."),
		}),
		"Health": object("Health state.", []string{"status"}, Schema{
			"status": enum("State.", "ok", "ready", "unavailable"),
			"checks": Schema{"type": "object", "additionalProperties": enum("The check's state.", "ok", "failing"),
				"description": "Every readiness check by name and its state (readyz only); a dependency's error is logged, never answered."},
			"failed": Schema{"type": "object", "additionalProperties": enum("Always failing.", "failing"),
				"description": "The failing checks by name (readyz only, when unavailable)."},
		}),
		"Discovery": object("/.well-known/svc: everything a client needs, in one fetch, with the calling key's own limits and scopes.",
			[]string{"service", "base_url", "auth", "scopes", "limits", "versions", "openapi", "docs", "mcp", "key"}, Schema{
				"service": str("svc"), "base_url": Schema{"type": "string", "format": "uri"},
				"auth": Schema{"type": "object"}, "scopes": array(Schema{"type": "object"}, "Every scope and the operations that need it."),
				"limits":   ref("DiscoveryLimits"),
				"versions": Schema{"type": "object"},
				"openapi":  Schema{"type": "string", "format": "uri"}, "docs": Schema{"type": "object"},
				"mcp": Schema{"type": "object"},
				"key": ref("DiscoveryKey"),
			}),
		"DiscoveryLimits": object("The calling key's windows, the defaults, headers and ceilings.",
			[]string{"scope", "windows", "policy", "default_windows", "default_policy"}, Schema{
				"scope": enum("Windows are counted per API key.", "key"),
				"windows": array(object("One window of the calling key and its state after this request.",
					[]string{"name", "quota", "window_seconds", "seconds", "remaining", "reset"}, Schema{
						"name":           enum("burst or daily.", "burst", "daily"),
						"quota":          integer("Requests per window."),
						"window_seconds": integer("Window length in seconds (the name GET /limits uses)."),
						"seconds":        integer("The same as window_seconds, under the name it had first; kept for existing clients."),
						"remaining":      integer("Left after this request."),
						"reset":          integer("Seconds until the window is full again."),
					}), "The calling key's burst and daily windows."),
				"policy":          str("The calling key's RateLimit-Policy header value."),
				"default_windows": array(ref("Window"), "Burst and daily windows of a default key."),
				"default_policy":  str("The RateLimit-Policy of a default key."),
			}),
		"DiscoveryKey": withIDs(object("The calling key.", []string{"id", "environment", "workspace_id", "granted_scopes", "version"}, Schema{
			"id":             id("key_", "The key"),
			"environment":    enum("live or sandbox.", apikey.Live, apikey.Sandbox),
			"workspace_id":   id("org_", "The key's workspace"),
			"granted_scopes": array(enum("A scope.", apikey.Scopes...), "Scopes granted to the key."),
			"pinned_version": Schema{"type": []string{"string", "null"}, "description": "The version pinned on the key."},
			"version":        str("The API version this request used."),
		}), "id", "workspace_id"),
		"Linkset": object("RFC 9264 linkset (RFC 9727 API catalog).", []string{"linkset"}, Schema{
			"linkset": array(Schema{"type": "object", "required": []string{"anchor"}}, "Link contexts."),
		}),
		"JSONRPC": object("A JSON-RPC 2.0 message of the MCP streamable HTTP transport.", []string{"jsonrpc"}, Schema{
			"jsonrpc": Schema{"const": "2.0"}, "id": Schema{"type": []string{"string", "integer"}},
			"method": str("MCP method, e.g. tools/list, tools/call."), "params": Schema{"type": "object"},
			"result": Schema{"type": "object"}, "error": Schema{"type": "object"},
		}),
	}
	for _, more := range []map[string]Schema{privacyComponents(), rejectionComponents(), visibilityComponents()} {
		for k, v := range more {
			if _, dup := m[k]; dup {
				panic("docs: schema " + k + " declared twice") // a programming error, caught by every test
			}
			m[k] = v
		}
	}
	return m
}
