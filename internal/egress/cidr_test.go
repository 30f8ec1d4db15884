package egress_test

import (
	"context"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"

	"github.com/trueforge/terraform-provider-trueforge/internal/egress"
)

// cidrFixture is a proxy whose policy has CIDRs, with 127.0.0.2 exempt from the
// forbidden ranges like 127.0.0.1 (the upstreams' address), so that what refuses
// 127.0.0.2 below is the CIDR rule, not the loopback range. names are added to the
// resolver.
func cidrFixture(t *testing.T, pol egress.Policy, names map[string][]string) *fixture {
	t.Helper()
	f := newFixture(t, pol, nil, func(c *egress.Config) {
		c.AllowAddrs = append(c.AllowAddrs, netip.MustParseAddr("127.0.0.2"))
	})
	f.resolver.mu.Lock()
	defer f.resolver.mu.Unlock()
	for n, as := range names {
		f.resolver.addrs[n] = nil
		for _, a := range as {
			f.resolver.addrs[n] = append(f.resolver.addrs[n], netip.MustParseAddr(a))
		}
	}
	return f
}

// TestCIDRRules: a CIDR rule admits what the proxy dials inside the range, an IP
// literal or a name's resolved address, and nothing a sandbox can make look inside by
// the name it chooses.
func TestCIDRRules(t *testing.T) {
	f := cidrFixture(t, egress.Policy{AllowCIDRs: []string{"127.0.0.1/32"}}, map[string][]string{
		"outside.test":       {"127.0.0.2"},
		"127.0.0.1.nip.test": {"127.0.0.2"}, // spells an address in the range, resolves outside it
		"private-cidr.test":  {"10.1.2.3"},
		"evil.test":          {"127.0.0.1"}, // not on any allow_domains, resolves inside
		"half-private.test":  {"127.0.0.1", "192.168.1.1"},
	})
	c := f.client(t)
	for _, host := range []string{"127.0.0.1", "evil.test"} {
		resp, b := f.get(t, c, host, "/whoami", nil)
		if resp.StatusCode != 200 || !strings.Contains(b, "hello from upstream") {
			t.Fatalf("%s (inside the range): %d %q", host, resp.StatusCode, b)
		}
	}
	for target, reason := range map[string]string{
		"127.0.0.2":          egress.ReasonNotAllowed, // an IP literal outside the range
		"outside.test":       egress.ReasonNotAllowed, // a name resolving outside
		"127.0.0.1.nip.test": egress.ReasonNotAllowed,
		"[::1]":              egress.ReasonNotAllowed,       // another family
		"private-cidr.test":  egress.ReasonForbiddenAddress, // checked before the range
		"half-private.test":  egress.ReasonForbiddenAddress, // rebinding: refused whole
	} {
		resp, _, _ := f.connect(t, net.JoinHostPort(strings.Trim(target, "[]"), f.up.port))
		if got := denyReason(t, resp); got != reason {
			t.Errorf("CONNECT %s: reason %q, want %q", target, got, reason)
		}
	}
	// Plain http:// goes through the same check on every upstream dial.
	resp, err := c.Get("http://" + net.JoinHostPort("outside.test", f.plainUp.port) + "/whoami")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || resp.Header.Get(egress.DenyHeader) != egress.ReasonNotAllowed {
		t.Fatalf("plain http to a name outside the range: %d %q", resp.StatusCode, resp.Header.Get(egress.DenyHeader))
	}
	if n := len(f.plainUp.requests()); n != 0 {
		t.Fatalf("%d requests reached the upstream", n)
	}
}

// TestCIDRDialsOnlyAddressesInside: a name with addresses inside and outside the range is
// dialled inside only. Here the range holds 127.0.0.2, where nothing listens, and the
// upstream is on 127.0.0.1: the connection fails rather than reach 127.0.0.1.
func TestCIDRDialsOnlyAddressesInside(t *testing.T) {
	f := cidrFixture(t, egress.Policy{AllowCIDRs: []string{"127.0.0.2/32"}}, map[string][]string{
		"mixed.test": {"127.0.0.1", "127.0.0.2"},
	})
	resp, _, _ := f.connect(t, net.JoinHostPort("mixed.test", f.up.port))
	if got := denyReason(t, resp); got != egress.ReasonUpstreamFailed {
		t.Fatalf("CONNECT mixed.test: reason %q; want %q (dialled 127.0.0.2 only)", got, egress.ReasonUpstreamFailed)
	}
}

// TestCIDRsBesideDomains: allow_domains and allow_cidrs admit their union; a name on
// allow_domains needs no range, and an IP literal needs one even with allow_domains set.
func TestCIDRsBesideDomains(t *testing.T) {
	f := cidrFixture(t, egress.Policy{AllowDomains: []string{"api.allowed.test"}, AllowCIDRs: []string{"192.0.2.0/24"}}, nil)
	resp, c, _ := f.connect(t, net.JoinHostPort("api.allowed.test", f.up.port))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("CONNECT to a name on allow_domains: %d", resp.StatusCode)
	}
	c.Close()
	for _, target := range []string{"evil.test", "127.0.0.1"} {
		resp, _, _ := f.connect(t, net.JoinHostPort(target, f.up.port))
		if got := denyReason(t, resp); got != egress.ReasonNotAllowed {
			t.Errorf("CONNECT %s: reason %q, want %q", target, got, egress.ReasonNotAllowed)
		}
	}
	// block_all wins over both.
	b := cidrFixture(t, egress.Policy{BlockAll: true, AllowCIDRs: []string{"127.0.0.1/32"}}, nil)
	resp, _, _ = b.connect(t, net.JoinHostPort("127.0.0.1", b.up.port))
	if got := denyReason(t, resp); got != egress.ReasonBlockAll {
		t.Fatalf("block_all: %q", got)
	}
}

func TestCIDRPolicyRefusesBadEntries(t *testing.T) {
	_, err := egress.New(context.Background(), egress.Config{SandboxID: "x", Policy: egress.Policy{AllowCIDRs: []string{"10.0.0.0/8", "example.com"}}})
	if err == nil || !strings.Contains(err.Error(), `allow_cidrs: "example.com"`) {
		t.Fatalf("New: %v", err)
	}
}
