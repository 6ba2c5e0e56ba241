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

// ScanClosedDays emits rollup.day_closed for each (pixel, environment) with rollup
// rows on a day that became final (rollup.Status) since the last scan. The last day
// scanned is kept in Redis; the first scan starts at the newest final day rather than
// announcing history.
func (tr *Triggers) ScanClosedDays(ctx context.Context) error {
	if tr.Conn == nil {
		return nil
	}
	now := tr.Now().UTC()
	today := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC)
	latest := today
	for rollup.Status(latest, now) != rollup.StatusFinal {
		latest = latest.AddDate(0, 0, -1)
	}
	st := tr.Emitter.Store
	last, err := st.getState(ctx, "day_closed")
	if err != nil {
		return err
	}
	from := latest
	if d, err := time.Parse("2006-01-02", last); err == nil {
		from = d.AddDate(0, 0, 1)
		if latest.Sub(from) > maxDaysPerScan*24*time.Hour {
			from = latest.AddDate(0, 0, -maxDaysPerScan)
		}
	}
	wss, err := st.Workspaces(ctx)
	if err != nil {
		return err
	}
	for d := from; !d.After(latest); d = d.AddDate(0, 0, 1) {
		if len(wss) > 0 {
			if err := tr.closeDay(ctx, d, wss, now); err != nil {
				return err
			}
		}
		if err := st.setState(ctx, "day_closed", d.Format("2006-01-02")); err != nil {
			return err
		}
	}
	return nil
}

type pixelDay struct {
	ws, pixel uuid.UUID
	sandbox   bool
}

func (tr *Triggers) closeDay(ctx context.Context, day time.Time, wss []uuid.UUID, now time.Time) error {
	rows, err := tr.Conn.Query(ctx, `SELECT DISTINCT workspace_id, sandbox, pixel_id FROM pixel_rollups_daily
		WHERE event_date = toDate(?)`, day.Format("2006-01-02"))
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
		data, err := tr.dayClosed(ctx, p, day)
		if err != nil {
			return err
		}
		ev := Event{ID: EventID(KindDayClosed, p.pixel.String(), day.Format("2006-01-02"), fmt.Sprint(p.sandbox)),
			Kind: KindDayClosed, WorkspaceID: p.ws, CreatedAt: now, Data: data}
		if _, err := tr.Emitter.Emit(ctx, ev); err != nil {
			return err
		}
	}
	return nil
}

func (tr *Triggers) dayClosed(ctx context.Context, p pixelDay, day time.Time) (DayClosed, error) {
	rs, err := rollup.QueryDaily(ctx, tr.Conn, rollup.DailyQuery{Workspace: schema.UUID(p.ws), Sandbox: p.sandbox,
		Pixel: schema.UUID(p.pixel), From: day, To: day, Limit: rollup.MaxLimit})
	if err != nil {
		return DayClosed{}, err
	}
	out := DayClosed{PixelID: ids.Format(ids.Pixel, p.pixel), PixelIDUUID: p.pixel.String(),
		Date: day.Format("2006-01-02"), Sandbox: p.sandbox, Rows: []DayClosedRow{}}
	for _, r := range rs {
		out.Events += r.Events
		out.ConsentedEvents += r.ConsentedEvents
		out.Rows = append(out.Rows, DayClosedRow{EventName: r.EventName, Currency: r.Currency, Events: r.Events,
			ConsentedEvents: r.ConsentedEvents, Value: r.Value, UniquePeople: r.UniquePeople})
	}
	return out, nil
}
