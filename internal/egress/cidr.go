package egress

import (
	"fmt"
	"net/netip"
	"strings"
)

// CIDR rules (Policy.AllowCIDRs, an environment's network.allow_cidrs) admit connections
// by the address the proxy dials, never by a name: an IP literal inside a range is
// admitted; a name not on allow_domains is resolved (by the proxy, as for any name) and
// dialled only at those of its addresses that lie inside a range, refused when none
// does. A name on allow_domains is admitted whatever its addresses, as without CIDRs. The
// forbidden ranges (addr.go) win over a CIDR rule as over everything else: a range
// covering 10.0.0.0/8 does not open the host's private network. So a sandbox cannot widen
// a rule by choosing a name (one that spells an address, or resolves to several): what is
// checked is what is dialled.
//
// With CIDRs, names outside allow_domains are looked up to check their addresses, so the
// sandbox can make the harness's resolver ask for names it chooses, as any sandbox can
// under an unrestricted policy (and as a Daytona sandbox can with networkAllowList).

// parseCIDRs parses an environment's allow_cidrs; an entry that is not a CIDR is an
// error naming it.
func parseCIDRs(list []string) ([]netip.Prefix, error) {
	out := make([]netip.Prefix, 0, len(list))
	for _, s := range list {
		p, err := netip.ParsePrefix(strings.TrimSpace(s))
		if err != nil {
			return nil, fmt.Errorf("allow_cidrs: %q is not a CIDR such as 192.30.252.0/22: %w", s, err)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// inCIDRs reports whether a lies in one of the policy's ranges.
func (pol *policy) inCIDRs(a netip.Addr) bool {
	a = a.Unmap()
	for _, p := range pol.cidrs {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// checkHostCIDRs is checkHost's decision under a policy with CIDRs (block_all already
// checked): an IP literal must lie in a range (the forbidden ranges are checked by
// resolve); a name is admitted here, and decided by its addresses in admitAddrs unless
// allow_domains names it.
func (p *Proxy) checkHostCIDRs(host string) *Denial {
	if a, err := netip.ParseAddr(host); err == nil && !p.policy.inCIDRs(a) {
		return deny(ReasonNotAllowed, host, "%s is not in this environment's network.allow_cidrs (%s); ask the owner to add a range that covers it", host, cidrList(p.policy.cidrs))
	}
	return nil
}

// admitAddrs narrows the checked addresses of host to those a CIDR rule admits: all of
// them for an IP literal (checkHostCIDRs checked it), a name on allow_domains, or a
// policy without CIDRs; otherwise those inside a range, refusing host when none is.
func (p *Proxy) admitAddrs(host string, addrs []netip.Addr) ([]netip.Addr, *Denial) {
	if len(p.policy.cidrs) == 0 || matchAny(p.policy.allow, host) {
		return addrs, nil
	}
	if _, err := netip.ParseAddr(host); err == nil {
		return addrs, nil
	}
	var in []netip.Addr
	for _, a := range addrs {
		if p.policy.inCIDRs(a) {
			in = append(in, a)
		}
	}
	if len(in) == 0 {
		return nil, deny(ReasonNotAllowed, host, "%s is not on network.allow_domains (%s) and resolves to %s, outside network.allow_cidrs (%s); ask the owner to add the name or a range that covers its addresses",
			host, patternList(p.policy.allow), addrList(addrs), cidrList(p.policy.cidrs))
	}
	return in, nil
}

func cidrList(ps []netip.Prefix) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = p.String()
	}
	return strings.Join(s, ", ")
}

func addrList(as []netip.Addr) string {
	s := make([]string, len(as))
	for i, a := range as {
		s[i] = a.String()
	}
	return strings.Join(s, ", ")
}
