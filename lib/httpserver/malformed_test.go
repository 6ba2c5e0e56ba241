package httpserver

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
)

// TestConnLoggerDropsTheRequestBytes: fasthttp logs a reading error with the raw request
// it read; the logger keeps fasthttp's format and the part, never the bytes.
func TestConnLoggerDropsTheRequestBytes(t *testing.T) {
	var buf bytes.Buffer
	l := connLogger{slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	err := errors.New(`error when reading request headers: malformed mime header: missing colon: "Bad Header": buffer size=90, ` +
		`contents: "POST / HTTP/1.1\r\nContent-Length: 3\r\nAuthorization: Bearer svc_live_secret\r\nBad Header\r\n\r\n"`)
	l.Printf("error when serving connection %q<->%q: %v", "127.0.0.1:1", "127.0.0.1:2", err)
	out := buf.String()
	if strings.Contains(out, "svc_live_secret") || !strings.Contains(out, `"part":"headers"`) {
		t.Fatalf("logged %s", out)
	}
}
