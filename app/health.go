package app

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"svc/lib/ids"
	"svc/schema"
	"svc/schema/rejection"
	"svc/schema/trace"
	"svc/schema/workspace"
)

// healthDays and healthRejections are what a pixel page shows of its health: its last
// local days and its newest stored rejections.
const (
	healthDays       = trace.DefaultDays
	healthRejections = 20
)

// healthData is a pixel's health as GET /pixels/{id} and GET /rejections give it, read
// through the same domain code (trace.Healths, trace.Lags, rejection.List and Count).
type healthData struct {
	Days         []healthDay // newest first
	LastAccepted time.Time   // zero: none within the days
	Lag          string
	Rejections   []rejectionView
	Counts       rejection.Counts // every kept rejection of the pixel; NotStored: past the cap of samples
	Error        string
}

type healthDay struct {
	trace.Day
	ByRule string // "rule: n, …"
}

type rejectionView struct {
	rejection.Stored
	KeyID string // key_…
	Event string // "event #1" or "the batch"
}

// health reads pixel's health in zone; an error leaves Error set and the rest empty.
func (a *App) health(ctx context.Context, ws workspace.Workspace, pixel uuid.UUID, zone string) healthData {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	h, err := a.readHealth(ctx, ws, pixel, zone)
	if err != nil {
		a.Log.Warn("pixel page: health unavailable", "err", err.Error())
		return healthData{Error: "The pixel's health cannot be read right now (the analytics store does not answer)."}
	}
	return h
}

func (a *App) readHealth(ctx context.Context, ws workspace.Workspace, pixel uuid.UUID, zone string) (healthData, error) {
	conn, err := a.rollups(ctx)
	if err != nil {
		return healthData{}, err
	}
	loc, err := schema.LoadZone(zone)
	if err != nil {
		loc = time.UTC
	}
	now := a.Now()
	hs, err := trace.Healths(ctx, conn, ws.ID, ws.Showroom, []trace.PixelDays{{ID: pixel, Loc: loc, Days: healthDays}}, now)
	if err != nil {
		return healthData{}, err
	}
	var d healthData
	if h := hs[pixel]; h != nil {
		d.LastAccepted = h.LastAccepted
		for i := len(h.Days) - 1; i >= 0; i-- {
			d.Days = append(d.Days, healthDay{Day: h.Days[i], ByRule: byRule(h.Days[i].Rejected)})
		}
	}
	d.Lag = a.lagText(ctx, pixel, now)
	q := rejection.Query{Workspace: ws.ID, Sandbox: ws.Showroom, Pixel: pixel}
	rows, err := rejection.List(ctx, conn, q, nil, 0, healthRejections)
	if err != nil {
		return healthData{}, err
	}
	for _, s := range rows {
		v := rejectionView{Stored: s, KeyID: ids.Format(ids.Key, s.Key), Event: "the batch"}
		if s.Index != rejection.Batch {
			v.Event = fmt.Sprintf("event #%d", s.Index)
		}
		d.Rejections = append(d.Rejections, v)
	}
	d.Counts, err = rejection.Count(ctx, conn, q)
	return d, err
}

func byRule(m map[string]uint64) string {
	var parts []string
	for _, r := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s: %d", r, m[r]))
	}
	return strings.Join(parts, ", ")
}
