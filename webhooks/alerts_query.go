package webhooks

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/google/uuid"

	"svc/lib/chpool"
	"svc/schema"
	"svc/schema/rejection"
)

// The alerts' reads. Each is one query for every pixel of one workspace and
// environment, bounded by the sort key's prefix (workspace, environment, pixels) and by
// a range of minutes: pixel_accepted_minutes holds one row per pixel, minute of
// reception and event day; rejections holds up to the samples' cap plus one count per
// pixel, minute and rule. Neither is the raw events table.

// pixelWindow is what one pixel received in a window of whole minutes.
type pixelWindow struct {
	Accepted uint64
	Rejected map[string]uint64 // by rule, duplicates (duplicate_event_id) excluded
}

func (w pixelWindow) rejected() uint64 {
	var n uint64
	for _, c := range w.Rejected {
		n += c
	}
	return n
}

// pixelsIn is the condition naming ws's pixels of one environment (our own UUIDs' text:
// no quoting issue).
func pixelsIn(ws uuid.UUID, sandbox bool, pixels []uuid.UUID) (string, []any) {
	tuples := make([]string, len(pixels))
	for i, p := range pixels {
		tuples[i] = "toUUID('" + p.String() + "')"
	}
	return "workspace_id = toUUID(?) AND sandbox = ? AND pixel_id IN (" + strings.Join(tuples, ", ") + ")",
		[]any{ws.String(), chpool.UInt8(sandbox)}
}

// readWindows reads, per pixel, the events accepted and rejected with received_at in
// [from, to) (whole minutes). Accepted: pixel_accepted_minutes; rejected: the
// rejections table's exact counts (stored samples and the counts past the cap), one per
// rejection as GET /pixels counts them (each rejected event, also in a 422 of none
// acceptable; a 429 or 409 refused before its events were read, one).
func readWindows(ctx context.Context, conn driver.Conn, ws uuid.UUID, sandbox bool, pixels []uuid.UUID, from, to time.Time) (map[uuid.UUID]*pixelWindow, error) {
	out := map[uuid.UUID]*pixelWindow{}
	for _, p := range pixels {
		out[p] = &pixelWindow{Rejected: map[string]uint64{}}
	}
	in, args := pixelsIn(ws, sandbox, pixels)
	args = append(args, from.Unix(), to.Unix())
	err := chpool.EachRow(ctx, conn, "SELECT pixel_id, countMerge(events_state) FROM pixel_accepted_minutes WHERE "+in+
		" AND minute >= toDateTime(?) AND minute < toDateTime(?) GROUP BY pixel_id", args, func(s chpool.Row) error {
		var px uuid.UUID
		var n uint64
		if err := s.Scan(&px, &n); err != nil {
			return err
		}
		if w := out[px]; w != nil {
			w.Accepted = n
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("alerts: accepted: %w", err)
	}
	err = chpool.EachRow(ctx, conn, "SELECT pixel_id, rule, sum(toUInt64(rejections)) FROM "+rejection.Table+" WHERE "+in+
		" AND minute >= toDateTime(?) AND minute < toDateTime(?) AND rule NOT IN ('"+schema.RuleDuplicateEventID+"', '"+schema.RuleDuplicateBatch+"') GROUP BY pixel_id, rule",
		args, func(s chpool.Row) error {
			var px uuid.UUID
			var rule string
			var n uint64
			if err := s.Scan(&px, &rule, &n); err != nil {
				return err
			}
			if w := out[px]; w != nil {
				w.Rejected[rule] = n
			}
			return nil
		})
	if err != nil {
		return nil, fmt.Errorf("alerts: rejected: %w", err)
	}
	return out, nil
}

// readLastAccepted returns, per pixel, the latest received_at of an accepted event
// received at or after from (absent: none).
func readLastAccepted(ctx context.Context, conn driver.Conn, ws uuid.UUID, sandbox bool, pixels []uuid.UUID, from time.Time) (map[uuid.UUID]time.Time, error) {
	in, args := pixelsIn(ws, sandbox, pixels)
	out := map[uuid.UUID]time.Time{}
	err := chpool.EachRow(ctx, conn, "SELECT pixel_id, maxMerge(last_state) FROM pixel_accepted_minutes WHERE "+in+
		" AND minute >= toDateTime(?) GROUP BY pixel_id", append(args, from.Truncate(time.Minute).Unix()), func(s chpool.Row) error {
		var px uuid.UUID
		var t time.Time
		if err := s.Scan(&px, &t); err != nil {
			return err
		}
		out[px] = t.UTC()
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("alerts: last accepted: %w", err)
	}
	return out, nil
}
