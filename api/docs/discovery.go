package docs

import (
	"sort"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"svc/lib/apikey"
	"svc/lib/httpserver"
	"svc/lib/ids"
	"svc/lib/limits"
)

// ServiceName is the name in /.well-known/svc.
const ServiceName = "svc"

// MCPPath is where the MCP endpoint is served.
const MCPPath = "/mcp"

var scopeText = map[string]string{
	"events:write":     "Send events (POST /events).",
	"actuals:write":    "Write delivered performance into plans (POST /imports/actuals).",
	"pixels:read":      "Read daily pixel rollups.",
	"plans:read":       "Read media plans, their line items and actuals.",
	"campaigns:read":   "Read campaigns and their actuals.",
	"studies:read":     "Read studies and findings.",
	"account:read":     "Read the account (organisation) of the workspace.",
	"identities:erase": "Erase a person from stored events and rollups, and read erasure records (POST /erasures, GET /erasures).",
}

// Discovery is the service-wide part of /.well-known/svc for routes served at
// publicURL; ForKey adds what belongs to the calling key.
func Discovery(routes []httpserver.Route, publicURL string) map[string]any {
	docsURL := publicURL + "/developers"
	ops := map[string][]string{}
	var keyOnly []string
	for _, r := range routes {
		if r.Public {
			continue
		}
		if r.Scope == "" {
			keyOnly = append(keyOnly, Key(r))
			continue
		}
		ops[r.Scope] = append(ops[r.Scope], Key(r))
	}
	sort.Strings(keyOnly)
	var scopes []any
	for _, s := range apikey.Scopes {
		sort.Strings(ops[s])
		scopes = append(scopes, map[string]any{"name": s, "description": scopeText[s], "operations": nonNil(ops[s])})
	}
	b, d := limits.Windows(apikey.DefaultBurst, apikey.DefaultDaily)
	var versions []any
	for _, v := range httpserver.Served {
		versions = append(versions, v)
	}
	return map[string]any{
		"service":     ServiceName,
		"description": "Server-side conversion events in; daily pixel rollups, media plans, campaigns, studies and actuals out.",
		"base_url":    publicURL + "/v1",
		"api_version": "v1",
		"status":      "private beta",
		"auth": map[string]any{
			"methods": []any{map[string]any{
				"type": "http", "scheme": "bearer", "header": "Authorization", "format": "Bearer <API key>",
				"key_prefixes": map[string]any{"live": "svc_live_", "sandbox": "svc_sandbox_"},
				"issued_by":    "workspace administrators in the application at /app/api-keys",
				"docs":         docsURL + "/authentication",
			}},
			"key_only_operations": nonNil(keyOnly),
			"webhook_signatures": map[string]any{
				"header": "SVC-Signature", "format": "t=<unix>,v1=<hex>", "algorithm": "HMAC-SHA256",
				"signed_payload": "<t>.<body>", "tolerance_seconds": 300, "message_id_header": "SVC-Webhook-Id",
				"docs": docsURL + "/webhooks",
			},
		},
		"scopes": scopes,
		"limits": map[string]any{
			"scope": "key",
			"default_windows": []any{
				map[string]any{"name": b.Name, "quota": b.Quota, "window_seconds": b.Seconds, "seconds": b.Seconds},
				map[string]any{"name": d.Name, "quota": d.Quota, "window_seconds": d.Seconds, "seconds": d.Seconds},
			},
			"default_policy":   limits.Policy(b, d),
			"headers":          []string{"RateLimit-Policy", "RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset", "RateLimit", "Retry-After"},
			"limits_url":       publicURL + "/v1/limits",
			"per_operation":    "x-rateLimit in the OpenAPI document",
			"payload_ceilings": map[string]any{"events_per_batch": 50, "rows_per_actuals_import": 500, "body_bytes": 1 << 20, "inbound_webhook_bytes": 256 * 1024},
			"docs":             docsURL + "/limits",
		},
		"versions": map[string]any{
			"served": versions, "stable": httpserver.Stable, "next": httpserver.Next,
			"select":       map[string]any{"parameter": "version", "header": "SVC-Version", "precedence": []string{"version parameter", "SVC-Version header", "key pin", "stable"}},
			"versions_url": publicURL + "/v1/versions",
			"changelog":    docsURL + "/changelog",
		},
		"openapi":     publicURL + "/openapi.json",
		"api_catalog": publicURL + "/.well-known/api-catalog",
		"docs": map[string]any{
			"html": docsURL, "markdown": docsURL + "/md/index.md", "getting_started": docsURL + "/getting-started",
			"errors": docsURL + "/errors", "error_page": docsURL + "/errors/{code}", "changelog": docsURL + "/changelog",
		},
		"errors": map[string]any{"format": "application/problem+json", "type": docsURL + "/errors/{code}"},
		"mcp": map[string]any{
			"endpoint": publicURL + MCPPath, "transport": "streamable-http", "stateless": true,
			"protocol_versions": mcp.SupportedProtocolVersions(),
			"auth":              "the same bearer API key; each HTTP request spends one request of the key's windows, and each tool call one more; one JSON-RPC message per request (no batches)",
			"docs":              docsURL + "/mcp",
		},
		"health": map[string]any{"live": publicURL + "/healthz", "ready": publicURL + "/readyz"},
	}
}

// ForKey returns the discovery document for the calling key of r: the service-wide
// document (not modified) with, in "key", the key's id, environment, workspace, granted
// scopes and the version this request used, and, in "limits", its own windows and what
// is left of them after this request, and its RateLimit-Policy.
func ForKey(doc map[string]any, r *httpserver.Request) map[string]any {
	k := r.Key
	out := make(map[string]any, len(doc)+1)
	for name, v := range doc {
		out[name] = v
	}
	b, d := limits.Windows(k.Burst, k.Daily)
	dec := limits.Full(b, d)
	if r.Limits != nil {
		dec = *r.Limits
	}
	lim := map[string]any{}
	for name, v := range doc["limits"].(map[string]any) {
		lim[name] = v
	}
	var windows []any
	for _, st := range []limits.State{dec.Burst, dec.Daily} {
		// window_seconds is the name GET /limits uses; seconds, the name before, stays.
		windows = append(windows, map[string]any{"name": st.Name, "quota": st.Quota, "window_seconds": st.Seconds, "seconds": st.Seconds,
			"remaining": st.Remaining, "reset": st.Reset})
	}
	lim["windows"], lim["policy"] = windows, limits.Policy(b, d)
	out["limits"] = lim
	key := map[string]any{
		"id": ids.Format(ids.Key, k.ID), "id_uuid": k.ID.String(), "environment": k.Env,
		"workspace_id": ids.Format(ids.Org, k.WorkspaceID), "workspace_id_uuid": k.WorkspaceID.String(),
		"granted_scopes": nonNil(k.Scopes), "pinned_version": nil, "version": r.Version,
	}
	if k.Version != "" {
		key["pinned_version"] = k.Version
	}
	out["key"] = key
	return out
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// APICatalog is /.well-known/api-catalog (RFC 9727): a linkset whose first context is
// the catalog, with the API as its item, and whose second context is the API with its
// description (service-desc), docs (service-doc), discovery document (service-meta)
// and status.
func APICatalog(publicURL string) map[string]any {
	base := publicURL + "/v1"
	return map[string]any{"linkset": []any{
		map[string]any{
			"anchor": publicURL + "/.well-known/api-catalog",
			"item":   []any{map[string]any{"href": base, "title": "svc API v1"}},
		},
		map[string]any{
			"anchor":       base,
			"service-desc": []any{map[string]any{"href": publicURL + "/openapi.json", "type": "application/vnd.oai.openapi+json;version=3.1"}},
			"service-doc": []any{
				map[string]any{"href": publicURL + "/developers", "type": "text/html"},
				map[string]any{"href": publicURL + "/developers/md/index.md", "type": "text/markdown"},
			},
			"service-meta": []any{map[string]any{"href": publicURL + "/.well-known/svc", "type": "application/json"}},
			"status":       []any{map[string]any{"href": publicURL + "/readyz", "type": "application/json"}},
		},
	}}
}

// CatalogContentType is the media type of /.well-known/api-catalog (RFC 9727 §4.2).
const CatalogContentType = `application/linkset+json; profile="https://www.rfc-editor.org/info/rfc9727"`
