package provider

import (
	"path/filepath"
	"regexp"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/compare"
	"github.com/hashicorp/terraform-plugin-testing/config"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
)

// TestAccQuickstart applies examples/quickstart as it is published (its own terraform
// block, empty provider block and files), so the example users start from cannot rot:
// it applies from scratch, plans empty right after (the framework's post-apply plan),
// an env-only change is an in-place update with no rebuild, and a build input change
// rebuilds exactly once. make demo shows the same with the CLI; this keeps it in CI.
func TestAccQuickstart(t *testing.T) {
	f := newFixture(t)
	// The example's source is trueforge/trueforge and its provider block is empty: the
	// in-process provider answers for that address, and reads the database and owner
	// from the environment as it would for a user. Not parallel: t.Setenv.
	t.Setenv("TF_ACC_PROVIDER_NAMESPACE", "trueforge")
	t.Setenv(envDatabaseURL, f.dbURL)
	t.Setenv(envOwner, f.owner)

	const env = "trueforge_environment.python"
	// The example names its skill folder by ${path.module}, which is relative: Terraform
	// runs the provider in the configuration's directory, and the in-process provider of
	// this test runs in the test's. So the test runs in the example's directory.
	example, err := filepath.Abs("../../examples/quickstart")
	if err != nil {
		t.Fatal(err)
	}
	t.Chdir(example)
	dir := config.StaticDirectory(example)
	vars := func(greeting, marker string) config.Variables {
		return config.Variables{"greeting": config.StringVariable(greeting), "build_marker": config.StringVariable(marker)}
	}
	snapshotStable := statecheck.CompareValue(compare.ValuesSame())
	countBuilds := buildCounter(t, f)
	// The providers are given per step: with the example's own terraform block, the
	// testing framework takes provider factories only at that level.
	resource.Test(t, resource.TestCase{
		PreCheck: func() { testAccPreCheck(t) },
		Steps: []resource.TestStep{
			{
				ConfigDirectory:          dir,
				ProtoV6ProviderFactories: testAccProviders,
				ConfigVariables:          vars("hello", "v1"),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(env, tfjsonpath.New("status"), knownvalue.StringExact("Ready")),
					statecheck.ExpectKnownOutputValue("default_environment", knownvalue.StringExact("default")),
					statecheck.ExpectKnownValue("trueforge_agent.demo", tfjsonpath.New("sandbox").AtMapKey("environment"), knownvalue.StringExact("python")),
					snapshotStable.AddStateValue(env, tfjsonpath.New("snapshot_id")),
				},
				// The default environment and python: two builds.
				Check: countBuilds(2),
			},
			{
				// Only env changes: in place, snapshot_id known and unchanged, nothing built.
				ConfigDirectory:          dir,
				ProtoV6ProviderFactories: testAccProviders,
				ConfigVariables:          vars("hi", "v1"),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(env, plancheck.ResourceActionUpdate),
					plancheck.ExpectKnownValue(env, tfjsonpath.New("snapshot_id"), knownvalue.StringRegexp(regexp.MustCompile(`^snap-`))),
					plancheck.ExpectResourceAction("trueforge_agent.demo", plancheck.ResourceActionNoop),
				}},
				ConfigStateChecks: []statecheck.StateCheck{snapshotStable.AddStateValue(env, tfjsonpath.New("snapshot_id"))},
				Check:             countBuilds(0),
			},
			{
				// The build script changes: in place, a new snapshot, one build.
				ConfigDirectory:          dir,
				ProtoV6ProviderFactories: testAccProviders,
				ConfigVariables:          vars("hi", "v2"),
				ConfigPlanChecks:         rebuildPlanned(env),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(env, tfjsonpath.New("status"), knownvalue.StringExact("Ready")),
				},
				Check: countBuilds(1),
			},
			{
				// Nothing changed: the plan is empty (what plan -detailed-exitcode exits 0 on).
				ConfigDirectory:          dir,
				ProtoV6ProviderFactories: testAccProviders,
				ConfigVariables:          vars("hi", "v2"),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectEmptyPlan(),
				}},
				Check: countBuilds(0),
			},
		},
	})
}
