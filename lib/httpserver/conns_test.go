package httpserver_test

import (
	"net"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"svc/schema/apitest"
)

// svc_http_open_connections follows the client connections: up as they open, down as
// they close.
func TestOpenConnectionsGauge(t *testing.T) {
	srv := apitest.Start(t, nil, nil)
	open := func() float64 {
		var m dto.Metric
		if err := srv.Deps.Metrics.Conns.Write(&m); err != nil {
			t.Fatal(err)
		}
		return m.GetGauge().GetValue()
	}
	addr := strings.TrimPrefix(srv.URL, "http://")
	var conns []net.Conn
	for i := 0; i < 3; i++ {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	waitFor(t, func() bool { return open() == 3 }, "3 open connections")
	for _, c := range conns {
		c.Close()
	}
	waitFor(t, func() bool { return open() == 0 }, "0 open connections")
}

func waitFor(t *testing.T, ok func() bool, what string) {
	t.Helper()
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if ok() {
			return
		}
	}
	t.Fatalf("never saw %s", what)
}
