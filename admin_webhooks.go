package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"svc/lib/chpool"
	"svc/lib/ids"
	"svc/lib/settings"
	"svc/webhooks"
)

// Admin commands (svc admin webhook …). Each prints one JSON object; secrets are
// printed only where they are issued (inbound-secret, endpoint create, endpoint
// rotate-secret).
var webhookCommands = Commands{
	"webhook inbound-secret":         {Usage: "--workspace ID [--overlap DURATION]", Run: cmdInboundSecret},
	"webhook inbound-log":            {Usage: "--workspace ID [--outcome processed|ignored|failed] [--limit N]", Run: cmdInboundLog},
	"webhook endpoint create":        {Usage: "--workspace ID --url URL [--kinds a,b]", Run: cmdEndpointCreate},
	"webhook endpoint list":          {Usage: "--workspace ID", Run: cmdEndpointList},
	"webhook endpoint enable":        {Usage: "ID", Run: cmdEndpointEnable},
	"webhook endpoint disable":       {Usage: "ID", Run: cmdEndpointDisable},
	"webhook endpoint rotate-secret": {Usage: "ID [--overlap DURATION]", Run: cmdEndpointRotate},
	"webhook deliveries":             {Usage: "--workspace ID | --endpoint ID | --event ID [--limit N]", Run: cmdDeliveries},
	"webhook redeliver":              {Usage: "EVENT_ID [--endpoint ID]", Run: cmdRedeliver},
}

// cmdConfig reads the role's configuration (for the Redis prefix and overlaps).
func cmdConfig() (webhooks.Config, error) {
	r := settings.New()
	c := webhooks.ConfigFromEnv(r)
	if err := r.Err(); err != nil {
		return c, err
	}
	return c, c.Validate()
}

func cmdStore(e *Env) (*webhooks.Store, webhooks.Config, error) {
	c, err := cmdConfig()
	if err != nil {
		return nil, c, err
	}
	st := webhooks.NewStore(e.Redis, c.Prefix)
	st.Egress = c.Egress()
	return st, c, nil
}

// openLogs connects to ClickHouse as the role does (SVC_CLICKHOUSE_*).
func openLogs(ctx context.Context) (*webhooks.Logs, func(), error) {
	c, err := cmdConfig()
	if err != nil {
		return nil, nil, err
	}
	conn, err := chpool.Open(ctx, c.ClickHouse)
	if err != nil {
		return nil, nil, err
	}
	return webhooks.NewLogs(conn), func() { conn.Close() }, nil
}

func endpointArg(ctx context.Context, st *webhooks.Store, raw string) (webhooks.Endpoint, error) {
	id, err := ids.Parse(ids.Endpoint, raw)
	if err != nil {
		return webhooks.Endpoint{}, fmt.Errorf("endpoint id %q: %v (want whk_<uuid>)", raw, err)
	}
	ep, err := st.Endpoint(ctx, id)
	if errors.Is(err, webhooks.ErrNotFound) {
		return ep, fmt.Errorf("no endpoint %s", ids.Format(ids.Endpoint, id))
	}
	return ep, err
}

func cmdInboundSecret(ctx context.Context, e *Env, args []string) (any, error) {
	st, c, err := cmdStore(e)
	if err != nil {
		return nil, err
	}
	fs := flag.NewFlagSet("webhook inbound-secret", flag.ContinueOnError)
	ws := fs.String("workspace", "", "workspace id")
	overlap := fs.Duration("overlap", c.SecretOverlap, "how long the previous secrets stay valid")
	if _, err := ParseArgs(fs, args, 0); err != nil {
		return nil, err
	}
	if *overlap < 0 {
		return nil, errors.New("--overlap must not be negative")
	}
	w, err := WorkspaceArg(ctx, e.Keys, *ws)
	if err != nil {
		return nil, err
	}
	ns, others, err := st.IssueInboundSecret(ctx, w.ID, *overlap)
	if err != nil {
		return nil, err
	}
	type prev struct {
		ID         string     `json:"id"`
		ValidUntil *time.Time `json:"valid_until"`
	}
	ps := []prev{}
	for _, o := range others {
		ps = append(ps, prev{o.ID, o.ExpiresAt})
	}
	return map[string]any{"secret": ns.Secret, "secret_id": ns.ID, "created_at": ns.CreatedAt,
		"workspace_id": ids.Format(ids.Org, w.ID), "workspace_id_uuid": w.ID.String(),
		"receiver_path": "/v1/webhooks/inbound/" + ids.Format(ids.Org, w.ID), "previous_secrets": ps}, nil
}

func cmdInboundLog(ctx context.Context, e *Env, args []string) (any, error) {
	fs := flag.NewFlagSet("webhook inbound-log", flag.ContinueOnError)
	ws := fs.String("workspace", "", "workspace id")
	outcome := fs.String("outcome", "", "processed, ignored or failed")
	limit := fs.Int("limit", 100, "rows, newest first (1..10000)")
	if _, err := ParseArgs(fs, args, 0); err != nil {
		return nil, err
	}
	if *outcome != "" && *outcome != webhooks.Processed && *outcome != webhooks.Ignored && *outcome != webhooks.Failed {
		return nil, fmt.Errorf("--outcome %q: want processed, ignored or failed", *outcome)
	}
	if *limit < 1 || *limit > 10000 {
		return nil, errors.New("--limit: want 1..10000")
	}
	w, err := WorkspaceArg(ctx, e.Keys, *ws)
	if err != nil {
		return nil, err
	}
	logs, closeFn, err := openLogs(ctx)
	if err != nil {
		return nil, err
	}
	defer closeFn()
	rows, err := logs.Inbound(ctx, w.ID, *outcome, *limit)
	if err != nil {
		return nil, err
	}
	return map[string]any{"data": rows, "workspace_id": ids.Format(ids.Org, w.ID)}, nil
}

// EndpointJSON is an endpoint as printed; Secret only where it is issued.
type EndpointJSON struct {
	ID              string     `json:"id"`
	IDUUID          string     `json:"id_uuid"`
	WorkspaceID     string     `json:"workspace_id"`
	WorkspaceIDUUID string     `json:"workspace_id_uuid"`
	URL             string     `json:"url"`
	Kinds           []string   `json:"kinds"`
	Status          string     `json:"status"`
	DisabledAt      *time.Time `json:"disabled_at,omitempty"`
	DisabledReason  string     `json:"disabled_reason,omitempty"`
	FailingSince    *time.Time `json:"failing_since,omitempty"`
	Secret          string     `json:"secret,omitempty"`
	Secrets         int        `json:"valid_secrets"`
	CreatedAt       time.Time  `json:"created_at"`
}

func endpointJSON(ep webhooks.Endpoint, withSecret bool) EndpointJSON {
	out := EndpointJSON{ID: ids.Format(ids.Endpoint, ep.ID), IDUUID: ep.ID.String(),
		WorkspaceID: ids.Format(ids.Org, ep.WorkspaceID), WorkspaceIDUUID: ep.WorkspaceID.String(), URL: ep.URL,
		Kinds: ep.Kinds, Status: "enabled", DisabledAt: ep.DisabledAt, DisabledReason: ep.DisabledReason,
		FailingSince: ep.FailingSince, Secrets: len(ep.SigningSecrets(time.Now())), CreatedAt: ep.CreatedAt}
	if !ep.Enabled() {
		out.Status = "disabled"
	}
	if withSecret && len(ep.Secrets) > 0 {
		out.Secret = ep.Secrets[0].Secret
	}
	return out
}

func cmdEndpointCreate(ctx context.Context, e *Env, args []string) (any, error) {
	st, c, err := cmdStore(e)
	if err != nil {
		return nil, err
	}
	fs := flag.NewFlagSet("webhook endpoint create", flag.ContinueOnError)
	ws := fs.String("workspace", "", "workspace id")
	u := fs.String("url", "", "where deliveries are POSTed")
	kinds := fs.String("kinds", "", "comma-separated event kinds (default: all): "+strings.Join(webhooks.Kinds, ", "))
	if _, err := ParseArgs(fs, args, 0); err != nil {
		return nil, err
	}
	if *u == "" {
		return nil, errors.New("--url is required")
	}
	if err := webhooks.ValidateURL(*u); err != nil {
		return nil, fmt.Errorf("--url: %v", err)
	}
	var refused *webhooks.AddressError
	if err := c.Egress().CheckURL(*u); errors.As(err, &refused) {
		return nil, fmt.Errorf("--url: %v (SVC_WEBHOOKS_ALLOW_NETS allows internal ranges)", err)
	} else if err != nil {
		return nil, fmt.Errorf("--url: %v", err)
	}
	w, err := WorkspaceArg(ctx, e.Keys, *ws)
	if err != nil {
		return nil, err
	}
	var ks []string
	for _, k := range strings.Split(*kinds, ",") {
		if k = strings.TrimSpace(k); k != "" {
			ks = append(ks, k)
		}
	}
	ep, err := st.CreateEndpoint(ctx, w.ID, *u, ks)
	if err != nil {
		return nil, fmt.Errorf("--kinds: %v", err)
	}
	return endpointJSON(ep, true), nil
}

func cmdEndpointList(ctx context.Context, e *Env, args []string) (any, error) {
	st, _, err := cmdStore(e)
	if err != nil {
		return nil, err
	}
	fs := flag.NewFlagSet("webhook endpoint list", flag.ContinueOnError)
	ws := fs.String("workspace", "", "workspace id")
	if _, err := ParseArgs(fs, args, 0); err != nil {
		return nil, err
	}
	w, err := WorkspaceArg(ctx, e.Keys, *ws)
	if err != nil {
		return nil, err
	}
	eps, err := st.Endpoints(ctx, w.ID)
	if err != nil {
		return nil, err
	}
	out := make([]EndpointJSON, len(eps))
	for i, ep := range eps {
		out[i] = endpointJSON(ep, false)
	}
	return map[string]any{"data": out}, nil
}

func endpointCmd(ctx context.Context, e *Env, name string, args []string, extra func(fs *flag.FlagSet)) (*webhooks.Store, webhooks.Config, webhooks.Endpoint, error) {
	st, c, err := cmdStore(e)
	if err != nil {
		return nil, c, webhooks.Endpoint{}, err
	}
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	if extra != nil {
		extra(fs)
	}
	pos, err := ParseArgs(fs, args, 1)
	if err != nil {
		return nil, c, webhooks.Endpoint{}, err
	}
	ep, err := endpointArg(ctx, st, pos[0])
	return st, c, ep, err
}

func cmdEndpointEnable(ctx context.Context, e *Env, args []string) (any, error) {
	st, _, ep, err := endpointCmd(ctx, e, "webhook endpoint enable", args, nil)
	if err != nil {
		return nil, err
	}
	if err := st.EnableEndpoint(ctx, ep.ID); err != nil {
		return nil, err
	}
	ep, err = st.Endpoint(ctx, ep.ID)
	return endpointJSON(ep, false), err
}

func cmdEndpointDisable(ctx context.Context, e *Env, args []string) (any, error) {
	st, _, ep, err := endpointCmd(ctx, e, "webhook endpoint disable", args, nil)
	if err != nil {
		return nil, err
	}
	if _, err := st.DisableEndpoint(ctx, ep.ID, "disabled by an administrator"); err != nil {
		return nil, err
	}
	ep, err = st.Endpoint(ctx, ep.ID)
	return endpointJSON(ep, false), err
}

func cmdEndpointRotate(ctx context.Context, e *Env, args []string) (any, error) {
	var overlap *time.Duration
	st, c, ep, err := endpointCmd(ctx, e, "webhook endpoint rotate-secret", args, func(fs *flag.FlagSet) {
		overlap = fs.Duration("overlap", 24*time.Hour, "how long the previous secrets keep signing")
	})
	if err != nil {
		return nil, err
	}
	_ = c
	if *overlap < 0 {
		return nil, errors.New("--overlap must not be negative")
	}
	ep, err = st.RotateEndpointSecret(ctx, ep.ID, *overlap)
	if err != nil {
		return nil, err
	}
	return endpointJSON(ep, true), nil
}

func cmdDeliveries(ctx context.Context, e *Env, args []string) (any, error) {
	fs := flag.NewFlagSet("webhook deliveries", flag.ContinueOnError)
	ws := fs.String("workspace", "", "workspace id")
	ep := fs.String("endpoint", "", "endpoint id (whk_…)")
	ev := fs.String("event", "", "event id (evt_…)")
	limit := fs.Int("limit", 100, "rows, newest first (1..10000)")
	if _, err := ParseArgs(fs, args, 0); err != nil {
		return nil, err
	}
	if *limit < 1 || *limit > 10000 {
		return nil, errors.New("--limit: want 1..10000")
	}
	f := webhooks.DeliveryFilter{Limit: *limit}
	if *ws != "" {
		w, err := WorkspaceArg(ctx, e.Keys, *ws)
		if err != nil {
			return nil, err
		}
		f.Workspace = w.ID
	}
	var err error
	if *ep != "" {
		if f.Endpoint, err = ids.Parse(ids.Endpoint, *ep); err != nil {
			return nil, fmt.Errorf("--endpoint %q: %v", *ep, err)
		}
	}
	if *ev != "" {
		if f.Event, err = ids.Parse(ids.Event, *ev); err != nil {
			return nil, fmt.Errorf("--event %q: %v", *ev, err)
		}
	}
	if f.Workspace == uuid.Nil && f.Endpoint == uuid.Nil && f.Event == uuid.Nil {
		return nil, errors.New("give --workspace, --endpoint or --event")
	}
	logs, closeFn, err := openLogs(ctx)
	if err != nil {
		return nil, err
	}
	defer closeFn()
	rows, err := logs.Deliveries(ctx, f)
	if err != nil {
		return nil, err
	}
	return map[string]any{"data": deliveryJSON(rows)}, nil
}

// DeliveryJSON is a delivery-log row as printed.
type DeliveryJSON struct {
	EventID     string `json:"event_id"`
	EndpointID  string `json:"endpoint_id"`
	WorkspaceID string `json:"workspace_id"`
	webhooks.DeliveryRow
}

func deliveryJSON(rows []webhooks.DeliveryRow) []DeliveryJSON {
	out := make([]DeliveryJSON, len(rows))
	for i, r := range rows {
		out[i] = DeliveryJSON{ids.Format(ids.Event, r.EventID), ids.Format(ids.Endpoint, r.EndpointID),
			ids.Format(ids.Org, r.WorkspaceID), r}
	}
	return out
}

func cmdRedeliver(ctx context.Context, e *Env, args []string) (any, error) {
	st, _, err := cmdStore(e)
	if err != nil {
		return nil, err
	}
	fs := flag.NewFlagSet("webhook redeliver", flag.ContinueOnError)
	epRaw := fs.String("endpoint", "", "only this endpoint (default: every enabled endpoint that takes the kind)")
	pos, err := ParseArgs(fs, args, 1)
	if err != nil {
		return nil, err
	}
	evID, err := ids.Parse(ids.Event, pos[0])
	if err != nil {
		return nil, fmt.Errorf("event id %q: %v (want evt_<uuid>)", pos[0], err)
	}
	ws, kind, err := st.EventMeta(ctx, openLogs, evID)
	if err != nil {
		return nil, err
	}
	var targets []webhooks.Endpoint
	if *epRaw != "" {
		ep, err := endpointArg(ctx, st, *epRaw)
		if err != nil {
			return nil, err
		}
		if ep.WorkspaceID != ws {
			return nil, fmt.Errorf("endpoint %s belongs to another workspace than event %s", *epRaw, pos[0])
		}
		targets = []webhooks.Endpoint{ep}
	} else {
		eps, err := st.Endpoints(ctx, ws)
		if err != nil {
			return nil, err
		}
		for _, ep := range eps {
			if ep.Wants(kind) {
				targets = append(targets, ep)
			}
		}
	}
	type sched struct {
		EndpointID string `json:"endpoint_id"`
		Status     string `json:"status"`
	}
	out := []sched{}
	now := st.Now()
	for _, ep := range targets {
		s := sched{EndpointID: ids.Format(ids.Endpoint, ep.ID), Status: "scheduled"}
		switch err := st.Redeliver(ctx, ep.ID, evID, ws, kind, now); {
		case errors.Is(err, webhooks.ErrInFlight):
			s.Status = "in_flight"
		case err != nil:
			return nil, err
		case !ep.Enabled():
			s.Status = "endpoint_disabled (enable it first: svc admin webhook endpoint enable " + s.EndpointID + ")"
		}
		out = append(out, s)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no endpoint of workspace %s takes %s events", ids.Format(ids.Org, ws), kind)
	}
	// workspace_id: the change is the workspace's, and its audit log records it (auditAdmin).
	return map[string]any{"event_id": ids.Format(ids.Event, evID), "kind": kind, "workspace_id": ids.Format(ids.Org, ws),
		"deliveries": out}, nil
}
