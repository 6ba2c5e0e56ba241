package webhooks

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
)

// TestDeliveryRefusesInternalAddresses: endpoints at 127.0.0.1 and at localhost (a name
// that resolves to loopback), registered while the setting allowed loopback, get
// nothing from a worker whose setting does not: each attempt is logged with the reason
// and retried like any failed attempt. A worker allowing 127.0.0.0/8 delivers them.
func TestDeliveryRefusesInternalAddresses(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	rcv := newReceiver(t, e.clock, func(w http.ResponseWriter, n int) { w.WriteHeader(204) })
	port := rcv.Listener.Addr().(*net.TCPAddr).Port
	st := e.store()
	ws := uuid.New()
	var eps []Endpoint
	for _, host := range []string{"127.0.0.1", "localhost"} {
		ep, err := st.CreateEndpoint(ctx, ws, fmt.Sprintf("http://%s:%d/", host, port), nil)
		if err != nil {
			t.Fatal(err)
		}
		eps = append(eps, ep)
	}
	if n, err := e.emitter().Emit(ctx, keyEvent(ws)); err != nil || n != 2 {
		t.Fatalf("Emit = %d, %v; want 2 deliveries", n, err)
	}

	strict := e.cfg
	strict.AllowNets = nil // the default: nothing internal is allowed
	w := NewWorker(strict, e.store(), e.logs, NewMetrics(nil), e.log)
	w.Now = e.clock.Now
	if n, err := w.RunOnce(ctx); err != nil || n != 2 {
		t.Fatalf("RunOnce = %d, %v", n, err)
	}
	if hits := rcv.Hits(); len(hits) != 0 {
		t.Fatalf("the listener received %d requests from a worker that allows no internal address", len(hits))
	}
	for _, ep := range eps {
		rows, err := e.logs.Deliveries(ctx, DeliveryFilter{Endpoint: ep.ID})
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) != 1 || rows[0].Outcome != Retry || rows[0].StatusCode != 0 || rows[0].NextAttemptAt == nil ||
			!strings.HasPrefix(rows[0].Error, "address_not_allowed: ") || !strings.HasSuffix(rows[0].Error, " is loopback") {
			t.Fatalf("%s: delivery log %+v, want one retry saying address_not_allowed: … is loopback", ep.URL, rows)
		}
	}
	if rows, _ := e.logs.Deliveries(ctx, DeliveryFilter{Endpoint: eps[0].ID}); rows[0].Error != "address_not_allowed: 127.0.0.1 is loopback" {
		t.Fatalf("error %q", rows[0].Error)
	}

	e.clock.Add(time.Minute) // past the second attempt's delay
	if n, err := e.worker("allowing").RunOnce(ctx); err != nil || n != 2 {
		t.Fatalf("RunOnce with 127.0.0.0/8 allowed = %d, %v", n, err)
	}
	hits := rcv.Hits()
	if len(hits) != 2 || hits[0].Attempt != "2" || hits[1].Attempt != "2" {
		t.Fatalf("with 127.0.0.0/8 allowed the listener got %d requests, want both second attempts", len(hits))
	}
}

// TestDeliveryIgnoresProxyEnv: with HTTP_PROXY and HTTPS_PROXY pointing at a listener,
// deliveries go to the endpoint itself and the listener receives nothing. The worker
// runs in a child process so that the variables are set before anything in the process
// reads them (net/http reads them once).
func TestDeliveryIgnoresProxyEnv(t *testing.T) {
	if os.Getenv("WEBHOOKS_TEST_PROXY_CHILD") != "" {
		deliverUnderProxyEnv(t)
		return
	}
	var proxied atomic.Int32
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		proxied.Add(1)
		w.WriteHeader(200)
	}))
	defer proxy.Close()
	cmd := exec.Command(os.Args[0], "-test.run=^TestDeliveryIgnoresProxyEnv$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), "WEBHOOKS_TEST_PROXY_CHILD=1", "HTTP_PROXY="+proxy.URL, "HTTPS_PROXY="+proxy.URL,
		"http_proxy="+proxy.URL, "https_proxy="+proxy.URL, "NO_PROXY=", "no_proxy=")
	out, err := cmd.CombinedOutput()
	if n := proxied.Load(); n != 0 {
		t.Fatalf("the proxy named in the environment received %d requests\n%s", n, out)
	}
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
}

// deliverUnderProxyEnv is the child's part: an endpoint whose name does not resolve
// (webhook.invalid: a proxy would have taken it) fails to resolve, and a loopback one
// (allowed) is delivered directly.
func deliverUnderProxyEnv(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	rcv := newReceiver(t, e.clock, func(w http.ResponseWriter, n int) { w.WriteHeader(204) })
	st := e.store()
	ws := uuid.New()
	far, err := st.CreateEndpoint(ctx, ws, "http://webhook.invalid/hook", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.CreateEndpoint(ctx, ws, rcv.URL+"/hook", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := e.emitter().Emit(ctx, keyEvent(ws)); err != nil {
		t.Fatal(err)
	}
	if n, err := e.worker("w").RunOnce(ctx); err != nil || n != 2 {
		t.Fatalf("RunOnce = %d, %v", n, err)
	}
	if len(rcv.Hits()) != 1 {
		t.Fatalf("the loopback endpoint got %d requests, want 1", len(rcv.Hits()))
	}
	rows, err := e.logs.Deliveries(ctx, DeliveryFilter{Endpoint: far.ID})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || rows[0].Outcome != Retry || rows[0].StatusCode != 0 {
		t.Fatalf("webhook.invalid: delivery log %+v, want a failed attempt without an answer", rows)
	}
	t.Logf("webhook.invalid: %s", rows[0].Error)
}

// TestEgressPolicy: what Check refuses, and the name of the range in the reason; with
// ranges allowed; and the literal hosts CheckURL reads.
func TestEgressPolicy(t *testing.T) {
	refusedBy := func(p Egress, a string) string {
		err := p.Check(netip.MustParseAddr(a))
		if err == nil {
			return ""
		}
		return err.Error()
	}
	none := Egress{}
	for a, why := range map[string]string{
		"8.8.8.8": "", "2001:4860:4860::8888": "", "172.32.0.1": "", "100.128.0.1": "", "::ffff:8.8.8.8": "",
		"64:ff9b::8.8.8.8": "", "223.255.255.255": "", "2002:808:808::1": "", "2001:4860::1": "",
		"192.0.2.1": "192.0.2.1 is documentation", "198.51.100.7": "198.51.100.7 is documentation",
		"203.0.113.9": "203.0.113.9 is documentation", "2001:db8::1": "2001:db8::1 is documentation",
		"168.63.129.16": "168.63.129.16 is cloud metadata",
		"::7f00:1":      "::7f00:1 is reserved", "::ffff:0:7f00:1": "::ffff:0:7f00:1 is reserved",
		"64:ff9b:1::7f00:1": "64:ff9b:1::7f00:1 is reserved", "64:ff9b:1::a00:1": "64:ff9b:1::a00:1 is reserved",
		"100::1": "100::1 is reserved", "2001:0:4136:e378::1": "2001:0:4136:e378::1 is reserved",
		"2002:7f00:1::1": "127.0.0.1 is loopback", "2002:a9fe:a9fe::": "169.254.169.254 is cloud metadata",
		"127.0.0.1": "127.0.0.1 is loopback", "127.255.255.254": "127.255.255.254 is loopback", "::1": "::1 is loopback",
		"10.0.0.1": "10.0.0.1 is private", "172.16.0.1": "172.16.0.1 is private", "172.31.255.255": "172.31.255.255 is private",
		"192.168.0.1": "192.168.0.1 is private", "fc00::1": "fc00::1 is private", "fd12:3456::1": "fd12:3456::1 is private",
		"fec0::1":     "fec0::1 is private",
		"169.254.1.1": "169.254.1.1 is link-local", "fe80::1": "fe80::1 is link-local", "fe80::1%eth0": "fe80::1 is link-local",
		"169.254.169.254": "169.254.169.254 is cloud metadata", "fd00:ec2::254": "fd00:ec2::254 is cloud metadata",
		"100.100.100.200": "100.100.100.200 is cloud metadata", "169.254.170.2": "169.254.170.2 is cloud metadata",
		"::ffff:169.254.169.254": "169.254.169.254 is cloud metadata",
		"224.0.0.1":              "224.0.0.1 is multicast", "239.255.255.250": "239.255.255.250 is multicast", "ff02::1": "ff02::1 is multicast",
		"0.0.0.0": "0.0.0.0 is unspecified", "::": ":: is unspecified", "0.1.2.3": "0.1.2.3 is this network",
		"100.64.0.1": "100.64.0.1 is shared address space (CGNAT)", "100.127.255.255": "100.127.255.255 is shared address space (CGNAT)",
		"255.255.255.255": "255.255.255.255 is broadcast", "240.0.0.1": "240.0.0.1 is reserved",
		"192.0.0.1": "192.0.0.1 is reserved", "198.18.0.1": "198.18.0.1 is reserved",
		"::ffff:127.0.0.1": "127.0.0.1 is loopback", "::ffff:10.1.2.3": "10.1.2.3 is private",
		"64:ff9b::10.0.0.1": "10.0.0.1 is private", "64:ff9b::7f00:1": "127.0.0.1 is loopback",
	} {
		want := ""
		if why != "" {
			want = "address_not_allowed: " + why
		}
		if got := refusedBy(none, a); got != want {
			t.Errorf("Check(%s) = %q, want %q", a, got, want)
		}
	}
	some := Egress{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("10.1.0.0/16"),
		netip.MustParsePrefix("fd00::/8"), netip.MustParsePrefix("169.254.0.0/16")}}
	for a, allowed := range map[string]bool{
		"127.0.0.1": true, "::ffff:127.0.0.1": true, "10.1.2.3": true, "fd12::1": true, "169.254.1.1": true, "8.8.8.8": true,
		"10.2.0.1": false, "::1": false, "192.168.1.1": false, "fc00::1": false,
		"169.254.169.254": false, "fd00:ec2::254": false, // metadata: never
	} {
		if got := refusedBy(some, a) == ""; got != allowed {
			t.Errorf("with %v allowed, Check(%s) allows: %v", some.Allow, a, got)
		}
	}
	for u, why := range map[string]string{
		"https://hooks.example.com/x": "", "http://8.8.8.8:80/": "", "http://[2001:4860::8888]/": "", "http://x.example/a.1": "",
		"http://[2001:db8::1]/": "2001:db8::1 is documentation", "http://[::127.0.0.1]/": "::7f00:1 is reserved",
		"http://127.1/": "127.0.0.1 is loopback", "http://0177.0.0.1/": "127.0.0.1 is loopback",
		"http://0x7f000001/": "127.0.0.1 is loopback", "http://LOCALHOST./": "127.0.0.1 is loopback",
		"http://a.localhost:9/": "127.0.0.1 is loopback", "http://10.0.0.1./": "10.0.0.1 is private",
		"http://167772161/": "10.0.0.1 is private", "http://0xa9.254.169.254/": "169.254.169.254 is cloud metadata",
		"http://1.2.3.4.5/": "not an IPv4", "http://256.1/": "not an IPv4", "http://host.123/": "not an IPv4",
	} {
		err := none.CheckURL(u)
		if (err == nil) != (why == "") || err != nil && !strings.Contains(err.Error(), why) {
			t.Errorf("CheckURL(%s) = %v, want %q", u, err, why)
		}
	}
}

// TestKindNamedTwiceSubscribedOnce: an endpoint created with a kind named twice is
// subscribed to it once (one delivery per event, one entry in its audit detail).
func TestKindNamedTwiceSubscribedOnce(t *testing.T) {
	e := newEnv(t)
	st := e.store()
	ep, err := st.CreateEndpoint(context.Background(), uuid.New(), "https://hooks.example.com/in", []string{KindKeyExpiring, KindKeyExpiring})
	if err != nil {
		t.Fatal(err)
	}
	if len(ep.Kinds) != 1 || ep.Kinds[0] != KindKeyExpiring {
		t.Fatalf("kinds %v, want one %s", ep.Kinds, KindKeyExpiring)
	}
}
