package sandboxnet

import (
	"fmt"

	"github.com/trueforge/terraform-provider-trueforge/internal/packageindex"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// allowDomains is the allow list a new sandbox of env gets from its proxy: allow_domains,
// plus the hosts of its package indexes when they are reachable from sandboxes
// (package_indexes_in = "build_and_sandbox") and allow_domains is not empty (empty
// admits every public host already). It is recorded with the sandbox's egress state,
// so a proxy recreated later keeps it.
func allowDomains(env store.Environment) ([]string, error) {
	allow, err := packageindex.SandboxAllow(env.AllowDomains, env.Settings.AllowCIDRs, env.Settings.PackageIndexes, env.Settings.PackageIndexesIn)
	if err != nil {
		return nil, fmt.Errorf("environment %q: network.package_indexes: %w", env.Name, err)
	}
	return allow, nil
}
