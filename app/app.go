// Package app is the application role (`svc app`, and in `svc dev`): the web screens
// under /app where workspace administrators sign in and manage their API keys and
// pixels, served as HTML pages by the same HTTP front as the API. It changes things
// through the domain's stores (schema/workspace), the same code `svc admin` uses, and
// records every change in the audit log `svc admin` writes too. README.md has the data
// flow, the Redis layout and the security model.
package app

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/redis/go-redis/v9"

	"svc/lib/chpool"
	"svc/lib/httpserver"
	"svc/lib/process"
	"svc/schema/webhook"
	"svc/schema/workspace"
)

// App is the application: its stores and its pages.
type App struct {
	Config   Config
	Keys     *workspace.Store
	Users    *Users
	Sessions *Sessions
	Audit    *Audit
	Throttle *Throttle
	Webhooks *webhook.Store // the webhooks role's state (webhooks.go), through its own code
	Log      *slog.Logger
	Now      func() time.Time

	connMu sync.Mutex
	conn   driver.Conn // ClickHouse: the rollups the pixel page charts (nil until reached)
}

// New returns the application over the workspace store ks and Redis rdb, and connects
// to ClickHouse (the app owns that pool: its Role closes it). Only the pixel page's
// rollups need ClickHouse: when it does not answer, the application starts without it
// (every other screen works, a key can be revoked) and connects when a pixel page asks.
// cfg must be valid and have its PublicURL.
func New(ctx context.Context, cfg Config, ks *workspace.Store, rdb redis.UniversalClient, log *slog.Logger) (*App, error) {
	a := Assemble(cfg, ks, rdb, nil, log)
	if cfg.plainOverNetwork() {
		log.Warn("the application's cookies are not Secure: SVC_PUBLIC_URL is plain http on an address other machines reach; " +
			"serve it over TLS and set SVC_PUBLIC_URL to its https URL")
	}
	if _, err := a.rollups(ctx); err != nil {
		log.Warn("ClickHouse not reachable yet; the pixel pages' rollups wait for it", "err", err.Error())
	}
	return a, nil
}

// rollups is the ClickHouse pool, opened on first use.
func (a *App) rollups(ctx context.Context) (driver.Conn, error) {
	a.connMu.Lock()
	defer a.connMu.Unlock()
	if a.conn == nil {
		conn, err := chpool.Open(ctx, a.Config.ClickHouse)
		if err != nil {
			return nil, fmt.Errorf("app: %w", err)
		}
		a.conn = conn
	}
	return a.conn, nil
}

// Assemble wires the application over its stores and the ClickHouse conn (nil: opened
// when first needed; closed by the role's Close).
func Assemble(cfg Config, ks *workspace.Store, rdb redis.UniversalClient, conn driver.Conn, log *slog.Logger) *App {
	return &App{Config: cfg, Keys: ks, Users: NewUsers(rdb), Sessions: NewSessions(rdb, cfg.SessionTTL),
		Audit: NewAudit(rdb, cfg.AuditRetention), Throttle: &Throttle{rdb: rdb, Window: cfg.ThrottleWindow},
		Webhooks: newWebhookStore(rdb, cfg.Webhooks), conn: conn, Log: log, Now: time.Now}
}

// Role is the application as a process role: a close that closes its ClickHouse pool
// (after the HTTP front drained). It has no readiness check of its own: it needs Redis,
// which the front checks, and ClickHouse only for the rollups of a pixel page.
func (a *App) Role() process.Role {
	return process.Role{
		Name: "app",
		Close: func(context.Context) error {
			a.connMu.Lock()
			defer a.connMu.Unlock()
			if a.conn == nil {
				return nil
			}
			return a.conn.Close()
		},
	}
}

// Routes are the application's pages (httpserver.Route.Page: public, no API
// operation), each a URL one can bookmark.
func (a *App) Routes() []httpserver.Route {
	const form = 16 << 10 // the largest form body
	p := func(method, path, summary string, h handler, guard func(handler) handler) httpserver.Route {
		rt := httpserver.Route{Method: method, Path: path, Page: true, Summary: summary, Handle: a.serve(guard(h))}
		if method == "POST" {
			rt.MaxBody = form
		}
		return rt
	}
	return []httpserver.Route{
		p("GET", "/app", "The application: its first screen.", a.home, a.anyone),
		p("GET", "/app/static/{file}", "The application's scripts and styles.", a.static, a.anyone),
		p("GET", "/app/sign-in", "Sign in with email and password.", a.signInPage, a.signedOut),
		p("POST", "/app/sign-in", "Sign in.", a.signIn, a.signedOut),
		p("GET", "/app/invite/{token}", "A one-time sign-in link: set a password, or sign in, to join.", a.invitePage, a.signedOut),
		p("POST", "/app/invite/{token}", "Use a sign-in link.", a.acceptInvite, a.signedOut),
		p("POST", "/app/sign-out", "Sign out: the session ends.", a.signOut, a.signedIn),
		p("POST", "/app/workspace", "Switch workspace.", a.switchWorkspace, a.signedIn),
		p("GET", "/app/api-keys", "API keys of the workspace.", a.keysPage, a.signedIn),
		p("POST", "/app/api-keys", "Create an API key.", a.createKey, a.admin),
		p("GET", "/app/api-keys/{id}", "One API key.", a.keyPage, a.signedIn),
		p("POST", "/app/api-keys/{id}/rotate", "Rotate a key's secret with an overlap.", a.rotateKey, a.admin),
		p("POST", "/app/api-keys/{id}/revoke", "Revoke a key.", a.revokeKey, a.admin),
		p("POST", "/app/api-keys/{id}/limits", "Change a key's limits.", a.keyLimits, a.admin),
		p("GET", "/app/pixels", "Pixels of the workspace.", a.pixelsPage, a.signedIn),
		p("POST", "/app/pixels", "Create a pixel.", a.createPixel, a.admin),
		p("GET", "/app/pixels/{id}", "A pixel: its daily rollups, charted.", a.pixelPage, a.signedIn),
		p("POST", "/app/pixels/{id}/time-zone", "Set a pixel's time zone.", a.pixelZone, a.admin),
		p("GET", "/app/pixels/{id}/live", "A pixel's live events: accepted and rejected, as stored.", a.livePage, a.signedIn),
		p("GET", "/app/pixels/{id}/live/feed", "What arrived for a pixel after a cursor (JSON, for the live page).", a.liveFeed, a.signedIn),
		p("GET", "/app/members", "Members of the workspace and their roles.", a.membersPage, a.signedIn),
		p("POST", "/app/members", "Invite someone: a one-time sign-in link.", a.inviteMember, a.admin),
		p("GET", "/app/audit", "The workspace's audit log.", a.auditPage, a.signedIn),
		p("GET", "/app/workspace", "The workspace: retention, erasure requests, members and their roles.", a.workspacePage, a.signedIn),
		p("POST", "/app/workspace/retention", "Set the workspace's raw-event retention.", a.setRetention, a.admin),
		p("POST", "/app/workspace/erasures", "Request an erasure.", a.requestErasure, a.admin),
		p("POST", "/app/workspace/members/role", "Change a member's role.", a.setMemberRole, a.admin),
		p("POST", "/app/workspace/members/remove", "Remove a member.", a.removeMember, a.admin),
		p("GET", "/app/webhooks", "Outbound webhook endpoints.", a.webhooksPage, a.signedIn),
		p("POST", "/app/webhooks", "Add a webhook endpoint: its secret shown once.", a.createEndpoint, a.admin),
		p("GET", "/app/webhooks/inbound", "The inbound webhook log and secrets.", a.inboundPage, a.signedIn),
		p("POST", "/app/webhooks/inbound/secret", "Issue an inbound signing secret: shown once.", a.issueInboundSecret, a.admin),
		p("GET", "/app/webhooks/{id}", "A webhook endpoint and its deliveries.", a.endpointPage, a.signedIn),
		p("POST", "/app/webhooks/{id}/rotate", "Rotate an endpoint's signing secret.", a.rotateEndpoint, a.admin),
		p("POST", "/app/webhooks/{id}/disable", "Disable an endpoint.", a.disableEndpoint, a.admin),
		p("POST", "/app/webhooks/{id}/enable", "Enable an endpoint.", a.enableEndpoint, a.admin),
		p("POST", "/app/webhooks/{id}/deliveries/{event}/resend", "Resend a delivery: a new round of attempts.", a.resendDelivery, a.admin),
	}
}
