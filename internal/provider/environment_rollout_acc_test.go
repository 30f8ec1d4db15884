package provider

import (
	"fmt"
	"regexp"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/compare"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
)

// rolloutHCL is environment "py" on the Daytona emulator with rollout ("" for none),
// and both environment data sources, read after its apply.
func rolloutHCL(rollout string) string {
	extra := ""
	if rollout != "" {
		extra = "  rollout = " + rollout + "\n"
	}
	return daytonaEnvHCL("py", "echo v1", extra) + `
data "trueforge_environment" "py" {
  name       = trueforge_environment.py.name
  depends_on = [trueforge_environment.py]
}

data "trueforge_environments" "all" {
  depends_on = [trueforge_environment.py]
}
`
}

// expectRollout checks rollout in the resource's state and as both environment data
// sources read it (the list's elements are default, then py).
func expectRollout(want knownvalue.Check) []statecheck.StateCheck {
	return []statecheck.StateCheck{
		statecheck.ExpectKnownValue(envAddr, tfjsonpath.New("rollout"), want),
		statecheck.ExpectKnownValue("data.trueforge_environment.py", tfjsonpath.New("rollout"), want),
		statecheck.ExpectKnownValue("data.trueforge_environments.all", tfjsonpath.New("environments").AtSliceIndex(1).AtMapKey("name"), knownvalue.StringExact("py")),
		statecheck.ExpectKnownValue("data.trueforge_environments.all", tfjsonpath.New("environments").AtSliceIndex(1).AtMapKey("rollout"), want),
		statecheck.ExpectKnownValue("data.trueforge_environments.all", tfjsonpath.New("environments").AtSliceIndex(0).AtMapKey("rollout"), knownvalue.Null()),
	}
}

// TestAccEnvironment_versionRollout: rollout is a live setting (no snapshot baked, snapshot_id
// known at plan), stored in the settings document, read back by the resource and both
// data sources, refused outside 1 to 100, and unset again without a build.
func TestAccEnvironment_versionRollout(t *testing.T) {
	f := newDaytonaFixture(t)
	snapshotStable := statecheck.CompareValue(compare.ValuesSame())
	noBuild := func(*terraformState) error {
		if n := f.srv.Count("POST /snapshots"); n != 0 {
			return fmt.Errorf("POST /snapshots %d times after the first apply; rollout must not bake a snapshot", n)
		}
		return nil
	}
	stored := func(want int64) resource.TestCheckFunc {
		return func(*terraformState) error {
			env, err := f.store().GetEnvironment(t.Context(), "py")
			switch {
			case err != nil:
				return err
			case want == 0 && env.Settings.Rollout != nil:
				return fmt.Errorf("stored rollout %+v; want none", *env.Settings.Rollout)
			case want != 0 && (env.Settings.Rollout == nil || env.Settings.Rollout.Percent != want):
				return fmt.Errorf("stored rollout %+v; want percent %d", env.Settings.Rollout, want)
			}
			return nil
		}
	}
	live := resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
		plancheck.ExpectResourceAction(envAddr, plancheck.ResourceActionUpdate),
		plancheck.ExpectKnownValue(envAddr, tfjsonpath.New("snapshot_id"), knownvalue.StringRegexp(regexp.MustCompile(`^snap-`))),
	}}
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: f.providers,
		Steps: []resource.TestStep{
			{
				Config: f.config(rolloutHCL("")),
				ConfigStateChecks: append(expectRollout(knownvalue.Null()),
					snapshotStable.AddStateValue(envAddr, tfjsonpath.New("snapshot_id"))),
				Check: resource.ComposeTestCheckFunc(stored(0), func(*terraformState) error { f.srv.ResetCounts(); return nil }),
			},
			{
				Config:      f.config(rolloutHCL(`{ percent = 0 }`)),
				ExpectError: regexp.MustCompile(`(?s)rollout.percent.*between 1 and 100`),
			},
			{
				Config:           f.config(rolloutHCL(`{ percent = 50 }`)),
				ConfigPlanChecks: live,
				ConfigStateChecks: append(expectRollout(knownvalue.ObjectExact(map[string]knownvalue.Check{"percent": knownvalue.Int64Exact(50)})),
					snapshotStable.AddStateValue(envAddr, tfjsonpath.New("snapshot_id"))),
				Check: resource.ComposeTestCheckFunc(noBuild, stored(50)),
			},
			{
				Config:           f.config(rolloutHCL("")),
				ConfigPlanChecks: live,
				ConfigStateChecks: append(expectRollout(knownvalue.Null()),
					snapshotStable.AddStateValue(envAddr, tfjsonpath.New("snapshot_id"))),
				Check: resource.ComposeTestCheckFunc(noBuild, stored(0)),
			},
		},
	})
}
