package egress

import "net/netip"

// forbidden are the destinations no sandbox may reach, whatever its policy: the harness
// host itself, private networks, cloud metadata services and other special ranges. They
// are checked on every address a name resolves to and on every IP literal.
var forbidden = func() []netip.Prefix {
	var ps []netip.Prefix
	for _, s := range []string{
		"0.0.0.0/8",       // "this network"
		"10.0.0.0/8",      // private
		"100.64.0.0/10",   // CGNAT
		"127.0.0.0/8",     // loopback
		"169.254.0.0/16",  // link-local, includes the 169.254.169.254 metadata service
		"172.16.0.0/12",   // private
		"192.0.0.0/24",    // IETF protocol assignments
		"192.0.2.0/24",    // documentation
		"192.168.0.0/16",  // private
		"198.18.0.0/15",   // benchmarking; also the sandbox's synthetic DNS answers
		"198.51.100.0/24", // documentation
		"203.0.113.0/24",  // documentation
		"224.0.0.0/4",     // multicast
		"240.0.0.0/4",     // reserved, includes broadcast
		"::/128",          // unspecified
		"::1/128",         // loopback
		"::ffff:0:0/96",   // IPv4-mapped (checked after unmapping too)
		"64:ff9b::/96",    // NAT64 can reach private IPv4
		"64:ff9b:1::/48",  // local-use NAT64
		"100::/64",        // discard
		"2001::/32",       // Teredo tunnels IPv4 through IPv6
		"2001:db8::/32",   // documentation
		"2002::/16",       // 6to4 embeds an IPv4 address
		"fc00::/7",        // ULA, includes the fd00:ec2::254 metadata service
		"fe80::/10",       // link-local
		"fec0::/10",       // deprecated site-local
		"ff00::/8",        // multicast
	} {
		ps = append(ps, netip.MustParsePrefix(s))
	}
	return ps
}()

// addrForbidden reports whether a is in a forbidden range, naming the range. Addresses
// listed in allow are exempt one by one: that is for tests with upstream servers on
// loopback and for an operator's explicitly trusted service, never a range switch.
func addrForbidden(a netip.Addr, allow []netip.Addr) (netip.Prefix, bool) {
	a = a.Unmap()
	for _, x := range allow {
		if x.Unmap() == a {
			return netip.Prefix{}, false
		}
	}
	for _, p := range forbidden {
		if p.Contains(a) {
			return p, true
		}
	}
	return netip.Prefix{}, false
}
