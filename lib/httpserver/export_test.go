package httpserver

import "svc/lib/limits"

// ParsePrefixForTest exposes parsePrefix to api_test.
var ParsePrefixForTest = parsePrefix

// LimitsWindowsForTest exposes limits.Windows to api_test.
func LimitsWindowsForTest(b, d int) (limits.Window, limits.Window) { return limits.Windows(b, d) }

// TwoCallGateForTest makes s's gate reserve and take in two calls, as on a cluster.
func TwoCallGateForTest(s *Server) { s.Deps.OneServer = false }
