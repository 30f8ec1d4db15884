package lifecycle

import (
	"fmt"

	"github.com/trueforge/terraform-provider-trueforge/internal/packageindex"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// sandboxAllow is the allow list a new sandbox of env gets where its backend enforces
// the policy (Daytona's domainAllowList): allow_domains, plus the hosts of the
// environment's package indexes when package_indexes_in is "build_and_sandbox" and
// allow_domains is not empty (empty admits every host already). It notes the indexes
// in the sandbox_provisioned summary. Local sandboxes get the same list from their
// egress proxy (sandboxnet).
func sandboxAllow(env store.Environment, summary map[string]any) ([]string, error) {
	allow, err := packageindex.SandboxAllow(env.AllowDomains, env.Settings.AllowCIDRs, env.Settings.PackageIndexes, env.Settings.PackageIndexesIn)
	if err != nil {
		return nil, fmt.Errorf("environment %q: network.package_indexes: %w", env.Name, err)
	}
	if len(env.Settings.PackageIndexes) > 0 {
		in := env.Settings.PackageIndexesIn
		if in == "" {
			in = packageindex.DefaultIn
		}
		summary["package_indexes"], summary["package_indexes_in"] = env.Settings.PackageIndexes, in
	}
	return allow, nil
}
