package sandboxnet

import (
	"strings"

	"github.com/trueforge/terraform-provider-trueforge/internal/egress"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// recordedAllow is the allow list a sandbox's egress record keeps: the host patterns,
// then the environment's CIDRs (network.allow_cidrs). Both are read when the sandbox is
// created and kept for its life, as a proxy recreated later (Ensure) must enforce the
// same policy; they share the record's list because no host pattern contains a '/' and
// every CIDR does. A harness older than CIDR rules refuses such a record as a bad
// pattern, so its sandbox gets no network rather than a wider one.
func recordedAllow(domains, cidrs []string) []string {
	if len(cidrs) == 0 {
		return domains
	}
	return append(append([]string(nil), domains...), cidrs...)
}

// policyOf is the proxy policy of an egress record (recordedAllow split back).
func policyOf(rec store.SandboxEgress) egress.Policy {
	p := egress.Policy{BlockAll: rec.BlockAll}
	for _, e := range rec.AllowDomains {
		if strings.Contains(e, "/") {
			p.AllowCIDRs = append(p.AllowCIDRs, e)
		} else {
			p.AllowDomains = append(p.AllowDomains, e)
		}
	}
	return p
}
