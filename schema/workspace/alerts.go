package workspace

import (
	"context"
	"errors"
	"fmt"
	"time"

	json "github.com/goccy/go-json"
	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
)

// Alerts are a workspace's thresholds for the pixel alerts the webhooks role sends
// (pixel.rejections_rising, pixel.silent). The zero value is off: no alert is sent.
type Alerts struct {
	// RejectionsThreshold turns pixel.rejections_rising on: a pixel whose share of
	// rejected events over RejectionsWindow reaches it (0 < t ≤ 1; 0: off).
	RejectionsThreshold float64 `json:"rejections_threshold,omitempty"`
	// RejectionsWindow is the window the share is taken over, whole minutes ending at
	// the start of the current minute (DefaultRejectionsWindow when 0).
	RejectionsWindow time.Duration `json:"rejections_window,omitempty"`
	// RejectionsMinEvents is how many events (accepted + rejected) the window must hold
	// before its share counts (DefaultRejectionsMinEvents when 0): one bad event of two
	// is no trend.
	RejectionsMinEvents int `json:"rejections_min_events,omitempty"`
	// SilentAfter turns pixel.silent on: a pixel that had accepted events and has had
	// none for this long (0: off).
	SilentAfter time.Duration `json:"silent_after,omitempty"`
}

// Bounds and defaults of Alerts.
const (
	DefaultRejectionsWindow    = 15 * time.Minute
	MinRejectionsWindow        = time.Minute
	MaxRejectionsWindow        = 24 * time.Hour
	DefaultRejectionsMinEvents = 100
	MinSilentAfter             = time.Minute
	MaxSilentAfter             = 7 * 24 * time.Hour
)

// Window is the rejections window in force (the default when unset).
func (a Alerts) Window() time.Duration {
	if a.RejectionsWindow == 0 {
		return DefaultRejectionsWindow
	}
	return a.RejectionsWindow
}

// MinEvents is the minimum of events in force (the default when unset).
func (a Alerts) MinEvents() int {
	if a.RejectionsMinEvents == 0 {
		return DefaultRejectionsMinEvents
	}
	return a.RejectionsMinEvents
}

// Off reports that no alert is on.
func (a Alerts) Off() bool { return a.RejectionsThreshold == 0 && a.SilentAfter == 0 }

// Validate reports every value out of its bounds.
func (a Alerts) Validate() error {
	var errs []error
	if a.RejectionsThreshold < 0 || a.RejectionsThreshold > 1 {
		errs = append(errs, fmt.Errorf("rejections threshold %v: want a share in (0, 1], or 0 for off", a.RejectionsThreshold))
	}
	if w := a.RejectionsWindow; w != 0 && (w < MinRejectionsWindow || w > MaxRejectionsWindow || w%time.Minute != 0) {
		errs = append(errs, fmt.Errorf("rejections window %s: want whole minutes, %s..%s", w, MinRejectionsWindow, MaxRejectionsWindow))
	}
	if a.RejectionsMinEvents < 0 || a.RejectionsMinEvents > 1_000_000_000 {
		errs = append(errs, fmt.Errorf("rejections minimum %d: want 1..1000000000, or 0 for the default %d", a.RejectionsMinEvents, DefaultRejectionsMinEvents))
	}
	if s := a.SilentAfter; s != 0 && (s < MinSilentAfter || s > MaxSilentAfter || s%time.Minute != 0) {
		errs = append(errs, fmt.Errorf("silent after %s: want whole minutes, %s..%s, or 0 for off", s, MinSilentAfter, MaxSilentAfter))
	}
	return errors.Join(errs...)
}

// alertsKey holds each workspace's alerts (a workspace setting, global like the
// workspace record): HASH workspace uuid → JSON Alerts. Absent: off.
const alertsKey = "svc:alerts"

// AlertSettings is the per-workspace alerts setting.
type AlertSettings struct{ rdb redis.UniversalClient }

// NewAlertSettings returns the setting's store over rdb.
func NewAlertSettings(rdb redis.UniversalClient) AlertSettings { return AlertSettings{rdb: rdb} }

// Set sets ws's alerts; a (validated) zero value removes them (off).
func (s AlertSettings) Set(ctx context.Context, ws uuid.UUID, a Alerts) error {
	if err := a.Validate(); err != nil {
		return err
	}
	if a.Off() {
		return s.rdb.HDel(ctx, alertsKey, ws.String()).Err()
	}
	b, err := json.Marshal(a)
	if err != nil {
		return err
	}
	return s.rdb.HSet(ctx, alertsKey, ws.String(), b).Err()
}

// Get returns ws's alerts (the zero value: off).
func (s AlertSettings) Get(ctx context.Context, ws uuid.UUID) (Alerts, error) {
	v, err := s.rdb.HGet(ctx, alertsKey, ws.String()).Bytes()
	if errors.Is(err, redis.Nil) {
		return Alerts{}, nil
	}
	if err != nil {
		return Alerts{}, err
	}
	var a Alerts
	if err := json.Unmarshal(v, &a); err != nil {
		return Alerts{}, fmt.Errorf("alerts of workspace %s: %w", ws, err)
	}
	return a, nil
}
