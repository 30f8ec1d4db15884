package egress

import (
	"fmt"
	"net/netip"
)

// Policy is an environment's network policy, read when the sandbox is created.
type Policy struct {
	// BlockAll refuses everything; it wins over AllowDomains and secrets.
	BlockAll bool
	// AllowDomains lists the hosts the sandbox may reach (exact or "*.suffix"); empty
	// means any public host.
	AllowDomains []string
	// AllowCIDRs admit, besides AllowDomains, the addresses in these ranges (cidr.go);
	// with either list set, egress is limited to what the two admit.
	AllowCIDRs []string
}

// policy is a parsed Policy.
type policy struct {
	blockAll bool
	allow    []Pattern
	cidrs    []netip.Prefix
}

func parsePolicy(p Policy) (policy, error) {
	allow, err := ParsePatterns("allow_domains", p.AllowDomains)
	if err != nil {
		return policy{}, err
	}
	cidrs, err := parseCIDRs(p.AllowCIDRs)
	if err != nil {
		return policy{}, err
	}
	return policy{blockAll: p.BlockAll, allow: allow, cidrs: cidrs}, nil
}

// checkHost is the name-level decision, taken before any resolution: block_all first,
// then IP literals (refused under an allow list, range-checked otherwise), then the allow
// list. host is normalized.
func (p *Proxy) checkHost(host string) *Denial {
	if p.policy.blockAll {
		return deny(ReasonBlockAll, host, "this environment blocks all network access")
	}
	if len(p.policy.cidrs) > 0 {
		return p.checkHostCIDRs(host) // cidr.go
	}
	if a, err := netip.ParseAddr(host); err == nil {
		if len(p.policy.allow) > 0 {
			return deny(ReasonIPLiteral, host, "%s is an IP address; this environment's allow list admits host names only (%s)", host, patternList(p.policy.allow))
		}
		if r, bad := addrForbidden(a, p.cfg.AllowAddrs); bad {
			return deny(ReasonForbiddenAddress, host, "%s is in %s (private, loopback, link-local, metadata or reserved), which no sandbox may reach", host, r)
		}
		return nil
	}
	if len(p.policy.allow) > 0 && !matchAny(p.policy.allow, host) {
		return deny(ReasonNotAllowed, host, "%s is not on this environment's allow list (%s); ask the owner to add it to network.allow_domains", host, patternList(p.policy.allow))
	}
	return nil
}

// target normalizes a host and port taken from a CONNECT authority or a URL.
func target(host, port string) (string, string, *Denial) {
	h, err := NormalizeHost(host)
	if err != nil {
		return "", "", deny(ReasonBadTarget, host, "bad target host: %v", err)
	}
	var n int
	if _, err := fmt.Sscanf(port, "%d", &n); err != nil || n < 1 || n > 65535 || fmt.Sprint(n) != port {
		return "", "", deny(ReasonBadTarget, h, "bad target port %q", port)
	}
	return h, port, nil
}
