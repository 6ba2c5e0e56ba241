package apikey

import (
	"net/netip"
	"testing"
)

// TestAllowListMatchesMappedAddresses: an allow-list entry written as an IPv4-mapped IPv6
// address or range matches the IPv4 caller it stands for, whether the key was parsed now
// or stored with the mapped form; a mapped range wider than the mapped space is refused.
func TestAllowListMatchesMappedAddresses(t *testing.T) {
	for _, entry := range []string{"::ffff:127.0.0.1/128", "::ffff:127.0.0.0/104", "::ffff:127.0.0.1", "127.0.0.0/8"} {
		allow, err := ParseAllow([]string{entry})
		if err != nil {
			t.Fatalf("%s: %v", entry, err)
		}
		k := &Key{Allow: allow}
		if !k.Allows(netip.MustParseAddr("127.0.0.1")) || !k.Allows(netip.MustParseAddr("::ffff:127.0.0.1")) {
			t.Fatalf("%s (parsed as %v) does not allow 127.0.0.1", entry, allow)
		}
		if k.Allows(netip.MustParseAddr("10.0.0.1")) {
			t.Fatalf("%s allows 10.0.0.1", entry)
		}
	}
	stored := &Key{Allow: []netip.Prefix{netip.MustParsePrefix("::ffff:127.0.0.1/128")}}
	if !stored.Allows(netip.MustParseAddr("127.0.0.1")) {
		t.Fatal("a stored mapped entry does not allow its IPv4 caller")
	}
	if _, err := ParseAllow([]string{"::ffff:0:0/90"}); err == nil {
		t.Fatal("a mapped range wider than /96 accepted")
	}
	if got, _ := ParseAllow([]string{"2001:db8::/32"}); got[0].String() != "2001:db8::/32" {
		t.Fatalf("an IPv6 range changed: %v", got)
	}
}
