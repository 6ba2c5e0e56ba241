package httpserver

import (
	"net"
	"net/netip"
	"testing"
)

// peerConn is a connection from addr (only RemoteAddr is used).
type peerConn struct {
	net.Conn
	addr net.Addr
}

func (c peerConn) RemoteAddr() net.Addr { return c.addr }

// TestConnectionsCountIPv6ByTheirSlash64: an IPv6 client counts against its /64, so one
// host cannot pass the bound by spreading over its addresses; IPv4 (also IPv4-mapped)
// counts by address; a trusted proxy is exempt (limits.md).
func TestConnectionsCountIPv6ByTheirSlash64(t *testing.T) {
	s := &Server{Config: Config{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.9.0.0/16")}}}
	l := &perIPListener{srv: s, limit: 2, open: map[netip.Addr]int{}}
	from := func(ap string) (netip.Addr, bool) {
		return l.client(peerConn{addr: net.TCPAddrFromAddrPort(netip.MustParseAddrPort(ap))})
	}
	a, _ := from("[2001:db8:1:2::5]:1000")
	b, _ := from("[2001:db8:1:2:ffff::9]:1001")
	c, _ := from("[2001:db8:1:3::5]:1002")
	if a != b || a == c {
		t.Fatalf("one /64 counted as %v and %v; another /64 as %v", a, b, c)
	}
	if !l.admit(a) || !l.admit(b) || l.admit(a) {
		t.Fatal("two connections of one /64 did not fill a bound of 2")
	}
	if !l.admit(c) {
		t.Fatal("another /64 refused")
	}
	v4, _ := from("203.0.113.7:1000")
	mapped, _ := from("[::ffff:203.0.113.7]:1001")
	other, _ := from("203.0.113.8:1002")
	if v4 != mapped || v4 == other {
		t.Fatalf("IPv4 counted as %v, mapped as %v, its neighbour as %v", v4, mapped, other)
	}
	if _, counted := from("10.9.1.1:1000"); counted {
		t.Fatal("a trusted proxy is counted")
	}
}
