package httpserver

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"svc/lib/idempotency"
	"svc/lib/limits"
)

// ParsePrefixForTest exposes parsePrefix to api_test.
var ParsePrefixForTest = parsePrefix

// LimitsWindowsForTest exposes limits.Windows to api_test.
func LimitsWindowsForTest(b, d int) (limits.Window, limits.Window) { return limits.Windows(b, d) }

// TwoCallGateForTest makes s's gate reserve and take in two calls, as on a cluster.
func TwoCallGateForTest(s *Server) { s.Deps.OneServer = false }

// GateCallsInFlightForTest bounds s's gate calls in flight to n (SVC_GATE_CALLS_IN_FLIGHT).
func GateCallsInFlightForTest(s *Server, n int) { s.Config.GateCallsInFlight, s.gates.inFlight = n, n }

// GateCallForTest is one request of ReserveGatesForTest: its API key and windows, and
// its reservation (idempotency.Store.PendingRecord; none without Idempotency-Key).
type GateCallForTest struct {
	Kid          string
	Burst, Daily limits.Window
	Rec          idempotency.PendingRecord
}

// ReserveGatesForTest runs calls through the gate's one-call function (reserve_gate) as
// one call, as a batch of the server's gate does, and returns each call's values; the
// reservations' tables have a default store's timing (idempotency.New).
func ReserveGatesForTest(ctx context.Context, rdb redis.Cmdable, calls []GateCallForTest, now time.Time) ([][]any, error) {
	cs := make([]*gateCall, len(calls))
	for i, c := range calls {
		cs[i] = &gateCall{kid: c.Kid, burst: c.Burst, daily: c.Daily, rec: c.Rec}
	}
	if err := runReserveGate(ctx, rdb, cs, now, idempotency.New(nil).Buckets().Args()); err != nil {
		return nil, err
	}
	out := make([][]any, len(cs))
	for i, c := range cs {
		out[i] = c.res
	}
	return out, nil
}
