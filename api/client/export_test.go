package client

import (
	"context"
	"time"
)

// WireEvent is wireEvent, for the tests of package client_test.
type WireEvent = wireEvent

// SetSleep makes c call sleep for every wait (retries and pacing) instead of sleeping,
// so a test sees how long the client would wait without waiting.
func SetSleep(c *Client, sleep func(ctx context.Context, d time.Duration) error) { c.sleep = sleep }

// RetryAfter is retryAfter, for the tests of package client_test.
var RetryAfter = retryAfter

// RefillInterval is refillInterval, for the tests of package client_test.
var RefillInterval = refillInterval
