package httpserver

import (
	"bufio"
	"net"
	"net/netip"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"
)

// TestClientIPReadsEveryForwardedForLine: the client is found by walking every
// X-Forwarded-For header line, in order, as one list from the right past trusted proxies.
// A proxy appends a line of its own (HAProxy's option forwardfor) or extends the last one
// (nginx), so the line a client wrote first is never believed for being first.
func TestClientIPReadsEveryForwardedForLine(t *testing.T) {
	s := &Server{Config: Config{TrustedProxies: []netip.Prefix{
		netip.MustParsePrefix("192.0.2.0/24"), netip.MustParsePrefix("2001:db8:1::/48")}}}
	const proxy, proxy6, stranger = "192.0.2.1", "2001:db8:1::1", "198.51.100.4"
	cases := []struct {
		name  string
		peer  string
		lines []string // X-Forwarded-For header lines, in the order sent
		want  string
	}{
		{"untrusted peer: the header is ignored", stranger, []string{"10.9.9.9"}, stranger},
		{"trusted peer without the header", proxy, nil, proxy},
		{"one line from the proxy", proxy, []string{"203.0.113.9"}, "203.0.113.9"},
		{"a forged line before the proxy's (HAProxy)", proxy, []string{"10.9.9.9", "203.0.113.9"}, "203.0.113.9"},
		{"a forged entry in the proxy's line (nginx)", proxy, []string{"10.9.9.9, 203.0.113.9"}, "203.0.113.9"},
		{"forged lines and lists, then two proxies", proxy,
			[]string{"10.1.1.1, 10.2.2.2", "10.9.9.9", "203.0.113.9, 192.0.2.7"}, "203.0.113.9"},
		{"the second proxy on a line of its own", proxy, []string{"10.9.9.9", "203.0.113.9", "192.0.2.7"}, "203.0.113.9"},
		{"header name in lower case", proxy, []string{"10.9.9.9", "x:203.0.113.9"}, "203.0.113.9"},
		{"every entry a trusted proxy: the left-most", proxy, []string{"192.0.2.8", "192.0.2.7"}, "192.0.2.8"},
		{"a client's garbage left of the proxy's entry", proxy, []string{"unknown", "203.0.113.9"}, "203.0.113.9"},
		{"garbage from a trusted hop: the hop right of it", proxy, []string{"10.9.9.9, _hidden, 192.0.2.7"}, "192.0.2.7"},
		{"garbage in the last entry: the peer", proxy, []string{"10.9.9.9", "unknown"}, proxy},
		{"an empty line: the peer", proxy, []string{"10.9.9.9", ""}, proxy},
		{"an empty element from a trusted hop: the hop right of it", proxy, []string{"203.0.113.9,, 192.0.2.7 "}, "192.0.2.7"},
		{"a trailing comma: the peer", proxy, []string{"10.9.9.9, 203.0.113.9,"}, proxy},
		{"spaces and tabs around entries", proxy, []string{"10.9.9.9,\t203.0.113.9 ,192.0.2.7"}, "203.0.113.9"},
		{"an IPv4-mapped address", proxy, []string{"::ffff:203.0.113.9"}, "203.0.113.9"},
		{"addresses with ports", proxy, []string{"10.9.9.9", "203.0.113.9:4711, [2001:db8:1::7]:443"}, "203.0.113.9"},
		{"IPv6 proxy and client", proxy6, []string{"10.9.9.9", "2001:db8:2::5"}, "2001:db8:2::5"},
		{"a zone is not part of the address", proxy, []string{"10.9.9.9", "fe80::1%eth0"}, "fe80::1"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx := forwardedRequest(t, c.peer, c.lines)
			if got := s.clientIP(ctx); got != netip.MustParseAddr(c.want) {
				t.Fatalf("clientIP = %v, want %s (lines %q)", got, c.want, c.lines)
			}
		})
	}
}

// forwardedRequest parses a request carrying lines as X-Forwarded-For header lines (a
// line starting "x:" is sent under the lower-case name), received from peer.
func forwardedRequest(t *testing.T, peer string, lines []string) *fasthttp.RequestCtx {
	t.Helper()
	var raw strings.Builder
	raw.WriteString("GET /things HTTP/1.1\r\nHost: svc\r\n")
	for _, l := range lines {
		name := "X-Forwarded-For"
		if v, ok := strings.CutPrefix(l, "x:"); ok {
			name, l = "x-forwarded-for", v
		}
		raw.WriteString(name + ": " + l + "\r\n")
	}
	raw.WriteString("\r\n")
	var req fasthttp.Request
	if err := req.Read(bufio.NewReader(strings.NewReader(raw.String()))); err != nil {
		t.Fatal(err)
	}
	var ctx fasthttp.RequestCtx
	ctx.Init(&req, &net.TCPAddr{IP: net.ParseIP(peer), Port: 40000}, nil)
	return &ctx
}
