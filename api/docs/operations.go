package docs

import (
	"svc/lib/problem"
)

// Param is one parameter of an operation.
type Param struct {
	Name     string
	In       string // "path", "query" or "header"
	Desc     string
	Required bool
	Schema   Schema
	Example  any
}

// Op documents one operation. The served httpserver.Route stays authoritative for the method,
// path, scope, public flag, idempotency and summary; Op adds what a route does not say.
type Op struct {
	Tag         string
	Description string
	Params      []Param
	// Body names a component schema of the JSON request body ("" when none).
	Body        string
	BodyExample any
	// BodyExamples are named examples of the body, for a body with several shapes
	// (emitted as OpenAPI "examples" instead of BodyExample).
	BodyExamples []NamedExample
	// Status is the success status (200 when zero).
	Status int
	// Response is the success body's schema.
	Response Schema
	// ContentType of the success body (application/json when empty).
	ContentType string
	// Example of the success body (validated against Response for JSON).
	Example any
	// Codes are the problem codes particular to the operation; the conventions a
	// route declares (authentication, scope, limits, idempotency, body) add theirs.
	Codes []problem.Code
}

// NamedExample is one of an operation's named body examples.
type NamedExample struct {
	Name, Summary string
	Value         any
}

// Example ids (stable so the document is reproducible).
const (
	exWorkspace = "org_3f6c2a1e-8d4b-4c1a-9e2f-0a7b5c3d9e11"
	exPixel     = "pxl_5b2e9c40-1f3a-4d6e-8a7b-2c9d0e1f3a45"
	exPlan      = "pln_7c1d2e3f-4a5b-4c6d-8e9f-0a1b2c3d4e5f"
	exLine      = "lin_8d2e3f4a-5b6c-4d7e-9f0a-1b2c3d4e5f60"
	exCampaign  = "cmp_9e3f4a5b-6c7d-4e8f-a01b-2c3d4e5f6071"
	exStudy     = "std_0f4a5b6c-7d8e-4f9a-b12c-3d4e5f607182"
	exFinding   = "fnd_1a5b6c7d-8e9f-4a0b-c23d-4e5f60718293"
	exKey       = "key_2b6c7d8e-9f0a-4b1c-d34e-5f6071829304"
	exCursor    = "eyJkIjoiMjAyNi0wOS0wMSJ9"
)

func uuidOf(prefixed string) string { return prefixed[4:] }

// Parameter sets shared by several operations.
var (
	pList = []Param{
		{Name: "limit", In: "query", Desc: "Page size, 1–1000 (default 100).", Schema: Schema{"type": "integer", "minimum": 1, "maximum": 1000, "default": 100}},
		{Name: "cursor", In: "query", Desc: "meta.next_cursor of the previous page.", Schema: Schema{"type": "string"}},
		{Name: "offset", In: "query", Desc: "Deprecated offset paging (Deprecation, Sunset and Link headers on the answer); use cursor.", Schema: Schema{"type": "integer", "minimum": 0, "deprecated": true}},
	}
	pDates = []Param{
		{Name: "from", In: "query", Desc: "First day, YYYY-MM-DD (inclusive).", Schema: dateSchema},
		{Name: "to", In: "query", Desc: "Last day, YYYY-MM-DD (inclusive).", Schema: dateSchema},
	}
)

func pID(prefix, what string) Param {
	return Param{Name: "id", In: "path", Required: true, Desc: "The " + what + ": " + prefix + "<uuid> or the raw UUID.", Schema: Schema{"type": "string"}}
}

func params(sets ...[]Param) []Param {
	var out []Param
	for _, s := range sets {
		out = append(out, s...)
	}
	return out
}

func list(item string) Schema {
	return Schema{"type": "object", "required": []string{"data", "meta"}, "properties": Schema{
		"data": Schema{"type": "array", "items": ref(item)},
		"meta": ref("ListMeta"),
	}}
}

func listExample(item any) map[string]any {
	return map[string]any{"data": []any{item}, "meta": map[string]any{"next_cursor": exCursor}}
}

var (
	exPlanObj = map[string]any{"id": exPlan, "id_uuid": uuidOf(exPlan), "name": "Autumn launch", "advertiser": "Acme Shoes",
		"objective": "conversion", "status": "live", "start_date": "2026-09-01", "end_date": "2026-11-30",
		"budget": "250000.0000", "currency": "EUR", "channels": []any{"search", "social"}, "owner": "Ada Planner",
		"created_at": "2026-08-01T09:00:00Z", "updated_at": "2026-08-20T09:00:00Z"}
	exLineObj = map[string]any{"id": exLine, "id_uuid": uuidOf(exLine), "plan_id": exPlan, "plan_id_uuid": uuidOf(exPlan),
		"name": "Search brand terms", "channel": "search", "publisher": "Google Ads", "buy_type": "cpc", "unit_cost": "0.8500",
		"start_date": "2026-09-01", "end_date": "2026-11-30", "budget": "40000.0000", "currency": "EUR",
		"planned_impressions": 1200000, "status": "live"}
	exCampaignObj = map[string]any{"id": exCampaign, "id_uuid": uuidOf(exCampaign), "plan_id": exPlan, "name": "Autumn launch — social",
		"objective": "conversion", "status": "active", "channels": []any{"social"}, "start_date": "2026-09-01",
		"end_date": "2026-10-31", "budget": "60000.0000", "currency": "EUR"}
	exStudyObj = map[string]any{"id": exStudy, "id_uuid": uuidOf(exStudy), "campaign_id": exCampaign, "name": "Brand lift Q3",
		"kind": "brand_lift", "status": "completed", "period_start": "2026-09-01", "period_end": "2026-09-30", "methodology": "Exposed vs control survey"}
	exFindingObj = map[string]any{"id": exFinding, "id_uuid": uuidOf(exFinding), "study_id": exStudy, "study_id_uuid": uuidOf(exStudy),
		"metric": "ad_recall_lift", "value": 4.2, "unit": "points", "confidence": 0.95, "ci_lower": 2.1, "ci_upper": 6.3,
		"summary": "Ad recall rose 4.2 points among exposed people."}
	exPlanActual = map[string]any{"plan_id": exPlan, "plan_id_uuid": uuidOf(exPlan), "line_id": exLine, "line_id_uuid": uuidOf(exLine),
		"date": "2026-09-14", "impressions": 48210, "clicks": 911, "spend": "774.3500", "currency": "EUR", "conversions": 37}
	exCampaignActual = map[string]any{"campaign_id": exCampaign, "campaign_id_uuid": uuidOf(exCampaign), "date": "2026-09-14",
		"impressions": 120400, "clicks": 2210, "spend": "1520.0000", "currency": "EUR", "conversions": 64, "source": "webhook"}
	exRollup = map[string]any{"pixel_id": exPixel, "pixel_id_uuid": uuidOf(exPixel), "date": "2026-09-14", "time_zone": "America/New_York",
		"event_name": "purchase", "currency": "EUR", "events": 1280, "consented_events": 1175, "value": "60312.5000", "unique_people": 1044, "status": "final"}
	exWindows = []any{
		map[string]any{"name": "burst", "quota": 120, "window_seconds": 60, "remaining": 119, "reset": 1, "scope": "key"},
		map[string]any{"name": "daily", "quota": 10000, "window_seconds": 86400, "remaining": 9999, "reset": 9, "scope": "key"}}
	exBatch = map[string]any{"pixel_id": exPixel, "events": []any{map[string]any{
		"event_name": "purchase", "occurred_at": "2026-09-14T10:15:00Z", "value": 49.9, "currency": "EUR",
		"consent": map[string]any{"measurement": true}, "identity": map[string]any{"email": "ada@example.com"}}, map[string]any{
		"event_name": "purchase", "occurred_at": "2026-09-01T08:00:00Z", "value": 12.5, "currency": "EUR", // older than 7 days: too_old
		"consent": map[string]any{"measurement": true}}}}
)

// Operations is the one table of per-operation documentation, keyed by "METHOD /path"
// exactly as the route is declared. A test fails when a served route has no entry or an
// entry names a route nothing serves.
var Operations = map[string]Op{
	// Health (every role).
	"GET /healthz": {Tag: "Operations", Description: "Liveness: the process serves HTTP. No key.", Response: ref("Health"),
		Example: map[string]any{"status": "ok"}},
	"GET /readyz": {Tag: "Operations", Description: "Readiness: 200 when every dependency answers, 503 naming the failing checks otherwise. " +
		"No key: the answer names each check and says ok or failing, nothing more (the process logs why).",
		Response: ref("Health"), Example: map[string]any{"status": "ready", "checks": map[string]any{"redis": "ok", "clickhouse": "ok"}}},

	// Ingest.
	"POST /events": {Tag: "Events", Description: "Send up to 50 events for one pixel of the key's workspace. " +
		"Answers 202 only once the batch is durably queued; accepted events appear in the next daily rollup. " +
		"Send one Idempotency-Key per logical batch and reuse it on every retry. " +
		"Contact details are hashed with SHA-256 before storage: send them trimmed and lower-cased. " +
		"A bad event is rejected alone (rejections[]); when none is acceptable the answer is 422. " +
		"An event_id deduplicates per pixel for 48 hours: the first accepted copy is stored, every later one dropped. " +
		"A copy within the same batch is refused here (rule duplicate_event_id, counted in duplicates); " +
		"a copy of an event sent in an earlier batch is dropped after the 202, which cannot know of it; GET /rejections lists it (rule duplicate_event_id).",
		Body: "Batch", BodyExample: exBatch, Status: 202, Response: ref("EventsAccepted"),
		Example: map[string]any{"accepted": 1, "rejected": 1, "duplicates": 0, "request_id": "req_8f14e45fceea167a5a36dedd",
			"rejections": []any{map[string]any{"index": 1, "field": "occurred_at", "rule": "too_old", "value": "2026-09-01T08:00:00Z"}}},
		Codes: []problem.Code{problem.InvalidRequest, problem.NotFound, problem.ServiceUnavailable}},

	// Webhooks.
	"POST /webhooks/inbound/{workspace}": {Tag: "Webhooks", Description: "Receive a signed partner message that writes delivered performance into campaign actuals. " +
		"Authenticated by its signature, not a key: SVC-Signature: t=<unix>,v1=<hex HMAC-SHA256(secret, \"<t>.<body>\")>, " +
		"at most 300 s from the server's clock. SVC-Webhook-Id names the message and is not signed: a message whose id, or whose signed content " +
		"(t and body) under any id, was already handled is answered 200 ignored and changes nothing. Body at most 256 KiB. " +
		"Failed and repeated messages count against the sending address: past 20 at once (then 6 a minute) it gets 429 rate_limited.",
		Params: []Param{
			{Name: "workspace", In: "path", Required: true, Desc: "The receiving workspace: org_<uuid> or the raw UUID.", Schema: Schema{"type": "string"}, Example: exWorkspace},
			{Name: "SVC-Signature", In: "header", Required: true, Desc: "t=<unix>,v1=<hex> (several v1 while a secret rotates).", Schema: Schema{"type": "string"}},
			{Name: "SVC-Webhook-Id", In: "header", Required: true, Desc: "The message id, the same on every retry; deduplicates redeliveries. Not signed.", Schema: Schema{"type": "string", "maxLength": 200}},
		},
		Body: "InboundMessage", BodyExamples: []NamedExample{
			{"actuals.reported", "One campaign, one or more days.", map[string]any{"type": "actuals.reported", "data": map[string]any{
				"campaign_id": exCampaign, "currency": "EUR",
				"days": []any{map[string]any{"date": "2026-09-14", "impressions": 120400, "clicks": 2210, "spend": "1520.00", "conversions": 64}}}}},
			{"campaign.actuals", "Rows of one or several campaigns.", map[string]any{"type": "campaign.actuals", "data": map[string]any{
				"rows": []any{map[string]any{"campaign_id": exCampaign, "date": "2026-09-14", "currency": "EUR",
					"impressions": 120400, "clicks": 2210, "spend": "1520.00", "conversions": 64}}}}},
		},
		Response: ref("InboundResult"), Example: map[string]any{"outcome": "processed", "message_id": "msg_20260914_0001", "type": "campaign.actuals", "rows_written": 1},
		Codes: []problem.Code{problem.InvalidSignature, problem.TimestampOutOfRange, problem.NotFound, problem.InvalidRequest,
			problem.PayloadTooLarge, problem.IdempotencyKeyInUse, problem.RateLimited, problem.ServiceUnavailable}},

	// Read API: the key itself, limits, versions.
	"GET /me": {Tag: "Account", Description: "The calling key: its id, workspace, environment, scopes and expiry. Use it to check a key. Needs only a valid key.",
		Response: ref("Me"), Example: map[string]any{"id": exKey, "id_uuid": uuidOf(exKey), "environment": "live", "status": "active",
			"workspace_id": exWorkspace, "workspace_id_uuid": uuidOf(exWorkspace), "workspace_name": "Acme Shoes", "showroom": false,
			"scopes": []any{"events:write", "pixels:read"}, "expires_at": nil, "pinned_version": nil, "version": "2026-09-01",
			"allow": []any{}, "limits": exWindows, "created_at": "2026-08-01T09:00:00Z"}},
	"GET /limits": {Tag: "Account", Description: "The burst and daily windows that apply to the calling key, what remains and when they refill. Read it before a large job instead of hardcoding an allowance. Needs only a valid key.",
		Response: ref("Limits"), Example: map[string]any{"key_id": exKey, "key_id_uuid": uuidOf(exKey),
			"policy": `"burst";q=120;w=60, "daily";q=10000;w=86400`, "limits": exWindows}},
	"GET /versions": {Tag: "Account", Description: "The served API versions. Select one with the version parameter, the SVC-Version header or a pin on the key; stable and next are aliases.",
		Response: ref("Versions"), Example: map[string]any{"data": []any{map[string]any{"version": "2026-09-01", "status": "stable", "released": "2026-09-01"}},
			"aliases": map[string]any{"stable": "2026-09-01", "next": "2026-12-01"}, "current": "2026-09-01"}},
	"GET /account": {Tag: "Account", Description: "The organisation behind the key's workspace.", Response: ref("Account"),
		Example: map[string]any{"id": exWorkspace, "id_uuid": uuidOf(exWorkspace), "name": "Acme Shoes", "legal_name": "Acme Shoes GmbH",
			"country": "DE", "currency": "EUR", "timezone": "Europe/Berlin", "industry": "retail", "raw_event_retention_days": 400}},

	// Plans, lines, actuals.
	"GET /plans": {Tag: "Plans", Description: "Media plans of the workspace, by cursor.", Params: params(pList,
		[]Param{{Name: "status", In: "query", Desc: "Only plans in this status (draft, approved, live, completed, cancelled).", Schema: Schema{"type": "string"}}, {Name: "channel", In: "query", Desc: "Only plans with this channel.", Schema: Schema{"type": "string"}}}),
		Response: list("Plan"), Example: listExample(exPlanObj), Codes: []problem.Code{problem.InvalidRequest}},
	"GET /plans/{id}": {Tag: "Plans", Description: "One media plan.", Params: []Param{pID("pln_", "plan")},
		Response: ref("Plan"), Example: exPlanObj, Codes: []problem.Code{problem.NotFound}},
	"GET /plans/{id}/lines": {Tag: "Plans", Description: "Line items of a plan, by cursor.", Params: params([]Param{pID("pln_", "plan")}, pList,
		[]Param{{Name: "status", In: "query", Desc: "Only line items in this status.", Schema: Schema{"type": "string"}}, {Name: "channel", In: "query", Desc: "Only line items of this channel.", Schema: Schema{"type": "string"}}}),
		Response: list("Line"), Example: listExample(exLineObj), Codes: []problem.Code{problem.NotFound, problem.InvalidRequest}},
	"GET /plans/{id}/actuals": {Tag: "Plans", Description: "Delivered performance of a plan per line item and day (the latest value of each day, never a sum), by cursor.",
		Params:   params([]Param{pID("pln_", "plan")}, pDates, []Param{{Name: "line_id", In: "query", Desc: "Only this line item.", Schema: Schema{"type": "string"}}}, pList),
		Response: list("PlanActual"), Example: listExample(exPlanActual), Codes: []problem.Code{problem.NotFound, problem.InvalidRequest}},
	"POST /imports/actuals": {Tag: "Plans", Description: "Write delivered days into media plans: at most 500 rows, one per line item per day; upsert on plan, line and date (restating a day overwrites it). Every row is validated; problems are in errors[] and nothing is written. Send an Idempotency-Key: a retry returns the original result.",
		Body: "ActualsImport", BodyExample: map[string]any{"rows": []any{map[string]any{"plan_id": exPlan, "line_id": exLine, "date": "2026-09-14",
			"impressions": 48210, "clicks": 911, "spend": "774.35", "currency": "EUR", "conversions": 37}}},
		Response: ref("ImportResult"), Example: map[string]any{"rows": 1, "upserted": 1, "request_id": "req_8f14e45fceea167a5a36dedd"},
		Codes: []problem.Code{problem.InvalidRequest, problem.NotFound}},

	// Campaigns, studies, findings.
	"GET /campaigns": {Tag: "Campaigns", Description: "Campaigns of the workspace, by cursor.", Params: params(pList,
		[]Param{{Name: "plan_id", In: "query", Desc: "Only campaigns executing this plan.", Schema: Schema{"type": "string"}}, {Name: "status", In: "query", Desc: "Only campaigns in this status.", Schema: Schema{"type": "string"}}, {Name: "channel", In: "query", Desc: "Only campaigns with this channel.", Schema: Schema{"type": "string"}}}),
		Response: list("Campaign"), Example: listExample(exCampaignObj), Codes: []problem.Code{problem.InvalidRequest}},
	"GET /campaigns/{id}": {Tag: "Campaigns", Description: "One campaign.", Params: []Param{pID("cmp_", "campaign")},
		Response: ref("Campaign"), Example: exCampaignObj, Codes: []problem.Code{problem.NotFound}},
	"GET /campaigns/{id}/actuals": {Tag: "Campaigns", Description: "Delivered performance of a campaign per day (imports and inbound webhooks; latest value per day), by cursor.",
		Params: params([]Param{pID("cmp_", "campaign")}, pDates, pList), Response: list("CampaignActual"), Example: listExample(exCampaignActual),
		Codes: []problem.Code{problem.NotFound, problem.InvalidRequest}},
	"GET /studies": {Tag: "Studies", Description: "Measurement studies, by cursor.", Params: params(pList,
		[]Param{{Name: "campaign_id", In: "query", Desc: "Only studies of this campaign.", Schema: Schema{"type": "string"}}, {Name: "kind", In: "query", Desc: "Only studies of this kind.", Schema: Schema{"type": "string"}}, {Name: "status", In: "query", Desc: "Only studies in this status.", Schema: Schema{"type": "string"}}}),
		Response: list("Study"), Example: listExample(exStudyObj), Codes: []problem.Code{problem.InvalidRequest}},
	"GET /studies/{id}": {Tag: "Studies", Description: "One study.", Params: []Param{pID("std_", "study")},
		Response: ref("Study"), Example: exStudyObj, Codes: []problem.Code{problem.NotFound}},
	"GET /findings": {Tag: "Studies", Description: "Findings, by cursor; filter by study.", Params: params(pList,
		[]Param{{Name: "study_id", In: "query", Desc: "Only findings of this study (std_<uuid> or UUID).", Schema: Schema{"type": "string"}}, {Name: "metric", In: "query", Desc: "Only findings of this metric.", Schema: Schema{"type": "string"}}}),
		Response: list("Finding"), Example: listExample(exFindingObj), Codes: []problem.Code{problem.InvalidRequest}},
	"GET /findings/{id}": {Tag: "Studies", Description: "One finding.", Params: []Param{pID("fnd_", "finding")},
		Response: ref("Finding"), Example: exFindingObj, Codes: []problem.Code{problem.NotFound}},

	// Rollups.
	"GET /pixel-rollups": {Tag: "Rollups", Description: "Daily rollups of a pixel's events per day, event name and currency. Days are calendar days of a time zone: time_zone if given, else the pixel's reporting zone, else its workspace's, else UTC; each record names its time_zone. New events appear in the next daily rollup; meta.ingested_through says up to when exactly: every event a 202 accepted before it is counted in the answer. A day is open while it can still change and final after (7 days and 1 hour after the local day ends). Pages by cursor (stable while events arrive; a cursor keeps the zone of its first page); offset paging still works and is deprecated.",
		Params: params([]Param{{Name: "pixel_id", In: "query", Required: true, Desc: "pxl_<uuid> or the raw UUID.", Schema: Schema{"type": "string"}, Example: exPixel}},
			pDates, []Param{{Name: "event_name", In: "query", Desc: "Only this event name.", Schema: Schema{"type": "string"}},
				{Name: "time_zone", In: "query", Desc: "IANA time zone whose calendar days the rollups are (e.g. America/New_York, Asia/Kolkata, Asia/Kathmandu, UTC), for this request; from and to are days of this zone. Default: the pixel's reporting zone, else its workspace's, else UTC. An unknown zone is 422 invalid_request. With cursor: the cursor's zone (another one is 422).",
					Schema: Schema{"type": "string", "maxLength": 64, "pattern": `^[A-Za-z][A-Za-z0-9_+\-]*(/[A-Za-z0-9][A-Za-z0-9_+\-]*){0,2}$`}, Example: "America/New_York"}}, pList),
		Response: Schema{"type": "object", "required": []string{"data", "meta"}, "properties": Schema{
			"data": Schema{"type": "array", "items": ref("PixelRollup")},
			"meta": object("Paging, and the completeness watermark.", []string{"next_cursor", "ingested_through"}, Schema{
				"next_cursor": Schema{"type": []string{"string", "null"}, "description": "Pass as cursor for the next page; null on the last page."},
				"next_offset": Schema{"type": "integer", "description": "Deprecated offset paging only: where the next page starts."},
				"ingested_through": Schema{"type": []string{"string", "null"}, "format": "date-time",
					"description": "Every event a 202 accepted before this instant (RFC 3339, UTC, milliseconds) is in the numbers of this answer. Null when the service cannot claim one now (starting up, or an erasure is rebuilding this pixel's days)."},
			}),
		}},
		Example: map[string]any{"data": []any{exRollup}, "meta": map[string]any{"next_cursor": exCursor, "ingested_through": "2026-09-14T10:15:02.250Z"}},
		Codes:   []problem.Code{problem.InvalidRequest, problem.NotFound}},

	// Self-description (this package).
	"GET /openapi.json": {Tag: "Discovery", Description: "This OpenAPI 3.1 document: every served operation with its scope and x-rateLimit. No key.",
		Response: Schema{"type": "object", "required": []string{"openapi", "paths"}}, Example: map[string]any{"openapi": "3.1.0", "paths": map[string]any{}}},
	"GET /.well-known/svc": {Tag: "Discovery", Description: "The discovery document: base URL, auth methods, scopes, limits, versions, the OpenAPI location, the docs and the MCP endpoint, in one fetch, " +
		"with the calling key's own windows (and what is left of them), RateLimit-Policy and granted scopes. Needs a valid key (no scope) and spends one request, like GET /limits. " +
		"The API catalog, this OpenAPI document and the developer pages need no key.",
		Response: ref("Discovery")},
	"GET /.well-known/api-catalog": {Tag: "Discovery", Description: "RFC 9727 API catalog (application/linkset+json) linking the OpenAPI document, the docs and the discovery document. No key.",
		ContentType: "application/linkset+json", Response: ref("Linkset")},
	"GET /developers": {Tag: "Discovery", Description: "Developer pages: the index (HTML, readable without JavaScript). No key.", ContentType: "text/html"},
	"GET /developers/{page}": {Tag: "Discovery", Description: "One developer page (HTML). No key.", ContentType: "text/html",
		Params: []Param{{Name: "page", In: "path", Required: true, Desc: "Page name, e.g. getting-started.", Schema: Schema{"type": "string"}, Example: "getting-started"}},
		Codes:  []problem.Code{problem.NotFound}},
	"GET /developers/errors/{code}": {Tag: "Discovery", Description: "The page of one problem code: the URL every problem document names in type and doc_url. No key.", ContentType: "text/html",
		Params: []Param{{Name: "code", In: "path", Required: true, Desc: "A problem code.", Schema: enum("A problem code.", codeValues()...), Example: "rate_limited"}},
		Codes:  []problem.Code{problem.NotFound}},
	"GET /developers/screens/{file}": {Tag: "Discovery", Description: "A screenshot of the application at /app, as its browser tests saved it (the page application shows them). No key.", ContentType: "image/png",
		Params: []Param{{Name: "file", In: "path", Required: true, Desc: "NN-name.png, e.g. 41-live.png.", Schema: Schema{"type": "string", "pattern": `^[0-9]{2}-[a-z0-9-]+\.png$`}, Example: "41-live.png"}},
		Codes:  []problem.Code{problem.NotFound}},
	"GET /developers/md": {Tag: "Discovery", Description: "Index of the Markdown mirror (also at /developers/md/): a link to every developer page and every problem code's page in Markdown. No key.", ContentType: "text/markdown"},
	"GET /developers/md/{file}": {Tag: "Discovery", Description: "Markdown mirror of a developer page (documentation only, not part of the API). No key.", ContentType: "text/markdown",
		Params: []Param{{Name: "file", In: "path", Required: true, Desc: "<page>.md, e.g. getting-started.md or index.md.", Schema: Schema{"type": "string", "pattern": `\.md$`}, Example: "getting-started.md"}},
		Codes:  []problem.Code{problem.NotFound}},
	"GET /developers/md/errors/{file}": {Tag: "Discovery", Description: "Markdown mirror of an error code's page. No key.", ContentType: "text/markdown",
		Params: []Param{{Name: "file", In: "path", Required: true, Desc: "<code>.md, e.g. rate_limited.md.", Schema: Schema{"type": "string", "pattern": `\.md$`}, Example: "rate_limited.md"}},
		Codes:  []problem.Code{problem.NotFound}},
	"POST /mcp": {Tag: "Discovery", Description: "Model Context Protocol endpoint (streamable HTTP, stateless, JSON responses). The same bearer key, scopes, limits and problem codes as the REST operations: each HTTP request spends one request of the key's windows and each tool call one more, and each tool answers from the matching GET operation (a tool error carries its problem document; an id argument that is not an id of the tool's kind is invalid_request). The body is one JSON-RPC message: a batch (an array) is 422 invalid_request. Tools: me, limits, plans, plan, lines, plan_actuals, campaigns, campaign, campaign_actuals, studies, study, findings, finding, pixel_rollups, pixels, pixel, batch, rejections, erasures, erasure.",
		Params: []Param{{Name: "MCP-Protocol-Version", In: "header", Desc: "The negotiated MCP protocol revision.", Schema: Schema{"type": "string"}, Example: "2025-11-25"}},
		Body:   "JSONRPC", BodyExample: map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": map[string]any{}},
		Response: ref("JSONRPC"), Example: map[string]any{"jsonrpc": "2.0", "id": 1, "result": map[string]any{"tools": []any{}}},
		Codes: []problem.Code{problem.InvalidRequest}},
}
