package provider

import (
	"fmt"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
)

// teamBLendsHCL is team B's environment py without secrets (a blueprint anyone may use)
// that mounts team B's volume cache, shared as given.
func teamBLendsHCL(sharedWith string) string {
	return teamBVolumeHCL(sharedWith) + envHCL("", `  volumes = [{ volume = trueforge_volume.cache.name, mount_path = "/data" }]`)
}

// Issue 23's volume route through an environment: team A's agent selects team B's
// environment, which has no secrets but mounts team B's unshared volume. The harness
// refuses such a sandbox (lifecycle.ErrVolumeNotShared); plan says so first, naming
// sandbox.environment, the volume, its owner and the fix, and no agent row is stored.
// Once team B shares the volume with team A, team A's apply passes and plans clean.
func TestAccAgentVolumeSharing_throughEnvironment(t *testing.T) {
	f := newFixture(t)
	teamB := func(body string) string { return f.providerBlock("team_b") + localProviderHCL + body }
	teamA := f.providerBlock("team_a") + teamAHCL
	teamAApplies := func(wantRefused bool) func(*terraformState) error {
		return func(*terraformState) error {
			applyAsTeamA(t, testAccProviders, teamA, wantRefused,
				cliError(`Volume Not Shared With This Owner.*Agent "thief" selects environment "py" \(sandbox.environment\), which mounts volume "cache", owned by "team_b" and not shared with "team_a".*Ask "team_b" to add "team_a" to the volume's shared_with`),
				statecheck.ExpectKnownValue("trueforge_agent.thief", tfjsonpath.New("owner"), knownvalue.StringExact("team_a")),
			)
			if _, err := f.store().GetAgent(t.Context(), "thief"); wantRefused && err == nil {
				return fmt.Errorf("team A's agent on an environment mounting team B's unshared volume was stored")
			}
			return nil
		}
	}
	accTest(t,
		resource.TestStep{Config: teamB(teamBLendsHCL("")), Check: teamAApplies(true)},
		resource.TestStep{Config: teamB(teamBLendsHCL(`["team_a"]`)), Check: teamAApplies(false)},
	)
}
