package webhook

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Egress is the outbound address policy of deliveries: which addresses the worker may
// connect to. Everything public is allowed; internal addresses (loopback, private,
// link-local, CGNAT, multicast, …, table below) are refused unless Allow covers them;
// cloud-metadata addresses are refused even then. The zero Egress allows nothing
// internal.
//
// The policy is applied to the address actually dialled (Dialer's Control hook), on
// every connection, after name resolution: a name that resolves inward, now or after
// a DNS change, is refused like a literal address.
type Egress struct {
	// Allow lists ranges reachable although internal (SVC_WEBHOOKS_ALLOW_NETS).
	Allow []netip.Prefix
}

// AddressError is a refused address. Its text is the delivery log's reason, e.g.
// "address_not_allowed: 127.0.0.1 is loopback" (the address, never the URL).
type AddressError struct {
	Addr netip.Addr
	// Why names the range: "loopback", "private", "cloud metadata", ….
	Why string
}

func (e *AddressError) Error() string {
	return "address_not_allowed: " + e.Addr.String() + " is " + e.Why
}

// metadata are cloud instance-metadata services: never reachable, whatever Allow says.
var metadata = map[netip.Addr]bool{
	netip.MustParseAddr("169.254.169.254"): true, // AWS, GCP, Azure, OpenStack, Oracle, DigitalOcean
	netip.MustParseAddr("169.254.170.2"):   true, // AWS ECS task metadata
	netip.MustParseAddr("100.100.100.200"): true, // Alibaba Cloud
	netip.MustParseAddr("168.63.129.16"):   true, // Azure's WireServer (a public address)
	netip.MustParseAddr("fd00:ec2::254"):   true, // AWS over IPv6
}

// internal are the ranges refused unless allowed, with the name the reason gives. The
// first match names it.
var internal = []struct {
	p   netip.Prefix
	why string
}{
	{netip.MustParsePrefix("0.0.0.0/32"), "unspecified"}, // dialling it reaches this host
	{netip.MustParsePrefix("0.0.0.0/8"), "this network"},
	{netip.MustParsePrefix("127.0.0.0/8"), "loopback"},
	{netip.MustParsePrefix("10.0.0.0/8"), "private"},
	{netip.MustParsePrefix("172.16.0.0/12"), "private"},
	{netip.MustParsePrefix("192.168.0.0/16"), "private"},
	{netip.MustParsePrefix("100.64.0.0/10"), "shared address space (CGNAT)"},
	{netip.MustParsePrefix("169.254.0.0/16"), "link-local"},
	{netip.MustParsePrefix("192.0.0.0/24"), "reserved"},
	{netip.MustParsePrefix("192.0.2.0/24"), "documentation"},
	{netip.MustParsePrefix("198.51.100.0/24"), "documentation"},
	{netip.MustParsePrefix("203.0.113.0/24"), "documentation"},
	{netip.MustParsePrefix("198.18.0.0/15"), "reserved"},
	{netip.MustParsePrefix("224.0.0.0/4"), "multicast"},
	{netip.MustParsePrefix("255.255.255.255/32"), "broadcast"},
	{netip.MustParsePrefix("240.0.0.0/4"), "reserved"},
	{netip.MustParsePrefix("::/128"), "unspecified"},
	{netip.MustParsePrefix("::1/128"), "loopback"},
	{netip.MustParsePrefix("::/96"), "reserved"},           // IPv4-compatible (deprecated)
	{netip.MustParsePrefix("::ffff:0:0:0/96"), "reserved"}, // SIIT
	{netip.MustParsePrefix("64:ff9b:1::/48"), "reserved"},  // local-use NAT64 (RFC 8215)
	{netip.MustParsePrefix("100::/64"), "reserved"},        // discard-only
	{netip.MustParsePrefix("2001::/32"), "reserved"},       // Teredo
	{netip.MustParsePrefix("2001:db8::/32"), "documentation"},
	{netip.MustParsePrefix("fc00::/7"), "private"},  // unique local
	{netip.MustParsePrefix("fec0::/10"), "private"}, // site-local (deprecated)
	{netip.MustParsePrefix("fe80::/10"), "link-local"},
	{netip.MustParsePrefix("ff00::/8"), "multicast"},
}

// nat64 is the well-known NAT64 prefix: its last 32 bits are an IPv4 address that a
// NAT64 gateway reaches for us, so that address is what is checked. sixToFour (6to4)
// carries the IPv4 address of its relay in bits 16–47, judged the same way.
var (
	nat64     = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour = netip.MustParsePrefix("2002::/16")
)

// Check returns nil when deliveries may connect to a, an *AddressError otherwise.
// IPv4-mapped (::ffff:a.b.c.d), NAT64 (64:ff9b::a.b.c.d) and 6to4 (2002:aabb:ccdd::)
// forms are judged, and named, by their IPv4 address.
func (p Egress) Check(a netip.Addr) error {
	a = a.WithZone("")
	b := a.As16()
	switch {
	case a.Is4In6():
		a = a.Unmap()
	case nat64.Contains(a):
		a = netip.AddrFrom4([4]byte(b[12:]))
	case sixToFour.Contains(a):
		a = netip.AddrFrom4([4]byte(b[2:6]))
	}
	if metadata[a] {
		return &AddressError{Addr: a, Why: "cloud metadata"}
	}
	for _, r := range internal {
		if r.p.Contains(a) {
			for _, ok := range p.Allow {
				if ok.Contains(a) {
					return nil
				}
			}
			return &AddressError{Addr: a, Why: r.why}
		}
	}
	return nil
}

// CheckURL refuses an endpoint URL whose host is an address Check refuses: a literal
// address (also in the legacy IPv4 forms resolvers accept, 2130706433 or 0x7f.1) or a
// localhost name (RFC 6761: always loopback). Other names are not resolved here: what
// they resolve to is checked on every connection (Transport). raw must have passed
// ValidateURL.
func (p Egress) CheckURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return errors.New("want an absolute http:// or https:// URL")
	}
	host := strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return p.Check(netip.AddrFrom4([4]byte{127, 0, 0, 1}))
	}
	if a, err := netip.ParseAddr(host); err == nil {
		return p.Check(a)
	}
	labels := strings.Split(host, ".")
	if !numericLabel(labels[len(labels)-1]) {
		return nil // a name
	}
	a, ok := parseLegacyIPv4(labels)
	if !ok {
		return errors.New("the host ends in a number but is not an IPv4 address")
	}
	return p.Check(a)
}

// numericLabel reports whether a host label is a number (decimal, 0x hex or 0 octal):
// no top-level domain is, so a host ending in one is an address (as browsers read it).
func numericLabel(s string) bool {
	if s == "" {
		return false
	}
	if t, ok := strings.CutPrefix(s, "0x"); ok {
		_, err := strconv.ParseUint("0"+t, 16, 64)
		return err == nil
	}
	return strings.Trim(s, "0123456789") == ""
}

// parseLegacyIPv4 reads the inet_aton forms: 1 to 4 numbers (decimal, 0x hex, 0 octal),
// the last one filling the remaining bytes (127.1, 2130706433, 0x7f.0.0.1).
func parseLegacyIPv4(labels []string) (netip.Addr, bool) {
	if len(labels) > 4 {
		return netip.Addr{}, false
	}
	var v uint64
	for i, l := range labels {
		n, ok := parseNumber(l)
		width := uint(8) // bits of this number
		if i == len(labels)-1 {
			width = uint(8 * (5 - len(labels)))
		}
		if !ok || n >= 1<<width {
			return netip.Addr{}, false
		}
		v = v<<width | n
	}
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), true
}

// parseNumber reads one number of an inet_aton address: 0x hex, 0 octal or decimal,
// digits only.
func parseNumber(s string) (uint64, bool) {
	base := 10
	switch {
	case strings.HasPrefix(s, "0x"):
		s, base = "0"+s[2:], 16
	case len(s) > 1 && s[0] == '0':
		base = 8
	}
	if s == "" || strings.ContainsAny(s, "_+-") {
		return 0, false
	}
	n, err := strconv.ParseUint(s, base, 32)
	return n, err == nil
}

// control is the Dialer's Control hook: it runs for every connection, with the address
// about to be connected (after resolution), and refuses what Check refuses.
func (p Egress) control(_, address string, _ syscall.RawConn) error {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return fmt.Errorf("address_not_allowed: cannot read %q", address)
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return fmt.Errorf("address_not_allowed: cannot read %q", address)
	}
	return p.Check(a)
}

// Transport returns the delivery transport: its own (nothing shared with
// http.DefaultTransport), no proxy (HTTP_PROXY and the like are ignored: deliveries go
// to the endpoint itself, through the policy), every connection checked by control,
// and timeouts no longer than timeout (one attempt's bound).
func (p Egress) Transport(timeout time.Duration) *http.Transport {
	d := &net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second, Control: p.control}
	return &http.Transport{
		Proxy:                  nil,
		DialContext:            d.DialContext,
		ForceAttemptHTTP2:      true,
		MaxIdleConns:           64,
		MaxIdleConnsPerHost:    4,
		IdleConnTimeout:        90 * time.Second,
		TLSHandshakeTimeout:    min(timeout, 10*time.Second),
		ResponseHeaderTimeout:  timeout,
		ExpectContinueTimeout:  time.Second,
		MaxResponseHeaderBytes: 64 << 10,
	}
}

// ParseNet reads one entry of SVC_WEBHOOKS_ALLOW_NETS: a CIDR range (host bits
// cleared) or one address; the zero Prefix (IsValid false) if neither.
func ParseNet(s string) netip.Prefix {
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return netip.Prefix{}
		}
		return p.Masked()
	}
	a, err := netip.ParseAddr(s)
	if err != nil || a.Zone() != "" {
		return netip.Prefix{}
	}
	return netip.PrefixFrom(a, a.BitLen())
}
