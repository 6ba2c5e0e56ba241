package httpserver_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"svc/lib/httpserver"
	"svc/lib/logs"
	"svc/lib/process"
	"svc/lib/settings"
	"svc/lib/svctest"
)

// TestReadyzNamesChecksOnly: /readyz has no key, so it answers each check's name and
// "ok" or "failing", never the dependency's error (an address, a credential in a URL, a
// server's words); the error is logged server-side, credentials redacted, once when the
// check starts failing (not on every probe), and its recovery once.
func TestReadyzNamesChecksOnly(t *testing.T) {
	var failing atomic.Bool
	failing.Store(true)
	secretErr := errors.New("dial redis://default:s3cr3t-pa55@10.1.2.3:6379: connect: connection refused (WRONGPASS)")
	checks := []process.Check{
		{Name: "redis", Fn: func(context.Context) error {
			if failing.Load() {
				return secretErr
			}
			return nil
		}},
		{Name: "clickhouse", Fn: func(context.Context) error { return nil }},
	}
	var logged svctest.SyncBuffer
	url := serveFront(t, logs.NewTo(&logged, slog.LevelInfo), checks)

	for range 3 {
		status, body := getReadyz(t, url)
		if status != 503 {
			t.Fatalf("/readyz with a failing check: %d %s", status, body)
		}
		for _, leak := range []string{"10.1.2.3", "s3cr3t", "WRONGPASS", "dial", "refused", "6379"} {
			if strings.Contains(body, leak) {
				t.Fatalf("/readyz answers the dependency's error (%q): %s", leak, body)
			}
		}
		var m struct {
			Status string            `json:"status"`
			Checks map[string]string `json:"checks"`
			Failed map[string]string `json:"failed"`
		}
		if err := json.Unmarshal([]byte(body), &m); err != nil {
			t.Fatal(err)
		}
		if m.Status != "unavailable" || len(m.Checks) != 2 || m.Checks["redis"] != "failing" || m.Checks["clickhouse"] != "ok" ||
			len(m.Failed) != 1 || m.Failed["redis"] != "failing" {
			t.Fatalf("/readyz body %s", body)
		}
	}
	log := logged.String()
	if n := strings.Count(log, `"check":"redis"`); n != 1 || !strings.Contains(log, "10.1.2.3:6379: connect: connection refused") {
		t.Fatalf("the failure is logged %d times (want once, with the error): %s", n, log)
	}
	if strings.Contains(log, "s3cr3t") {
		t.Fatalf("the log carries the URL's password: %s", log)
	}

	failing.Store(false)
	if status, body := getReadyz(t, url); status != 200 || body != `{"checks":{"clickhouse":"ok","redis":"ok"},"status":"ready"}` {
		t.Fatalf("/readyz when ready: %d %s", status, body)
	}
	if n := strings.Count(logged.String(), `"check":"redis"`); n != 2 {
		t.Fatalf("the recovery is not logged once: %s", logged.String())
	}
}

// serveFront runs an httpserver.Front without keys over checks, logging to log, and returns
// its base URL once it answers.
func serveFront(t *testing.T, log *slog.Logger, checks []process.Check) string {
	t.Helper()
	c := httpserver.ConfigFromEnv(settings.Defaults())
	c.HTTPAddr = svctest.FreeAddr(t)
	c.PublicURL = "http://" + c.HTTPAddr
	f := httpserver.NewFront(c, httpserver.BareDeps(prometheus.NewRegistry(), log))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = f.Serve(ctx, checks...); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	for i := 0; ; i++ {
		if r, err := http.Get(c.PublicURL + "/healthz"); err == nil {
			r.Body.Close()
			return c.PublicURL
		} else if i == 100 {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func getReadyz(t *testing.T, url string) (int, string) {
	t.Helper()
	r, err := http.Get(url + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	b, err := io.ReadAll(r.Body)
	if err != nil {
		t.Fatal(err)
	}
	return r.StatusCode, string(b)
}
