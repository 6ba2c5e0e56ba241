package bench

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/valyala/fasthttp"
)

// Catching up. A run's CPU per event (Report.CPU) counts what the processes spent while
// the load ran. Past what the pipeline keeps up with, the rollup consumer falls behind
// and catches up after the load, and ClickHouse merges the parts it wrote after that
// again: that work belongs to the run's events too. With -catch-up the run waits, after
// the load, until the consumer has read everything (svc_rollup_partition_lag 0 on every
// partition) and ClickHouse runs no merge in the service's database, then reads the
// processes' CPU again: Report.CaughtUp holds the CPU per event from the load's start to
// that moment. It includes whatever else the processes did in that time (the poll
// interval's idle tail, the webhooks role's timers), so it is an upper bound where
// Report.CPU is a lower one.

// catchUp is what -catch-up waits for: a lag read from the target's metrics and the merges
// of database db on ClickHouse's HTTP interface ch (no merge check when either is empty).
type catchUp struct {
	limit   time.Duration
	metrics string
	ch, db  string
}

// CaughtUp is the CPU from the load's start until the pipeline caught up (-catch-up).
type CaughtUp struct {
	// After is the seconds from the load's end until the consumer had read every record
	// and ClickHouse ran no merge in the database.
	After float64 `json:"after_s"`
	// Complete is false when -catch-up's limit passed first (CPU is then up to the limit).
	Complete bool `json:"complete"`
	CPU      *CPU `json:"cpu"`
}

// wait polls every 250 ms until the pipeline has caught up or c.limit passed; it returns
// whether it did. Two polls in a row must agree (a merge can start right after a
// flush).
func (c catchUp) wait(ctx context.Context) bool {
	var ch *fasthttp.HostClient // nil: no merge check
	if c.ch != "" && c.db != "" {
		var err error
		if ch, err = hostClient(c.ch, 1, 5*time.Second); err != nil {
			return false
		}
	}
	deadline := time.Now().Add(c.limit)
	calm := 0
	for time.Now().Before(deadline) {
		if c.calm(ch) {
			if calm++; calm == 2 {
				return true
			}
		} else {
			calm = 0
		}
		if !sleepCtx(ctx, 250*time.Millisecond) {
			return false
		}
	}
	return false
}

// calm reports whether the consumer's lag is 0 and, with ch, no merge runs.
func (c catchUp) calm(ch *fasthttp.HostClient) bool {
	body, ok := metricsBody(c.metrics)
	if !ok {
		return false
	}
	lag, seen := PartitionLag(body)
	if !seen || lag > 0 {
		return false
	}
	if ch == nil {
		return true
	}
	out, err := chQuery(ch, c.ch, "SELECT count() FROM system.merges WHERE database = '"+
		strings.ReplaceAll(c.db, "'", "")+"'", 5*time.Second)
	return err == nil && strings.TrimSpace(out) == "0"
}

// PartitionLag sums svc_rollup_partition_lag over a Prometheus text exposition; seen is
// false when the target exports no such series (no rollup consumer in it).
func PartitionLag(body []byte) (lag float64, seen bool) {
	eachSample(body, func(name, _ string, v float64) {
		if name == "svc_rollup_partition_lag" {
			lag, seen = lag+v, true
		}
	})
	return lag, seen
}

// CaughtUpLine is the summary's line of a CaughtUp.
func (s *CaughtUp) CaughtUpLine() string {
	what := fmt.Sprintf("caught up %.0f s after the load", s.After)
	if !s.Complete {
		what = fmt.Sprintf("not caught up %.0f s after the load (-catch-up's limit)", s.After)
	}
	return s.CPU.PerEventLine() + " (" + what + ")"
}
