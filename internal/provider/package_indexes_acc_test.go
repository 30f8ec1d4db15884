package provider

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
)

// packageIndexProbe is a build script that passes only when the build reaches the
// network through the egress proxy, which does not refuse pypi.org as off the list
// (whether pypi.org answers depends on this machine's network) and refuses example.com.
const packageIndexProbe = `test "$HTTPS_PROXY" = http://127.0.0.1:3128
curl -s -o /dev/null -D /tmp/pypi --max-time 15 http://pypi.org/simple/ || true
if grep -qi '^x-trueforge-deny: not_allowed' /tmp/pypi; then echo "pypi.org was refused"; exit 1; fi
curl -s -o /dev/null -D /tmp/other --max-time 15 http://example.com/ || true
grep -qi '^x-trueforge-deny: not_allowed' /tmp/other
`

// An environment with block_all and package_indexes = ["pypi"] (package_indexes_in
// defaults to "build"): the plan shows the expanded hosts, and its build on the local
// backend reaches the index's hosts through an egress proxy and nothing else; a build
// that needs another host fails with the proxy's refusal in the diagnostic's log tail.
func TestAccEnvironment_packageIndexesReachTheBuild(t *testing.T) {
	f := newFixture(t)
	network := `  network = {
    block_all       = true
    package_indexes = ["pypi"]
  }`
	accTest(t,
		resource.TestStep{
			Config: f.config(envHCL(packageIndexProbe, network)),
			ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
				plancheck.ExpectKnownValue(envAddr, tfjsonpath.New("package_index_hosts"), knownvalue.ListExact([]knownvalue.Check{
					knownvalue.StringExact("files.pythonhosted.org"), knownvalue.StringExact("pypi.org"),
				})),
			}},
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue(envAddr, tfjsonpath.New("status"), knownvalue.StringExact("Ready")),
			},
		},
		resource.TestStep{
			Config:      f.config(envHCL("curl -fsS --max-time 15 -o /dev/null http://example.com/", network)),
			ExpectError: regexp.MustCompile(`(?s)refused \(not_allowed\).*example\.com`),
		},
	)
}

// On Daytona a sandbox's domainAllowList holds allow_domains plus, under
// package_indexes_in = "build_and_sandbox", the indexes' hosts: the plan-time cap of ten
// counts them, and under "build" it does not.
func TestAccDaytona_packageIndexesCountTowardsTheDomainCap(t *testing.T) {
	f := newDaytonaFixture(t)
	domains := make([]string, 9)
	for i := range domains {
		domains[i] = fmt.Sprintf("%q", fmt.Sprintf("h%d.example.com", i))
	}
	network := func(in string) string {
		return fmt.Sprintf("  network = {\n    allow_domains      = [%s]\n    package_indexes    = [\"pypi\"]\n    package_indexes_in = %q\n  }",
			strings.Join(domains, ", "), in)
	}
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: f.providers,
		Steps: []resource.TestStep{
			{Config: f.config("")},
			{
				Config:      f.config(daytonaEnvHCL("net", "", network("build_and_sandbox"))),
				PlanOnly:    true,
				ExpectError: spaced(`network.allow_domains has 11 entries; Daytona's domainAllowList takes at most 10. Use`),
			},
			{
				Config:             f.config(daytonaEnvHCL("net", "", network("build"))),
				PlanOnly:           true,
				ExpectNonEmptyPlan: true,
			},
		},
	})
}

// An allowed domain Daytona's domainAllowList pattern refuses (network-validation.util.ts:
// 49, v0.190: dotted names with an alphabetic top-level domain), such as localhost, passes
// the attribute's own check but is refused at plan on a Daytona provider, naming the
// entry and the fix, rather than failing every sandbox create at run time.
func TestAccDaytona_allowDomainsDaytonaRefuses(t *testing.T) {
	f := newDaytonaFixture(t)
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: f.providers,
		Steps: []resource.TestStep{
			{Config: f.config("")},
			{
				Config:   f.config(daytonaEnvHCL("net", "", `  network = { allow_domains = ["api.example.com", "localhost"] }`)),
				PlanOnly: true,
				ExpectError: regexp.MustCompile(`(?s)` + spaced(`Allowed Domain Refused By Daytona`).String() + ".*" +
					spaced(`allows the domain "localhost", which Daytona's domainAllowList refuses`).String() + ".*" + spaced(`Give the host's full name`).String()),
			},
		},
	})
}
