package webhooks

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/google/uuid"

	"svc/lib/ids"
	"svc/lib/paging"
	"svc/lib/process"
	"svc/schema"
	"svc/schema/rollups"
	"svc/schema/workspace"
)

// Triggers find what outbound events report and emit them. Every event id is derived
// from what it is about (EventID), so any number of processes may scan at once and a
// rescan emits nothing twice.
type Triggers struct {
	Config  Config
	Emitter *Emitter
	Keys    *workspace.Store
	Conn    driver.Conn
	Log     *slog.Logger
	Now     func() time.Time
}

// Run scans every Config.ScanInterval until ctx is done.
func (tr *Triggers) Run(ctx context.Context) error {
	process.Every(ctx, tr.Config.ScanInterval, tr.ScanOnce, func(err error) { tr.Log.Warn("webhook triggers", "err", err.Error()) })
	return nil
}

// ScanOnce runs every trigger once (the pixel alerts: alerts.go), and the inbound log's
// retention when it is due (retention.go).
func (tr *Triggers) ScanOnce(ctx context.Context) error {
	return errors.Join(tr.ScanExpiringKeys(ctx), tr.ScanClosedDays(ctx), tr.ScanAlerts(ctx), tr.inboundRetentionIfDue(ctx))
}

// ScanExpiringKeys emits key.expiring for every key of a workspace with endpoints that
// is neither revoked nor expired and expires within Config.KeyExpiringWithin. One
// event per key and expiry: a key whose expiry changes is announced again.
func (tr *Triggers) ScanExpiringKeys(ctx context.Context) error {
	wss, err := tr.Emitter.Store.Workspaces(ctx)
	if err != nil {
		return err
	}
	now := tr.Now().UTC()
	for _, ws := range wss {
		ks, err := tr.Keys.Keys(ctx, ws)
		if err != nil {
			return err
		}
		for _, k := range ks {
			if k.RevokedAt != nil || k.ExpiresAt == nil || !k.ExpiresAt.After(now) || k.ExpiresAt.Sub(now) > tr.Config.KeyExpiringWithin {
				continue
			}
			exp := k.ExpiresAt.UTC()
			ev := Event{ID: EventID(KindKeyExpiring, k.ID.String(), exp.Format(time.RFC3339)), Kind: KindKeyExpiring,
				WorkspaceID: ws, CreatedAt: now, Data: KeyExpiring{KeyID: ids.Format(ids.Key, k.ID), KeyIDUUID: k.ID.String(),
					Env: k.Env, Scopes: k.Scopes, ExpiresAt: exp, ExpiresInSeconds: int64(exp.Sub(now) / time.Second)}}
			if _, err := tr.Emitter.Emit(ctx, ev); err != nil {
				return fmt.Errorf("key.expiring for %s: %w", ids.Format(ids.Key, k.ID), err)
			}
		}
	}
	return nil
}

// maxDaysPerScan bounds how far one scan catches up on closed days.
const maxDaysPerScan = 7

// ScanClosedDays emits rollup.day_closed for each pixel of a workspace with endpoints
// whose local day (in the pixel's zone: its own, its workspace's, or UTC; workspace.Store)
// has rollup rows and became final (rollups.StatusIn) since the last scan: the instant
// it turned final is in (last scan, this scan]. By then the edge accepts no more events
// for the day, so its rows are complete. The last scan's instant is kept in Redis; the
// first scan looks back one day rather than announcing history. Ids are stable
// (closedDayID), so overlapping scans from several processes emit each day once.
func (tr *Triggers) ScanClosedDays(ctx context.Context) error {
	if tr.Conn == nil {
		return nil
	}
	now := tr.Now().UTC()
	st := tr.Emitter.Store
	since, err := tr.lastClosedScan(ctx, now)
	if err != nil {
		return err
	}
	wss, err := st.Workspaces(ctx)
	if err != nil {
		return err
	}
	for _, ws := range wss {
		pixels, err := tr.Keys.Pixels(ctx, ws)
		if err != nil {
			return err
		}
		for _, p := range pixels {
			if err := tr.closePixelDays(ctx, p, since, now); err != nil {
				return err
			}
		}
	}
	return st.setState(ctx, closedScanState, now.Format(time.RFC3339Nano))
}

// closePixelDays announces each local day of p that turned final in (since, now] and
// has rollup rows. A pixel's rows are of its workspace's environment (sandbox keys
// exist only for showroom workspaces, live keys only for the others).
func (tr *Triggers) closePixelDays(ctx context.Context, p workspace.Pixel, since, now time.Time) error {
	z, err := tr.Keys.TimeZone(ctx, p)
	if errors.Is(err, workspace.ErrNotFound) {
		return nil // deleted meanwhile
	}
	if err != nil {
		return err
	}
	loc, err := schema.LoadZone(z.Name)
	if err != nil {
		return fmt.Errorf("pixel %s: %w", ids.Format(ids.Pixel, p.ID), err)
	}
	pd := pixelDay{ws: p.WorkspaceID, pixel: p.ID, sandbox: p.Showroom}
	last := rollups.LocalDate(now.Add(-rollups.Grace), loc)
	for d := rollups.LocalDate(since.Add(-rollups.Grace), loc).AddDate(0, 0, -1); !d.After(last); d = d.AddDate(0, 0, 1) {
		if final := rollups.DayEnd(d, loc).Add(rollups.Grace); !final.After(since) || final.After(now) {
			continue
		}
		data, err := tr.dayClosed(ctx, pd, d, z.Name)
		if err != nil {
			return err
		}
		if len(data.Rows) == 0 {
			continue // no events that day
		}
		ev := Event{ID: closedDayID(pd, d, z.Name), Kind: KindDayClosed, WorkspaceID: pd.ws, CreatedAt: now, Data: data}
		if _, err := tr.Emitter.Emit(ctx, ev); err != nil {
			return err
		}
	}
	return nil
}

// closedScanState names the instant of the last complete closed-days scan. Before
// zones, "day_closed" held the last UTC date announced; a scan upgrades from it.
const (
	closedScanState = "day_closed_at"
	oldClosedState  = "day_closed"
)

// lastClosedScan returns the instant after which days turning final are still to be
// announced, at most maxDaysPerScan days before now.
func (tr *Triggers) lastClosedScan(ctx context.Context, now time.Time) (time.Time, error) {
	st := tr.Emitter.Store
	since := now.Add(-24 * time.Hour)
	if v, err := st.getState(ctx, closedScanState); err != nil {
		return time.Time{}, err
	} else if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		since = t
	} else if v, err := st.getState(ctx, oldClosedState); err != nil {
		return time.Time{}, err
	} else if d, err := time.Parse(time.DateOnly, v); err == nil {
		since = rollups.DayEnd(d, time.UTC).Add(rollups.Grace) // when that UTC day turned final
	}
	if oldest := now.Add(-maxDaysPerScan * 24 * time.Hour); since.Before(oldest) {
		since = oldest
	}
	return since, nil
}

type pixelDay struct {
	ws, pixel uuid.UUID
	sandbox   bool
}

// closedDayID is the stable id of a day_closed event. A UTC day keeps the id it had
// before zones existed; a day of another zone names its zone (a zone change makes new
// days, announced anew).
func closedDayID(p pixelDay, day time.Time, zone string) uuid.UUID {
	parts := []string{p.pixel.String(), day.Format(time.DateOnly), fmt.Sprint(p.sandbox)}
	if zone != schema.UTC {
		parts = append(parts, zone)
	}
	return EventID(KindDayClosed, parts...)
}

func (tr *Triggers) dayClosed(ctx context.Context, p pixelDay, day time.Time, zone string) (DayClosed, error) {
	rs, err := rollups.QueryDaily(ctx, tr.Conn, rollups.DailyQuery{Workspace: schema.UUID(p.ws), Sandbox: p.sandbox,
		Pixel: schema.UUID(p.pixel), TimeZone: zone, From: day, To: day, Limit: paging.MaxLimit})
	if err != nil {
		return DayClosed{}, err
	}
	out := DayClosed{PixelID: ids.Format(ids.Pixel, p.pixel), PixelIDUUID: p.pixel.String(),
		Date: day.Format(time.DateOnly), TimeZone: zone, Sandbox: p.sandbox, Rows: []DayClosedRow{}}
	for _, r := range rs {
		out.Events += r.Events
		out.ConsentedEvents += r.ConsentedEvents
		out.Rows = append(out.Rows, DayClosedRow{EventName: r.EventName, Currency: r.Currency, Events: r.Events,
			ConsentedEvents: r.ConsentedEvents, Value: r.Value, UniquePeople: r.UniquePeople})
	}
	return out, nil
}
