package httpserver

import (
	"context"

	"github.com/redis/go-redis/v9"

	"svc/lib/limits"
)

// ParsePrefixForTest exposes parsePrefix to api_test.
var ParsePrefixForTest = parsePrefix

// LimitsWindowsForTest exposes limits.Windows to api_test.
func LimitsWindowsForTest(b, d int) (limits.Window, limits.Window) { return limits.Windows(b, d) }

// TwoCallGateForTest makes s's gate reserve and take in two calls, as on a cluster.
func TwoCallGateForTest(s *Server) { s.Deps.OneServer = false }

// ReserveGateForTest calls the gate's one-call function (reserve_gate) as reserveGate does.
func ReserveGateForTest(ctx context.Context, rdb redis.Cmdable, keys []string, args ...any) *redis.Cmd {
	return reserveGateLibrary.Call(ctx, rdb, "reserve_gate", keys, args...)
}
