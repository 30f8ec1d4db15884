package provider

import (
	"fmt"
	"slices"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
)

func TestAccActionEnvironmentRebuild_sqlite(t *testing.T) {
	f := newFixture(t)
	testEnvironmentRebuild(t, versionsPlane{config: f.config, store: f.store, providers: testAccProviders})
}

func TestAccActionEnvironmentRebuild_postgres(t *testing.T) {
	f := newPGFixture(t)
	testEnvironmentRebuild(t, versionsPlane{config: f.config, store: f.store, providers: f.providers})
}

// rebuildScript is environment py's build script in the rebuild test.
func rebuildScript(v string) string { return "echo " + v + " > /usr/local/share/marker" }

// rebuildHCL is environment py (build script v, live env MODE = mode, keeping 2 previous
// versions) and, when input is not "", a terraform_data whose creation or update (input)
// triggers trueforge_environment_rebuild of py.
func rebuildHCL(v, mode, input string) string {
	hcl := envHCL(rebuildScript(v), fmt.Sprintf("  keep_versions = 2\n  env = { MODE = %q }", mode))
	if input == "" {
		return hcl
	}
	return hcl + fmt.Sprintf(`
action "trueforge_environment_rebuild" "py" {
  config {
    environment = trueforge_environment.py.name
  }
}

resource "terraform_data" "rebuild" {
  input      = %q
  depends_on = [trueforge_environment.py]
  lifecycle {
    action_trigger {
      events  = [after_create, after_update]
      actions = [action.trueforge_environment_rebuild.py]
    }
  }
}
`, input)
}

// trueforge_environment_rebuild builds the same inputs again: each run starts one build
// of a new snapshot, switches the environment to it and keeps the one before as a
// previous version, and the environment's next plan is empty (its build hash, computed
// from the configuration and the stored count of forced builds, is the one built). A
// live change keeps the count; a build input changed afterwards plans and builds a hash
// that still includes it.
func testEnvironmentRebuild(t *testing.T, p versionsPlane) {
	snaps := map[string]string{}
	record := func(v string) resource.TestCheckFunc {
		return func(*terraformState) error {
			env, err := p.store().GetEnvironment(t.Context(), "py")
			if err != nil {
				return err
			}
			for k, id := range snaps {
				if id == env.SnapshotID {
					return fmt.Errorf("environment py is on snapshot %s, which is %s's: the rebuild did not make a new one", id, k)
				}
			}
			snaps[v] = env.SnapshotID
			return nil
		}
	}
	builds := int64(-1)
	countBuilds := func(want int64) resource.TestCheckFunc {
		return func(*terraformState) error {
			n, err := p.store().CountBuilds(t.Context())
			if err != nil {
				return err
			}
			if builds >= 0 && n-builds != want {
				return fmt.Errorf("builds started = %d, want %d", n-builds, want)
			}
			builds = n
			return nil
		}
	}
	stateOn := func(v string) resource.TestCheckFunc {
		return func(s *terraformState) error {
			if got := s.RootModule().Resources[envAddr].Primary.Attributes["snapshot_id"]; got != snaps[v] {
				return fmt.Errorf("snapshot_id in state = %s, want %s's %s", got, v, snaps[v])
			}
			return nil
		}
	}
	// The store's kept versions, newest first (the state catches up at the next refresh).
	stored := func(want ...string) resource.TestCheckFunc {
		return func(*terraformState) error {
			vs, err := p.store().EnvironmentVersions(t.Context(), "py")
			if err != nil {
				return err
			}
			var kept, wantIDs []string
			for _, v := range vs {
				if v.Kept {
					kept = append(kept, v.SnapshotID)
				}
			}
			for _, w := range want {
				wantIDs = append(wantIDs, snaps[w])
			}
			if !slices.Equal(kept, wantIDs) {
				return fmt.Errorf("kept versions = %v, want %v (%v)", kept, wantIDs, want)
			}
			return nil
		}
	}
	spec := func(v string, rebuilds int64) string {
		return sandbox.SnapshotSpec{Image: sandbox.PlatformImage, BuildScript: rebuildScript(v), CPU: 1, MemoryGB: 1, DiskGB: 3, Rebuild: rebuilds}.BuildHash()
	}
	resource.ParallelTest(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: p.providers,
		TerraformVersionChecks:   actionVersionChecks,
		Steps: []resource.TestStep{
			{
				Config: p.config(rebuildHCL("v1", "a", "")),
				Check: resource.ComposeTestCheckFunc(record("applied"), countBuilds(0),
					resource.TestCheckResourceAttr(envAddr, "build_hash", spec("v1", 0))),
			},
			// The action runs once (terraform_data's creation): one build, a new snapshot,
			// the applied one a previous kept version. The test's plan after the apply is
			// empty, so the environment's plan shows no change.
			{
				Config: p.config(rebuildHCL("v1", "a", "1")),
				Check:  resource.ComposeTestCheckFunc(record("rebuilt"), countBuilds(1), stored("rebuilt", "applied")),
			},
			{
				Config:   p.config(rebuildHCL("v1", "a", "1")),
				PlanOnly: true,
			},
			// Refreshed into state: the new snapshot and its hash, the versions.
			{
				Config:           p.config(rebuildHCL("v1", "a", "1")),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()}},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(envAddr, tfjsonpath.New("build_hash"), knownvalue.StringExact(spec("v1", 1))),
					statecheck.ExpectKnownValue(envAddr, tfjsonpath.New("versions"), knownvalue.ListSizeExact(2)),
					statecheck.ExpectKnownValue(envAddr, tfjsonpath.New("versions").AtSliceIndex(0).AtMapKey("current"), knownvalue.Bool(true)),
					statecheck.ExpectKnownValue(envAddr, tfjsonpath.New("versions").AtSliceIndex(1).AtMapKey("current"), knownvalue.Bool(false)),
					statecheck.ExpectKnownValue(envAddr, tfjsonpath.New("versions").AtSliceIndex(1).AtMapKey("kept"), knownvalue.Bool(true)),
				},
				Check: resource.ComposeTestCheckFunc(stateOn("rebuilt"), countBuilds(0), p.expectVersions(t, snaps, "rebuilt", "applied"),
					func(s *terraformState) error {
						if got := s.RootModule().Resources[envAddr].Primary.Attributes["versions.1.snapshot_id"]; got != snaps["applied"] {
							return fmt.Errorf("versions.1.snapshot_id = %s, want the applied snapshot %s", got, snaps["applied"])
						}
						return nil
					}),
			},
			// A live change builds nothing and keeps the forced build in the hash.
			{
				Config: p.config(rebuildHCL("v1", "b", "1")),
				Check: resource.ComposeTestCheckFunc(stateOn("rebuilt"), countBuilds(0),
					resource.TestCheckResourceAttr(envAddr, "build_hash", spec("v1", 1))),
			},
			// Run again (terraform_data's update): another build, two previous versions kept.
			{
				Config: p.config(rebuildHCL("v1", "b", "2")),
				Check:  resource.ComposeTestCheckFunc(record("again"), countBuilds(1), stored("again", "rebuilt", "applied")),
			},
			// A build input changed afterwards: the plan's hash counts the two forced builds,
			// and the apply builds exactly that.
			{
				Config:           p.config(rebuildHCL("v2", "b", "2")),
				ConfigPlanChecks: rebuildPlanned(envAddr, "versions"),
				Check: resource.ComposeTestCheckFunc(record("v2"), countBuilds(1), stateOn("v2"),
					resource.TestCheckResourceAttr(envAddr, "build_hash", spec("v2", 2))),
			},
		},
	})
}
