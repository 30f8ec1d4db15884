package provider

import (
	"context"

	"github.com/trueforge/terraform-provider-trueforge/internal/packageindex"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
)

// buildNetwork sets the network of a build of this environment (packageindex.BuildNetwork):
// blocked under block_all without package indexes; through an egress proxy that admits
// allow_domains plus the package indexes' hosts when allow_domains is not empty, or the
// indexes' hosts alone under block_all; every public host otherwise (no Egress: the local
// backend still routes that build through a proxy, refusing host loopback, private and
// link-local addresses). The local backend enforces the proxy; Daytona builds run on
// Daytona's builders with their own network and ignore it. A package index name the validators let through but the table
// does not know (impossible short of a bug) blocks the build's network rather than
// widening it.
func (m *environmentModel) buildNetwork(ctx context.Context, req *sandbox.BuildRequest) {
	blockAll, allow := m.network(ctx)
	block, proxied, hosts, err := packageindex.BuildNetwork(blockAll, allow, m.networkSettings(ctx).packageIndexes)
	if err != nil {
		req.BlockNetwork, req.Egress = true, nil
		return
	}
	req.BlockNetwork = block
	req.Egress = nil
	if proxied {
		req.Egress = &sandbox.BuildEgress{AllowDomains: hosts}
	}
}

// sandboxAllowDomains is the allow list a sandbox of this environment gets: allow, plus
// the package indexes' hosts under package_indexes_in = "build_and_sandbox" when allow
// is not empty (packageindex.SandboxAllow). Backends check that list at plan time
// (Daytona's domainAllowList has a size cap), not allow_domains alone.
func (m *environmentModel) sandboxAllowDomains(ctx context.Context, allow []string) []string {
	ns := m.networkSettings(ctx)
	out, err := packageindex.SandboxAllow(allow, ns.allowCIDRs, ns.packageIndexes, ns.packageIndexesIn)
	if err != nil {
		return allow // the package_indexes validator says why
	}
	return out
}
