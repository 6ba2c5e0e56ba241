package app

import (
	"context"
	"errors"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"svc/lib/ids"
	"svc/schema/webhook"
)

// The Webhooks screens: a workspace's outbound endpoints (create with the secret shown
// once, rotate, disable, enable), each endpoint's deliveries with their attempts and a
// resend button, the inbound log and the inbound signing secrets. They change things
// through schema/webhook, the code the webhooks role and `svc admin webhook …` run, and
// write each change to the audit log under the admin command's name.

// newWebhookStore is the webhooks role's store under its prefix and address policy.
func newWebhookStore(rdb redis.UniversalClient, c WebhookConfig) *webhook.Store {
	st := webhook.NewStore(rdb, c.Prefix)
	st.Egress = webhook.Egress{Allow: c.AllowNets}
	return st
}

// webhookLogs is the ClickHouse delivery and inbound logs (the pool the pixel pages use).
func (a *App) webhookLogs(ctx context.Context) (*webhook.Logs, error) {
	conn, err := a.rollups(ctx)
	if err != nil {
		return nil, err
	}
	return webhook.NewLogs(conn), nil
}

// endpointView is an endpoint as the screens show it (never its secrets).
type endpointView struct {
	ID             string // whk_…
	URL            string
	Kinds          []string // empty: every kind
	Enabled        bool
	DisabledAt     *time.Time
	DisabledReason string
	FailingSince   *time.Time
	Secrets        int // secrets signing deliveries now (more than one while one rotates out)
	CreatedAt      time.Time
}

// newEndpointView is ep as c's member sees it: an admin the whole URL; a viewer only its
// scheme and host, since a receiver's path or query often holds its own token (the
// audit log keeps only the host for the same reason).
func newEndpointView(c *call, ep webhook.Endpoint, now time.Time) endpointView {
	u := ep.URL
	if c.member.Role != RoleAdmin {
		u = urlHostOnly(u)
	}
	return endpointView{ID: ids.Format(ids.Endpoint, ep.ID), URL: u, Kinds: ep.Kinds, Enabled: ep.Enabled(),
		DisabledAt: ep.DisabledAt, DisabledReason: ep.DisabledReason, FailingSince: ep.FailingSince,
		Secrets: len(ep.SigningSecrets(now)), CreatedAt: ep.CreatedAt}
}

// webhooksData is the endpoints screen's.
type webhooksData struct {
	Endpoints []endpointView
	Kinds     []string
	AllowNets []string // the internal ranges the operator allows (SVC_WEBHOOKS_ALLOW_NETS)
	Error     string
	URL       string          // a refused form's URL, shown again
	Checked   map[string]bool // a refused form's kinds
}

func (a *App) webhooksPage(c *call) error { return a.renderWebhooks(c, 200, "", "", nil) }

func (a *App) renderWebhooks(c *call, status int, errText, rawURL string, kinds []string) error {
	eps, err := a.Webhooks.Endpoints(c.Context(), c.ws.ID)
	if err != nil {
		return err
	}
	d := webhooksData{Kinds: webhook.Kinds, Error: errText, URL: rawURL, Checked: map[string]bool{}}
	for _, k := range kinds {
		d.Checked[k] = true
	}
	for _, p := range a.Webhooks.Egress.Allow {
		d.AllowNets = append(d.AllowNets, p.String())
	}
	now := a.Now()
	for _, ep := range eps {
		d.Endpoints = append(d.Endpoints, newEndpointView(c, ep, now))
	}
	return c.render(status, "webhooks", "Webhooks", "webhooks", d)
}

// createEndpoint registers an endpoint of the session's workspace, as `svc admin
// webhook endpoint create` does, and shows its signing secret once. A URL at an address
// the egress policy refuses (loopback, private, link-local, cloud metadata, …) is
// refused with the policy's reason.
func (a *App) createEndpoint(c *call) error {
	raw := strings.TrimSpace(c.form.Get("url"))
	kinds := c.form["kind"]
	if msg := a.endpointRefusal(raw, kinds); msg != "" {
		return a.renderWebhooks(c, 422, msg, raw, kinds)
	}
	ep, err := a.Webhooks.CreateEndpoint(c.Context(), c.ws.ID, raw, kinds)
	if err != nil {
		return err // the checks above passed: Redis failed
	}
	id := ids.Format(ids.Endpoint, ep.ID)
	if err := c.audit("webhook endpoint create", id, "host="+urlHost(raw)+" kinds="+kindsText(ep.Kinds)); err != nil {
		return err
	}
	return a.renderEndpointSecret(c, ep, nil)
}

// endpointRefusal is why an endpoint cannot be created with raw and kinds, or "".
func (a *App) endpointRefusal(raw string, kinds []string) string {
	if err := webhook.ValidateURL(raw); err != nil {
		return "URL: " + err.Error() + "."
	}
	var refused *webhook.AddressError
	if err := a.Webhooks.Egress.CheckURL(raw); errors.As(err, &refused) {
		return "URL refused: " + refused.Error() + ". Deliveries never go to loopback, private, link-local or cloud-metadata addresses (unless the operator allows a range)."
	} else if err != nil {
		return "URL: " + err.Error() + "."
	}
	for _, k := range kinds {
		if !slices.Contains(webhook.Kinds, k) {
			return "Unknown event kind."
		}
	}
	return ""
}

// urlHost is the host of an endpoint URL: what the audit log records (a path or query
// may carry a receiver's token).
func urlHost(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	return u.Host
}

// urlHostOnly is raw's scheme and host, "/…" standing for any path or query.
func urlHostOnly(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(hidden)"
	}
	out := u.Scheme + "://" + u.Host
	if (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
		out += "/…"
	}
	return out
}

func kindsText(kinds []string) string {
	if len(kinds) == 0 {
		return "all"
	}
	return strings.Join(kinds, ",")
}

// endpointSecretData is the page that shows an endpoint's new signing secret, once.
type endpointSecretData struct {
	Endpoint endpointView
	Secret   string
	Cutover  *time.Time // a rotation: when the previous secrets stop signing
}

func (a *App) renderEndpointSecret(c *call, ep webhook.Endpoint, cutover *time.Time) error {
	d := endpointSecretData{Endpoint: newEndpointView(c, ep, a.Now()), Secret: ep.Secrets[0].Secret, Cutover: cutover}
	return c.render(201, "webhook-secret", "Your new signing secret", "webhooks", d)
}

// endpointOf is the endpoint of the path's id in the session's workspace; nil (the 404
// page answered) for a malformed id, an unknown endpoint or another workspace's.
func (a *App) endpointOf(c *call) (*webhook.Endpoint, error) {
	id, err := ids.Parse(ids.Endpoint, c.Param("id"))
	if err != nil {
		return nil, c.notFound("webhook endpoint")
	}
	ep, err := a.Webhooks.Endpoint(c.Context(), id)
	if errors.Is(err, webhook.ErrNotFound) || err == nil && ep.WorkspaceID != c.ws.ID {
		return nil, c.notFound("webhook endpoint")
	}
	if err != nil {
		return nil, err
	}
	return &ep, nil
}

// deliveryView is one (endpoint, event) delivery: its state and every attempt logged.
type deliveryView struct {
	EventID  string // evt_…
	Kind     string
	State    string // pending, in_flight, delivered, failed, dropped; "" once Redis let it go
	NextAt   *time.Time
	Attempts []webhook.DeliveryRow // newest first
}

// endpointData is one endpoint's page's.
type endpointData struct {
	Endpoint   endpointView
	Overlaps   []string
	Deliveries []deliveryView
	LogError   string // the delivery log could not be read (the rest of the page works)
	Error      string
}

// deliveryLimit bounds the attempts an endpoint's page reads, newest first.
const deliveryLimit = 500

func (a *App) endpointPage(c *call) error {
	ep, err := a.endpointOf(c)
	if ep == nil {
		return err
	}
	return a.renderEndpoint(c, 200, *ep, "")
}

func (a *App) renderEndpoint(c *call, status int, ep webhook.Endpoint, errText string) error {
	d := endpointData{Endpoint: newEndpointView(c, ep, a.Now()), Overlaps: overlaps, Error: errText}
	dv, err := a.deliveries(c.Context(), ep)
	if err != nil {
		a.Log.Warn("webhooks page: delivery log not read", "request_id", c.ID, "err", err.Error())
		d.LogError = "The delivery log cannot be read right now (ClickHouse does not answer); the endpoint can still be rotated or disabled."
	}
	d.Deliveries = dv
	return c.render(status, "webhook", d.Endpoint.ID, "webhooks", d)
}

// deliveries reads ep's delivery log and groups its attempts by event, the most
// recently attempted first, each with its scheduling state.
func (a *App) deliveries(ctx context.Context, ep webhook.Endpoint) ([]deliveryView, error) {
	logs, err := a.webhookLogs(ctx)
	if err != nil {
		return nil, err
	}
	rows, err := logs.Deliveries(ctx, webhook.DeliveryFilter{Workspace: ep.WorkspaceID, Endpoint: ep.ID, Limit: deliveryLimit})
	if err != nil {
		return nil, err
	}
	var out []deliveryView
	at := map[uuid.UUID]int{}
	for _, r := range rows {
		i, ok := at[r.EventID]
		if !ok {
			i = len(out)
			at[r.EventID] = i
			out = append(out, deliveryView{EventID: ids.Format(ids.Event, r.EventID), Kind: r.Kind})
			if d, err := a.Webhooks.Delivery(ctx, ep.ID, r.EventID); err == nil {
				out[i].State, out[i].NextAt = d.State, d.NextAt
			}
		}
		out[i].Attempts = append(out[i].Attempts, r)
	}
	return out, nil
}

func (a *App) rotateEndpoint(c *call) error {
	ep, err := a.endpointOf(c)
	if ep == nil {
		return err
	}
	overlap, err := time.ParseDuration(c.form.Get("overlap"))
	if err != nil || !slices.Contains(overlaps, c.form.Get("overlap")) {
		return a.renderEndpoint(c, 422, *ep, "Choose an overlap.")
	}
	nep, err := a.Webhooks.RotateEndpointSecret(c.Context(), ep.ID, overlap)
	if err != nil {
		return err
	}
	cutover := nep.Secrets[0].CreatedAt.Add(overlap)
	if err := c.audit("webhook endpoint rotate-secret", ids.Format(ids.Endpoint, ep.ID), "overlap="+overlap.String()); err != nil {
		return err
	}
	return a.renderEndpointSecret(c, nep, &cutover)
}

func (a *App) disableEndpoint(c *call) error {
	ep, err := a.endpointOf(c)
	if ep == nil {
		return err
	}
	changed, err := a.Webhooks.DisableEndpoint(c.Context(), ep.ID, "disabled in the application")
	if err != nil {
		return err
	}
	if !changed { // disabled already: nothing to audit
		c.SeeOther("/app/webhooks/" + ids.Format(ids.Endpoint, ep.ID))
		return nil
	}
	return a.endpointChanged(c, "webhook endpoint disable", ep.ID, "")
}

func (a *App) enableEndpoint(c *call) error {
	ep, err := a.endpointOf(c)
	if ep == nil {
		return err
	}
	if ep.Enabled() { // enabled already: nothing changes, nothing to audit
		c.SeeOther("/app/webhooks/" + ids.Format(ids.Endpoint, ep.ID))
		return nil
	}
	if err := a.Webhooks.EnableEndpoint(c.Context(), ep.ID); err != nil {
		return err
	}
	return a.endpointChanged(c, "webhook endpoint enable", ep.ID, "")
}

// endpointChanged audits a change of endpoint id and sends the browser back to its page.
func (a *App) endpointChanged(c *call, action string, id uuid.UUID, detail string) error {
	path := "/app/webhooks/" + ids.Format(ids.Endpoint, id)
	if err := c.audit(action, ids.Format(ids.Endpoint, id), detail); err != nil {
		return err
	}
	c.SeeOther(path)
	return nil
}

// resendDelivery starts a new round of attempts of an event to the endpoint, as `svc
// admin webhook redeliver EVT --endpoint ID` does: the worker makes the next attempt
// (numbers continue) with the event's id and body unchanged. An event of another
// workspace is 404, as an unknown one.
func (a *App) resendDelivery(c *call) error {
	ep, err := a.endpointOf(c)
	if ep == nil {
		return err
	}
	ev, err := ids.Parse(ids.Event, c.Param("event"))
	if err != nil {
		return c.notFound("webhook event")
	}
	ws, kind, err := a.Webhooks.EventMeta(c.Context(), a.openWebhookLogs, ev)
	if errors.Is(err, webhook.ErrNotFound) || err == nil && ws != c.ws.ID {
		return c.notFound("webhook event")
	}
	if err != nil {
		return err
	}
	if !ep.Enabled() {
		return a.renderEndpoint(c, 409, *ep, "The endpoint is disabled: enable it first, or the worker drops the delivery.")
	}
	err = a.Webhooks.Redeliver(c.Context(), ep.ID, ev, ws, kind, a.Now())
	if errors.Is(err, webhook.ErrInFlight) {
		return a.renderEndpoint(c, 409, *ep, "An attempt of this delivery is being made right now; resend in a minute if it fails.")
	}
	if err != nil {
		return err
	}
	return a.endpointChanged(c, "webhook redeliver", ep.ID, "event="+ids.Format(ids.Event, ev))
}

// openWebhookLogs is EventMeta's way to ClickHouse (the pool stays open: the role owns it).
func (a *App) openWebhookLogs(ctx context.Context) (*webhook.Logs, func(), error) {
	logs, err := a.webhookLogs(ctx)
	return logs, func() {}, err
}

// inboundData is the inbound screen's.
type inboundData struct {
	ReceiverURL string
	Secrets     []webhook.InboundSecret // valid now, newest first (shown without their values)
	Overlaps    []string
	Outcome     string   // the log's filter ("" every outcome)
	Outcomes    []string // the filter's choices
	Rows        []webhook.InboundRow
	LogError    string
}

// inboundLimit bounds the inbound log rows shown, newest first.
const inboundLimit = 200

var inboundOutcomes = []string{webhook.Processed, webhook.Ignored, webhook.Failed}

func (a *App) inboundPage(c *call) error {
	ctx := c.Context()
	secrets, err := a.Webhooks.InboundSecrets(ctx, c.ws.ID)
	if err != nil {
		return err
	}
	for i := range secrets {
		secrets[i].Secret = "" // never on this page: shown once, when issued
	}
	d := inboundData{ReceiverURL: a.Config.PublicURL + "/v1/webhooks/inbound/" + ids.Format(ids.Org, c.ws.ID),
		Secrets: secrets, Overlaps: overlaps, Outcomes: inboundOutcomes}
	if o := string(c.Ctx.QueryArgs().Peek("outcome")); slices.Contains(inboundOutcomes, o) {
		d.Outcome = o
	}
	logs, err := a.webhookLogs(ctx)
	if err == nil {
		d.Rows, err = logs.Inbound(ctx, c.ws.ID, d.Outcome, inboundLimit)
	}
	if err != nil {
		a.Log.Warn("inbound page: log not read", "request_id", c.ID, "err", err.Error())
		d.LogError = "The inbound log cannot be read right now (ClickHouse does not answer)."
	}
	return c.render(200, "webhooks-inbound", "Inbound webhooks", "webhooks", d)
}

// inboundSecretData is the page that shows a new inbound secret, once.
type inboundSecretData struct {
	Secret      string
	ReceiverURL string
	Previous    int        // other secrets still valid
	Cutover     *time.Time // when they stop being accepted
}

// issueInboundSecret issues a new inbound signing secret, as `svc admin webhook
// inbound-secret` does; the previous ones stay valid for the overlap.
func (a *App) issueInboundSecret(c *call) error {
	overlap, err := time.ParseDuration(c.form.Get("overlap"))
	if err != nil || !slices.Contains(overlaps, c.form.Get("overlap")) {
		c.message(422, "Choose an overlap", "Choose how long the previous secrets stay valid.")
		return nil
	}
	ns, others, err := a.Webhooks.IssueInboundSecret(c.Context(), c.ws.ID, overlap)
	if err != nil {
		return err
	}
	if err := c.audit("webhook inbound-secret", ids.Format(ids.Org, c.ws.ID), "overlap="+overlap.String()); err != nil {
		return err
	}
	d := inboundSecretData{Secret: ns.Secret, Previous: len(others),
		ReceiverURL: a.Config.PublicURL + "/v1/webhooks/inbound/" + ids.Format(ids.Org, c.ws.ID)}
	if len(others) > 0 {
		t := ns.CreatedAt.Add(overlap)
		d.Cutover = &t
	}
	return c.render(201, "webhooks-inbound-secret", "Your new inbound secret", "webhooks", d)
}
