package app

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"svc/lib/redisfn"
)

// Throttle counts sign-in attempts per subject (a client address, an email) in fixed
// windows: one Redis counter per subject, its TTL the window from the first attempt
// counted. An attempt is counted before its password is checked (Take), so that no
// number of concurrent attempts gets more checks than the bound; a failure keeps it
// counted, a success gives it back (Give), so people who sign in right never wait.
type Throttle struct {
	rdb    redis.UniversalClient
	Window time.Duration
}

func throttleKey(kind, subject string) string {
	return "svc:app:throttle:" + kind + ":" + digestOf(subject)
}

// throttleLib: take counts one attempt unless the count is at ARGV[1] (then 0, nothing
// counted), ARGV[2] the window in ms from the first; give takes one back from a counter
// that still exists (an expired one is not made again, without a TTL).
var throttleLib = redisfn.New("throttle", `
local function take(KEYS, ARGV)
  local n = redis.call('INCR', KEYS[1])
  if n == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
  if n > tonumber(ARGV[1]) then
    redis.call('DECR', KEYS[1])
    return 0
  end
  return 1
end
local function give(KEYS, ARGV)
  if tonumber(redis.call('GET', KEYS[1]) or '0') > 0 then redis.call('DECR', KEYS[1]) end
  return 1
end
`, "take", "give")

// Take counts an attempt of subject (kind "addr" or "email") unless it reached limit
// in its current window; false (nothing counted) when it did.
func (t *Throttle) Take(ctx context.Context, kind, subject string, limit int) (bool, error) {
	n, err := throttleLib.Call(ctx, t.rdb, "take", []string{throttleKey(kind, subject)}, limit, t.Window.Milliseconds()).Int()
	return n == 1, err
}

// Left is how long subject's counter of kind has to run (at least a second; the whole
// window when it is gone): what a 429 asks the client to wait.
func (t *Throttle) Left(ctx context.Context, kind, subject string) time.Duration {
	d, err := t.rdb.PTTL(ctx, throttleKey(kind, subject)).Result()
	if err != nil || d <= 0 {
		return t.Window
	}
	return max(d, time.Second)
}

// Give takes back an attempt Take counted: it succeeded.
func (t *Throttle) Give(ctx context.Context, kind, subject string) error {
	return throttleLib.Call(ctx, t.rdb, "give", []string{throttleKey(kind, subject)}).Err()
}
