package egress

import (
	"fmt"
	"net/netip"
)

// forbidden are the destinations no sandbox or build may reach, whatever its policy: the
// harness host itself, private networks, cloud metadata services and other special
// ranges. They are checked on every address a name resolves to and on every IP literal,
// and the provider refuses at plan an allow_cidrs entry they cover (AlwaysForbidden), so
// both read this one list.
//
// IPv6 forms that embed an IPv4 address: IPv4-mapped addresses are unmapped before the
// check (netip.Addr.Unmap); the well-known NAT64 prefix is unwrapped and its IPv4 address
// checked (nat64, below), so that an IPv6-only host behind DNS64 still reaches public
// IPv4 hosts and never a private one; every other embedding is refused whole, since
// nothing a sandbox needs is only reachable that way and a translator, a tunnel or a
// dual-stack kernel could carry it to an IPv4 address of the host's networks:
// IPv4-compatible (::/96, deprecated; a kernel may route ::127.0.0.1 to loopback),
// IPv4-translated (::ffff:0:0:0/96, SIIT), local-use NAT64 (64:ff9b:1::/48, whose
// embedding depends on the operator's prefix length), Teredo (2001::/32, an obfuscated
// IPv4 address and port) and 6to4 (2002::/16).
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
		"::1/128",         // loopback (inside ::/96, listed first to be named)
		"::/96",           // IPv4-compatible (deprecated); includes :: (unspecified)
		"::ffff:0:0/96",   // IPv4-mapped (checked after unmapping too)
		"::ffff:0:0:0/96", // IPv4-translated (SIIT)
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

// nat64 is the well-known NAT64 prefix (RFC 6052): 64:ff9b::a.b.c.d is a.b.c.d reached
// through the network's translator, so it is as forbidden as a.b.c.d.
var nat64 = netip.MustParsePrefix("64:ff9b::/96")

// embedded4 returns the IPv4 address a NAT64 address stands for.
func embedded4(a netip.Addr) (netip.Addr, bool) {
	if !a.Is6() || !nat64.Contains(a) {
		return netip.Addr{}, false
	}
	b := a.As16()
	return netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]}), true
}

// addrForbidden reports whether a is in a forbidden range, naming the range. Addresses
// listed in allow are exempt one by one: that is for tests with upstream servers on
// loopback and for an operator's explicitly trusted service, never a range switch (nor
// does it extend to the same address behind NAT64).
func addrForbidden(a netip.Addr, allow []netip.Addr) (netip.Prefix, bool) {
	a = a.Unmap()
	for _, x := range allow {
		if x.Unmap() == a {
			return netip.Prefix{}, false
		}
	}
	if v4, ok := embedded4(a); ok {
		if r, bad := addrForbidden(v4, nil); bad {
			return r, true
		}
		return netip.Prefix{}, false
	}
	for _, p := range forbidden {
		if p.Contains(a) {
			return p, true
		}
	}
	return netip.Prefix{}, false
}

// AlwaysForbidden reports whether every address of p is one the proxy refuses whatever
// the policy, so that an allow_cidrs entry of p could never admit anything; within is a
// forbidden range that overlaps p, for the message. It is the provider's plan-time check
// of allow_cidrs against the proxy's own list.
func AlwaysForbidden(p netip.Prefix) (within netip.Prefix, always bool) {
	p = p.Masked()
	if p.Addr().Is4In6() && p.Bits() >= 96 {
		// ::ffff:a.b.c.d/n is the IPv4 range a.b.c.d/(n-96): the proxy unmaps.
		p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
	}
	return coveredBy(p)
}

func coveredBy(p netip.Prefix) (netip.Prefix, bool) {
	if p.Addr().Is6() && p.Bits() >= nat64.Bits() && nat64.Contains(p.Addr()) {
		v4, _ := embedded4(p.Addr())
		return coveredBy(netip.PrefixFrom(v4, p.Bits()-96))
	}
	var overlap netip.Prefix
	for _, f := range forbidden {
		if f.Addr().Is4() != p.Addr().Is4() || !f.Overlaps(p) {
			continue
		}
		if f.Bits() <= p.Bits() {
			return f, true // f contains p
		}
		overlap = f
	}
	if !overlap.IsValid() {
		return netip.Prefix{}, false
	}
	// Forbidden ranges lie inside p without covering it alone: p is covered when both
	// of its halves are (224.0.0.0/3 is multicast and reserved together).
	lo := netip.PrefixFrom(p.Addr(), p.Bits()+1)
	hiAddr := p.Addr().As16()
	bit := p.Bits()
	if p.Addr().Is4() {
		bit += 96
	}
	hiAddr[bit/8] |= 0x80 >> (bit % 8)
	hi := netip.AddrFrom16(hiAddr)
	if p.Addr().Is4() {
		hi = hi.Unmap()
	}
	if _, ok := coveredBy(lo); !ok {
		return netip.Prefix{}, false
	}
	if _, ok := coveredBy(netip.PrefixFrom(hi, p.Bits()+1)); !ok {
		return netip.Prefix{}, false
	}
	return overlap, true
}

// ForbiddenRangeText describes the forbidden ranges in one line, for messages.
func ForbiddenRangeText() string {
	return fmt.Sprintf("loopback, private (RFC 1918, CGNAT, ULA), link-local and metadata, documentation, multicast and reserved ranges, and IPv6 forms embedding such IPv4 addresses (%d ranges in all)", len(forbidden))
}
