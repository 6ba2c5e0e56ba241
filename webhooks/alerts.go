package webhooks

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	json "github.com/goccy/go-json"
	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"svc/lib/ids"
	"svc/schema/trace"
	"svc/schema/workspace"
)

// Pixel alerts: pixel.rejections_rising and pixel.silent, evaluated by the triggers
// (every Config.ScanInterval) from what the consumers stored, never on the edge's path.
// Each alert is an episode: it fires once when its condition starts and is announced
// once more, with state "cleared", when the condition ends. The open episode is kept in
// Redis (alert:<kind>:<pixel>, its start), so a tick that finds the condition still true
// sends nothing, and any number of processes agree on one start (SET NX) and therefore
// on one event id.

// Episode states in an alert's data.
const (
	AlertFiring  = "firing"
	AlertCleared = "cleared"
)

// silentLookback is how far before the silence period the last accepted event is
// looked for: a pixel with no accepted event in SilentAfter + silentLookback is not
// announced (never used, or silent since long before the alert was set).
const silentLookback = 24 * time.Hour

// RejectionsRising is the data of pixel.rejections_rising.
type RejectionsRising struct {
	PixelID     string `json:"pixel_id"`
	PixelIDUUID string `json:"pixel_id_uuid"`
	Sandbox     bool   `json:"sandbox"`
	State       string `json:"state"` // firing | cleared
	// Since is the end of the first window whose share reached the threshold.
	Since     time.Time  `json:"since"`
	ClearedAt *time.Time `json:"cleared_at"` // cleared: the scan that found the share below it
	// The window these figures are of: whole minutes of reception, [start, end).
	WindowSeconds  int64             `json:"window_seconds"`
	WindowStart    time.Time         `json:"window_start"`
	WindowEnd      time.Time         `json:"window_end"`
	Received       uint64            `json:"received"` // accepted + rejected
	Accepted       uint64            `json:"accepted"`
	Rejected       uint64            `json:"rejected"`
	RejectedByRule map[string]uint64 `json:"rejected_by_rule"`
	Share          float64           `json:"share"`     // rejected / received, 4 decimals
	Threshold      float64           `json:"threshold"` // the workspace's setting
	MinEvents      int               `json:"min_events"`
}

// PixelSilent is the data of pixel.silent.
type PixelSilent struct {
	PixelID     string `json:"pixel_id"`
	PixelIDUUID string `json:"pixel_id_uuid"`
	Sandbox     bool   `json:"sandbox"`
	State       string `json:"state"` // firing | cleared
	// Since is the received_at of the last accepted event before the silence.
	Since              time.Time  `json:"since"`
	SilentAfterSeconds int64      `json:"silent_after_seconds"`
	CheckedThrough     time.Time  `json:"checked_through"`  // the instant the silence was measured at
	ClearedAt          *time.Time `json:"cleared_at"`       // cleared: when the triggers saw events again
	LastAcceptedAt     *time.Time `json:"last_accepted_at"` // cleared: the latest accepted event then
}

// ScanAlerts evaluates the alerts of every workspace with endpoints and alerts set.
func (tr *Triggers) ScanAlerts(ctx context.Context) error {
	if tr.Conn == nil {
		return nil
	}
	wss, err := tr.Emitter.Store.Workspaces(ctx)
	if err != nil {
		return err
	}
	settings := workspace.NewAlertSettings(tr.Keys.Redis())
	var errs []error
	for _, ws := range wss {
		a, err := settings.Get(ctx, ws)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if err := tr.alertWorkspace(ctx, ws, a); err != nil {
			errs = append(errs, fmt.Errorf("alerts of %s: %w", ids.Format(ids.Org, ws), err))
		}
	}
	return errors.Join(errs...)
}

// alertWorkspace evaluates a's alerts for every pixel of ws, per environment.
func (tr *Triggers) alertWorkspace(ctx context.Context, ws uuid.UUID, a workspace.Alerts) error {
	pixels, err := tr.Keys.Pixels(ctx, ws)
	if err != nil || len(pixels) == 0 {
		return err
	}
	byEnv := map[bool][]uuid.UUID{}
	all := make([]uuid.UUID, len(pixels))
	for i, p := range pixels {
		byEnv[p.Showroom] = append(byEnv[p.Showroom], p.ID)
		all[i] = p.ID
	}
	now := tr.Now().UTC()
	// The pixels' completeness watermarks, read once for both alerts (their windows and
	// silences end no later than them); not read when both are off.
	var lags map[uuid.UUID]trace.Lag
	if !a.Off() {
		if lags, err = trace.Lags(ctx, tr.Keys.Redis(), tr.Config.ClickHouse.Database, all, now); err != nil {
			return err
		}
	}
	var errs []error
	for sandbox, ps := range byEnv {
		errs = append(errs, tr.rejectionsRising(ctx, ws, sandbox, ps, lags, a, now), tr.silent(ctx, ws, sandbox, ps, lags, a, now))
	}
	return errors.Join(errs...)
}

// shareReached says whether rejected of received (> 0) is at or above threshold, a share
// written in decimal: the quotient, correctly rounded, is the double nearest the exact
// share, as the threshold is the double nearest its decimal, so a share equal to the
// threshold compares equal (7 of 100 reaches 0.07; rejected ≥ threshold × received did
// not, 0.07 × 100 being 7.000000000000001 in doubles).
func shareReached(rejected, received uint64, threshold float64) bool {
	return float64(rejected)/float64(received) >= threshold
}

// rejectionsRising fires for each pixel whose window ending at the start of now's
// minute holds at least MinEvents events and a share of rejections at or above the
// threshold, and clears an open episode when its pixel's share is below it (or its
// window holds fewer events). The window ends no later than the pixels' completeness
// watermark (trace.Lags): the accepted events of minutes past it may not be stored yet
// while their rejections (another consumer's) are, and a share read there would be too
// high.
func (tr *Triggers) rejectionsRising(ctx context.Context, ws uuid.UUID, sandbox bool, pixels []uuid.UUID, lags map[uuid.UUID]trace.Lag,
	a workspace.Alerts, now time.Time) error {
	if a.RejectionsThreshold == 0 {
		return tr.Emitter.Store.dropEpisodes(ctx, KindRejectionsRising, pixels)
	}
	end := now
	for _, p := range pixels {
		if l := lags[p].Through; !l.IsZero() && l.Before(end) {
			end = l
		}
	}
	end = end.UTC().Truncate(time.Minute)
	start := end.Add(-a.Window())
	wins, err := readWindows(ctx, tr.Conn, ws, sandbox, pixels, start, end)
	if err != nil {
		return err
	}
	for _, p := range pixels {
		w := wins[p]
		d := RejectionsRising{PixelID: ids.Format(ids.Pixel, p), PixelIDUUID: p.String(), Sandbox: sandbox,
			WindowSeconds: int64(a.Window() / time.Second), WindowStart: start, WindowEnd: end,
			Accepted: w.Accepted, Rejected: w.rejected(), RejectedByRule: w.Rejected,
			Threshold: a.RejectionsThreshold, MinEvents: a.MinEvents()}
		d.Received = d.Accepted + d.Rejected
		if d.Received > 0 {
			d.Share = math.Round(float64(d.Rejected)/float64(d.Received)*10000) / 10000
		}
		firing := d.Received >= uint64(a.MinEvents()) && shareReached(d.Rejected, d.Received, a.RejectionsThreshold)
		if err := tr.episode(ctx, ws, p, KindRejectionsRising, firing, end, func(since time.Time, cleared *time.Time) any {
			d.Since, d.ClearedAt, d.State = since, cleared, stateOf(cleared)
			return d
		}); err != nil {
			return err
		}
	}
	return nil
}

// silent fires for each pixel whose last accepted event (within SilentAfter +
// silentLookback) was received SilentAfter or more before the instant checked: now, or
// the pixel's partition's completeness watermark when it is earlier (a stalled consumer
// does not make every pixel silent). An open episode clears once an event received
// after its start is stored.
func (tr *Triggers) silent(ctx context.Context, ws uuid.UUID, sandbox bool, pixels []uuid.UUID, lags map[uuid.UUID]trace.Lag,
	a workspace.Alerts, now time.Time) error {
	st := tr.Emitter.Store
	if a.SilentAfter == 0 {
		return st.dropEpisodes(ctx, KindPixelSilent, pixels)
	}
	last, err := readLastAccepted(ctx, tr.Conn, ws, sandbox, pixels, now.Add(-a.SilentAfter-silentLookback))
	if err != nil {
		return err
	}
	for _, p := range pixels {
		at := now
		if w := lags[p].Through; !w.IsZero() && w.Before(at) {
			at = w.UTC()
		}
		l, seen := last[p]
		ep, open, err := st.episodeOf(ctx, KindPixelSilent, p)
		if err != nil {
			return err
		}
		var firing bool
		switch {
		case open:
			firing = !seen || !l.After(ep.Since) // cleared by an event received after the silence began
		default:
			firing = seen && at.Sub(l) >= a.SilentAfter
		}
		d := PixelSilent{PixelID: ids.Format(ids.Pixel, p), PixelIDUUID: p.String(), Sandbox: sandbox,
			SilentAfterSeconds: int64(a.SilentAfter / time.Second), CheckedThrough: at.Truncate(time.Second)}
		if err := tr.episode(ctx, ws, p, KindPixelSilent, firing, l, func(since time.Time, cleared *time.Time) any {
			d.Since, d.ClearedAt, d.State = since, cleared, stateOf(cleared)
			if cleared != nil {
				d.LastAcceptedAt = &l
			}
			return d
		}); err != nil {
			return err
		}
	}
	return nil
}

func stateOf(cleared *time.Time) string {
	if cleared != nil {
		return AlertCleared
	}
	return AlertFiring
}

// episode moves pixel's episode of kind: firing with none open opens one starting at
// start (or joins the one another process opened) and emits its firing event; not
// firing with one open emits its cleared event and closes it. data builds the event's
// data from the episode's start and, when it cleared, the instant (the scan's). An
// episode opened whose firing event was not emitted (the emission failed, or the
// process stopped between the two) emits it at the next scan, before a cleared one:
// receivers never see an episode clear that they did not see fire.
func (tr *Triggers) episode(ctx context.Context, ws, pixel uuid.UUID, kind string, firing bool, start time.Time,
	data func(since time.Time, cleared *time.Time) any) error {
	st := tr.Emitter.Store
	ep, open, err := st.episodeOf(ctx, kind, pixel)
	if err != nil {
		return err
	}
	now := tr.Now().UTC().Truncate(time.Second)
	if firing && !open {
		since := start.UTC().Truncate(time.Second)
		body, err := json.Marshal(data(since, nil)) // the firing event's data, kept until it is sent
		if err != nil {
			return err
		}
		if ep, err = st.openEpisode(ctx, kind, pixel, since, body); err != nil {
			return err
		}
		open = true
	}
	if !open {
		return nil
	}
	if ep.Pending {
		// The window that fired, not this scan's: a pending episode always holds its data.
		if _, err = tr.Emitter.Emit(ctx, Event{ID: alertID(kind, pixel, ep.Since, AlertFiring), Kind: kind, WorkspaceID: ws,
			CreatedAt: now, Data: ep.Firing}); err != nil {
			return err
		}
		if err := st.firingEmitted(ctx, kind, pixel, ep); err != nil {
			return err
		}
	}
	if firing {
		return nil
	}
	if _, err := tr.Emitter.Emit(ctx, Event{ID: alertID(kind, pixel, ep.Since, AlertCleared), Kind: kind, WorkspaceID: ws,
		CreatedAt: now, Data: data(ep.Since, &now)}); err != nil {
		return err
	}
	return st.closeEpisode(ctx, kind, pixel)
}

// alertID is the stable id of an episode's firing or cleared event.
func alertID(kind string, pixel uuid.UUID, since time.Time, state string) uuid.UUID {
	return EventID(kind, pixel.String(), since.UTC().Format(time.RFC3339), state)
}

// ---- episode state (Store) ----

func (s *Store) episodeKey(kind string, pixel uuid.UUID) string {
	return s.p + "alert:" + kind + ":" + pixel.String()
}

type episodeState struct {
	Since time.Time `json:"since"`
	// Pending: the firing event is not emitted yet (a state without it was emitted);
	// Firing is its data, as built when the episode was opened, so that a late emission
	// tells of the window that fired.
	Pending bool            `json:"pending,omitempty"`
	Firing  json.RawMessage `json:"firing,omitempty"`
}

// episodeOf returns pixel's open episode of kind (open false: none).
func (s *Store) episodeOf(ctx context.Context, kind string, pixel uuid.UUID) (episodeState, bool, error) {
	var e episodeState
	v, err := s.rdb.Get(ctx, s.episodeKey(kind, pixel)).Bytes()
	if errors.Is(err, redis.Nil) {
		return e, false, nil
	}
	if err != nil {
		return e, false, err
	}
	if err := json.Unmarshal(v, &e); err != nil {
		return e, false, fmt.Errorf("episode %s of %s: %w", kind, ids.Format(ids.Pixel, pixel), err)
	}
	return e, true, nil
}

// openEpisode opens pixel's episode of kind at since, its firing event (data firing)
// pending, unless one is open, and returns the open one.
func (s *Store) openEpisode(ctx context.Context, kind string, pixel uuid.UUID, since time.Time, firing []byte) (episodeState, error) {
	e := episodeState{Since: since, Pending: true, Firing: firing}
	b, _ := json.Marshal(e)
	ok, err := s.rdb.SetNX(ctx, s.episodeKey(kind, pixel), b, 0).Result()
	if err != nil || ok {
		return e, err
	}
	got, open, err := s.episodeOf(ctx, kind, pixel)
	if err == nil && !open {
		return e, errors.New("episode closed while being opened; the next scan retries")
	}
	return got, err
}

// firingEmitted records that the firing event of pixel's pending episode ep of kind was
// emitted: only while ep is the one stored (compared as stored), so that a slow emitter
// cannot overwrite an episode another process closed and opened anew meanwhile.
func (s *Store) firingEmitted(ctx context.Context, kind string, pixel uuid.UUID, ep episodeState) error {
	pending, _ := json.Marshal(ep)
	done, _ := json.Marshal(episodeState{Since: ep.Since})
	return markEmitted.Run(ctx, s.rdb, []string{s.episodeKey(kind, pixel)}, pending, done).Err()
}

// markEmitted sets KEYS[1] to ARGV[2] if it holds ARGV[1].
var markEmitted = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('SET', KEYS[1], ARGV[2], 'KEEPTTL') end
return 1
`)

func (s *Store) closeEpisode(ctx context.Context, kind string, pixel uuid.UUID) error {
	return s.rdb.Del(ctx, s.episodeKey(kind, pixel)).Err()
}

// dropEpisodes forgets pixels' open episodes of kind without announcing them (the
// workspace turned the alert off).
func (s *Store) dropEpisodes(ctx context.Context, kind string, pixels []uuid.UUID) error {
	pipe := s.rdb.Pipeline()
	for _, p := range pixels {
		pipe.Del(ctx, s.episodeKey(kind, p))
	}
	_, err := pipe.Exec(ctx)
	return err
}
