// Package api is the read API role (`svc api`): account, plans, line items, campaigns,
// studies, findings, their actuals, the actuals import, daily pixel rollups, and the
// self-description of the calling key (GET /me, /limits, /versions). Every handler runs
// behind the conventions of httpserver.Server (auth, scopes, limits, idempotency, problems) and
// reads only the calling key's workspace: an object of any other workspace, or an id
// that does not parse, is 404 not_found.
package api

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"svc/lib/httpserver"
	"svc/lib/problem"
	"svc/lib/process"
	"svc/schema/catalog"
	"svc/schema/workspace"
)

// Scopes of the read API's operations (DESIGN.md, decisions).
const (
	ScopePlans     = "plans:read"
	ScopeCampaigns = "campaigns:read"
	ScopeStudies   = "studies:read"
	ScopeAccount   = "account:read"
	ScopePixels    = "pixels:read"
	ScopeActuals   = "actuals:write"
)

// API serves the read routes over ClickHouse (the catalog and rollups) and the key
// store (workspaces, pixels).
type API struct {
	Conn driver.Conn
	Keys *workspace.Store
	Log  *slog.Logger // nil: failures are not logged
	// QueryTimeout bounds each ClickHouse query of a request.
	QueryTimeout time.Duration
	// QueryThreads is ClickHouse's max_threads for the API's queries (0: 1). The queries
	// are small and many run at once: one thread each keeps every core busy without the
	// cost of splitting each query (on 2 cores, 50% more plan-actuals pages per second).
	QueryThreads int
	// Cache holds hot list pages for a short time (nil: no cache).
	Cache *Cache
	// Now is the clock (rollup status, key status); time.Now when nil.
	Now func() time.Time
	// Database is the ClickHouse database Conn reads: the completeness watermark and
	// the erasure holds are kept per database in Redis (watermark.go). "": GET
	// /pixel-rollups claims no watermark (meta.ingested_through null).
	Database string
}

func (a *API) now() time.Time {
	if a.Now != nil {
		return a.Now()
	}
	return time.Now()
}

// ctx returns the context of the request's ClickHouse queries: bounded by
// QueryTimeout, with max_threads = QueryThreads. It does not derive from the
// fasthttp.RequestCtx: that context only ends at server shutdown, and deriving from it
// costs a goroutine per query (it is not a standard library context).
func (a *API) ctx(_ *httpserver.Request) (context.Context, context.CancelFunc) {
	ctx := clickhouse.Context(context.Background(), clickhouse.WithSettings(clickhouse.Settings{"max_threads": max(1, a.QueryThreads)}))
	return context.WithTimeout(ctx, a.timeout())
}

func (a *API) timeout() time.Duration {
	if a.QueryTimeout <= 0 {
		return 10 * time.Second
	}
	return a.QueryTimeout
}

// storeErr turns a store failure into the answer: a validation error of the catalog
// (a bug upstream of it, never input that reached it unchecked) stays a 500; anything
// else is the store being unavailable, 503 with Retry-After, nothing changed.
func (a *API) storeErr(r *httpserver.Request, err error) error {
	if errors.Is(err, catalog.ErrInvalid) {
		return err
	}
	if a.Log != nil {
		a.Log.Error("clickhouse query failed", "request_id", r.ID, "err", err.Error())
	}
	return problem.Unavailable("ClickHouse", 1)
}

// notFound is the answer for an id that is not an object of the key's workspace.
func notFound(kind, raw string) error {
	return problem.New(problem.NotFound, "No %s %q in this key's workspace.", kind, raw)
}

// Routes returns every route of the read API.
func (a *API) Routes() []httpserver.Route {
	rs := []httpserver.Route{
		{Method: "GET", Path: "/me", Summary: "The calling key's own record.", Handle: a.me},
		{Method: "GET", Path: "/limits", Summary: "The burst and daily windows of the calling key.", Handle: a.limits},
		{Method: "GET", Path: "/versions", Summary: "The API versions served.", Handle: a.versions},
		{Method: "GET", Path: "/account", Scope: ScopeAccount, Summary: "The workspace's account.", Handle: a.account},
		{Method: "POST", Path: "/imports/actuals", Scope: ScopeActuals, Idempotent: true,
			Summary: "Upsert delivered days of line items into media plans (at most 500 rows).", Handle: a.importActuals},
		{Method: "GET", Path: "/pixel-rollups", Scope: ScopePixels, Summary: "Daily rollups of a pixel's events.",
			Handle: a.cached(a.pixelRollups)},
	}
	rs = append(rs, a.erasureRoutes()...)
	rs = append(rs, a.rejectionRoutes()...)
	rs = append(rs, a.batchRoutes()...)
	rs = append(rs, a.pixelRoutes()...)
	return append(rs, a.catalogRoutes()...)
}

// cached serves h through the page cache.
func (a *API) cached(h httpserver.Handler) httpserver.Handler {
	return func(r *httpserver.Request) error { return a.Cache.serve(r, a.timeout(), func() error { return h(r) }) }
}

// Role is the read API as a role of a process; Close closes the ClickHouse pool. Its
// routes (Routes) are served by the process's HTTP front.
func (a *API) Role() process.Role {
	return process.Role{Name: "api",
		Checks: []process.Check{{Name: "clickhouse", Fn: a.Conn.Ping}},
		Close:  func(context.Context) error { return a.Conn.Close() }}
}
