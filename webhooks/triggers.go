package webhooks

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/google/uuid"

	"svc/api/ids"
	"svc/api/keys"
	"svc/rollup"
	"svc/schema"
)

// Triggers find what outbound events report and emit them. Every event id is derived
// from what it is about (EventID), so any number of processes may scan at once and a
// rescan emits nothing twice.
type Triggers struct {
	Config  Config
	Emitter *Emitter
	Keys    *keys.Store
	Conn    driver.Conn
	Log     *slog.Logger
	Now     func() time.Time
}

// Run scans every Config.ScanInterval until ctx is done.
func (tr *Triggers) Run(ctx context.Context) error {
	t := time.NewTicker(tr.Config.ScanInterval)
	defer t.Stop()
	for {
		if err := tr.ScanOnce(ctx); err != nil && ctx.Err() == nil {
			tr.Log.Warn("webhook triggers", "err", err.Error())
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// ScanOnce runs every trigger once.
func (tr *Triggers) ScanOnce(ctx context.Context) error {
	return errors.Join(tr.ScanExpiringKeys(ctx), tr.ScanClosedDays(ctx))
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

// Zones span UTC-12 to UTC+14: a local day D lies within [D 00:00 UTC - 14h,
// D+1 00:00 UTC + 12h]. zoneReach rounds that up.
const zoneReach = 15 * time.Hour

// ScanClosedDays emits rollup.day_closed for each (pixel, environment) whose local day
// (in the pixel's zone: its own, its workspace's, or UTC) with rollup rows became final
// (rollup.StatusIn) since the last scan: for each such day, the instant it turned final
// is in (last scan, this scan]. The last scan's instant is kept in Redis; the first scan
// looks back one day rather than announcing history. Ids are stable (closedDayID), so
// overlapping scans from several processes emit each day once.
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
	if len(wss) > 0 {
		// Local day D turns final at DayEnd(D) + Grace, and DayEnd(D) is within
		// zoneReach of 00:00 UTC of D+1.
		first := rollup.LocalDate(since.Add(-rollup.Grace-zoneReach), time.UTC).AddDate(0, 0, -1)
		last := rollup.LocalDate(now.Add(-rollup.Grace+zoneReach), time.UTC).AddDate(0, 0, -1)
		zones := map[uuid.UUID]*time.Location{} // this scan's view of each pixel's zone
		for d := first; !d.After(last); d = d.AddDate(0, 0, 1) {
			if err := tr.closeDay(ctx, d, wss, zones, since, now); err != nil {
				return err
			}
		}
	}
	return st.setState(ctx, closedScanState, now.Format(time.RFC3339Nano))
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
		since = rollup.DayEnd(d, time.UTC).Add(rollup.Grace) // when that UTC day turned final
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

// closeDay announces local day day of every pixel of wss that has rollup rows around it
// and whose day, in its zone, turned final in (since, now].
func (tr *Triggers) closeDay(ctx context.Context, day time.Time, wss []uuid.UUID, zones map[uuid.UUID]*time.Location, since, now time.Time) error {
	// Local day D covers parts of the UTC days D-1, D and D+1 at most.
	rows, err := tr.Conn.Query(ctx, `SELECT DISTINCT workspace_id, sandbox, pixel_id FROM pixel_rollups_daily
		WHERE event_date BETWEEN toDate(?) AND toDate(?)`, day.AddDate(0, 0, -1).Format(time.DateOnly), day.AddDate(0, 0, 1).Format(time.DateOnly))
	if err != nil {
		return fmt.Errorf("closed days: %w", err)
	}
	var found []pixelDay
	for rows.Next() {
		var p pixelDay
		var sb uint8
		if err := rows.Scan(&p.ws, &sb, &p.pixel); err != nil {
			rows.Close()
			return err
		}
		p.sandbox = sb == 1
		if slices.Contains(wss, p.ws) {
			found = append(found, p)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for _, p := range found {
		loc, ok := zones[p.pixel]
		if !ok {
			if loc, err = tr.zone(ctx, p); err != nil {
				return err
			}
			zones[p.pixel] = loc
		}
		zone := loc.String()
		if final := rollup.DayEnd(day, loc).Add(rollup.Grace); !final.After(since) || final.After(now) {
			continue
		}
		data, err := tr.dayClosed(ctx, p, day, zone)
		if err != nil {
			return err
		}
		if len(data.Rows) == 0 {
			continue // the pixel's events around this UTC date are on other local days
		}
		ev := Event{ID: closedDayID(p, day, zone), Kind: KindDayClosed, WorkspaceID: p.ws, CreatedAt: now, Data: data}
		if _, err := tr.Emitter.Emit(ctx, ev); err != nil {
			return err
		}
	}
	return nil
}

// zone is the time zone of p's days: the pixel's, its workspace's, or UTC (also for a
// pixel without a record in the key store, such as seeded data).
func (tr *Triggers) zone(ctx context.Context, p pixelDay) (*time.Location, error) {
	name := schema.UTC
	z, err := tr.Keys.TimeZone(ctx, keys.Pixel{ID: p.pixel, WorkspaceID: p.ws})
	switch {
	case err == nil:
		name = z.Name
	case !errors.Is(err, keys.ErrNotFound):
		return nil, err
	}
	loc, err := schema.LoadZone(name)
	if err != nil {
		return nil, fmt.Errorf("pixel %s: %w", p.pixel, err)
	}
	return loc, nil
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
	rs, err := rollup.QueryDaily(ctx, tr.Conn, rollup.DailyQuery{Workspace: schema.UUID(p.ws), Sandbox: p.sandbox,
		Pixel: schema.UUID(p.pixel), TimeZone: zone, From: day, To: day, Limit: rollup.MaxLimit})
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
