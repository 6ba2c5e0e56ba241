package privacy_test

import (
	"bytes"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"svc/lib/logs"
)

// lockedBuffer is a bytes.Buffer safe for the loggers of several goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestDebugLogsCarryNoIdentity: with every logger at debug (SVC_LOG_LEVEL=debug: the
// process's default logger, which clickhouse-go's lines go through, and the worker's),
// an erasure runs end to end and no log line carries the address or its digest, in any
// form the SQL or the stores use (hex, \x escapes), although the driver logged the
// statements it ran.
func TestDebugLogsCarryNoIdentity(t *testing.T) {
	var out lockedBuffer
	log := logs.NewTo(&out, slog.LevelDebug)
	prev := slog.Default()
	slog.SetDefault(log) // schema.Open hands slog.Default to clickhouse-go
	t.Cleanup(func() { slog.SetDefault(prev) })
	w := newWorldLogging(t, log)
	ws, px := uuid.New(), uuid.New()
	day := time.Now().UTC().Truncate(24*time.Hour).AddDate(0, 0, -1)
	const who = "ada.lovelace@example.com"
	w.store(ev{ws: ws, pixel: px, day: day, name: "purchase", value: 1, consent: true, email: who, received: time.Now().Add(-time.Minute)},
		ev{ws: ws, pixel: px, day: day, name: "purchase", value: 1, consent: true, email: "bob@example.com", received: time.Now().Add(-time.Minute)})
	e := w.request(ws, false, who, true, time.Now())
	w.runOnce()
	if v := w.get(e).View(); v.Status != "completed" {
		t.Fatalf("erasure not completed: %+v", v)
	}
	if n := w.withHash(ws, who); n != 0 {
		t.Fatalf("%d events still carry the hash", n)
	}

	got := out.String()
	if !strings.Contains(got, `"lib":"clickhouse-go"`) || !strings.Contains(got, "ALTER TABLE") {
		t.Fatalf("the driver logged no statement at debug; the test proves nothing:\n%.2000s", got)
	}
	d := email(who)
	var esc strings.Builder
	for _, c := range d {
		fmt.Fprintf(&esc, `\\x%02x`, c) // \x escapes, as JSON writes their backslashes
	}
	for what, s := range map[string]string{"the address": who, "the digest in hex": hexOf(d),
		"the digest as \\x escapes": esc.String(), "the address's domain": "@example.com"} {
		if strings.Contains(strings.ToLower(got), s) {
			t.Errorf("a debug line carries %s: %s", what, lineWith(got, s))
		}
	}
	for _, re := range []*regexp.Regexp{regexp.MustCompile(`[0-9a-fA-F]{64}`), regexp.MustCompile(`(\\\\x[0-9a-fA-F]{2}){32}`)} {
		if m := re.FindString(got); m != "" {
			t.Errorf("a debug line carries a 32-byte value (%s): %s", re, lineWith(got, m))
		}
	}
}

// lineWith returns the first line of out containing s (case-insensitively), shortened.
func lineWith(out, s string) string {
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(strings.ToLower(l), strings.ToLower(s)) {
			if len(l) > 600 {
				l = l[:600] + "…"
			}
			return l
		}
	}
	return ""
}
