package provider

import (
	"regexp"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/compare"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
)

// Every new attribute refuses bad input at plan time, naming the attribute and the fix,
// before anything is built.
func TestAccEnvironment_settingsValidation(t *testing.T) {
	f := newFixture(t)
	cases := []struct{ name, body, want string }{
		{"dockerfile without FROM", `dockerfile = "RUN echo hi"`, `(?s)dockerfile.*must\s+start\s+from\s+an\s+image`},
		{"dockerfile FROM nothing", `dockerfile = "# base\nFROM"`, `(?s)FROM names no image`},
		{"dockerfile with build_script", `
  dockerfile   = "FROM platform"
  build_script = "echo"`, `(?s)build_script.*dockerfile|dockerfile.*build_script`},
		{"build_context without dockerfile", `build_context = "."`, `(?s)build_context.*dockerfile`},
		{"gpu_type without gpu", `gpu_type = "H100"`, `(?s)gpu_type.*gpu`},
		{"too many gpus", `gpu = 99`, `(?s)gpu.*between 1 and 8`},
		{"reserved label", `labels = { "trueforge.session" = "x" }`, `(?s)labels.*set\s+by\s+the\s+harness\s+itself`},
		{"bad label key", `labels = { "a b" = "x" }`, `(?s)labels key "a b"`},
		{"cidr with host bits", `network = { allow_cidrs = ["10.1.2.3/8"] }`, `(?s)allow_cidrs.*write it as 10.0.0.0/8`},
		{"not a cidr", `network = { allow_cidrs = ["example.com"] }`, `(?s)allow_cidrs.*not a CIDR`},
		{"unknown package index", `network = { package_indexes = ["pipy"] }`, `(?s)package_indexes.*pypi`},
		{"bad package_indexes_in", `network = { package_indexes_in = "always" }`, `(?s)package_indexes_in.*build_and_sandbox`},
		{"volume over a system folder", `volumes = [{ volume = "v", mount_path = "/etc/x" }]`, `(?s)mount_path.*is\s+in\s+system\s+directory\s+/etc`},
		{"volume over the egress plumbing", `volumes = [{ volume = "v", mount_path = "/run/trueforge" }]`, `(?s)mount_path.*system\s+directory\s+/run`},
		{"volume over the workspace", `volumes = [{ volume = "v", mount_path = "/workspace" }]`, `(?s)mount_path.*cannot\s+replace\s+the\s+whole\s+workspace`},
		{"unclean subpath", `volumes = [{ volume = "v", mount_path = "/data", subpath = "a/./b" }]`, `(?s)subpath.*cannot\s+contain\s+empty`},
		{"volume escaping subpath", `volumes = [{ volume = "v", mount_path = "/data", subpath = "../other" }]`, `(?s)subpath.*cannot\s+contain\s+empty,\s+'\.'\s+or\s+'\.\.'`},
		{"overlapping volumes", `volumes = [{ volume = "a", mount_path = "/data" }, { volume = "b", mount_path = "/data/b" }]`, `(?s)Overlapping Volume Mounts.*volumes\[0\] at /data and volumes\[1\] at /data/b`},
		{"missing build context", `
  dockerfile    = "FROM platform"
  build_context = "/nonexistent/context"`, `(?s)Invalid Build Context.*nonexistent`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resource.Test(t, resource.TestCase{
				PreCheck:                 func() { testAccPreCheck(t) },
				ProtoV6ProviderFactories: testAccProviders,
				Steps: []resource.TestStep{{
					Config: f.config(`
resource "trueforge_environment" "bad" {
  name             = "bad"
  sandbox_provider = trueforge_sandbox_provider.local.name
  ` + c.body + `
}`),
					PlanOnly:    true,
					ExpectError: regexp.MustCompile(c.want),
				}},
			})
		})
	}
}

// labels, allow_cidrs and package indexes are live: changing them plans no new
// snapshot; the expanded index hosts are in the plan; the configuration's
// representation reads back with no drift (an empty plan after each apply).
func TestAccEnvironment_liveSettingsNeverRebuild(t *testing.T) {
	f := newFixture(t)
	countBuilds := buildCounter(t, f)
	snapshotStable := statecheck.CompareValue(compare.ValuesSame())
	hcl := func(extra string) string {
		return f.config(`
resource "trueforge_environment" "py" {
  name             = "py"
  sandbox_provider = trueforge_sandbox_provider.local.name
` + extra + `
}`)
	}
	accTest(t,
		resource.TestStep{
			// Labels are no build input: the same inputs as the default environment's
			// build once, for both.
			Config:            hcl(`  labels = { team = "data" }`),
			ConfigStateChecks: []statecheck.StateCheck{snapshotStable.AddStateValue(envAddr, tfjsonpath.New("snapshot_id"))},
			Check:             countBuilds(1),
		},
		resource.TestStep{
			Config: hcl(`  labels = { team = "data", "cost-center" = "42" }
  network = {
    allow_domains   = ["api.example.com"]
    allow_cidrs     = ["192.30.252.0/22", "2606:4700::/32"]
    package_indexes = ["pypi", "npm"]
  }`),
			ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
				plancheck.ExpectResourceAction(envAddr, plancheck.ResourceActionUpdate),
				plancheck.ExpectKnownValue(envAddr, tfjsonpath.New("snapshot_id"), knownvalue.StringRegexp(regexp.MustCompile(`^snap-`))),
				plancheck.ExpectKnownValue(envAddr, tfjsonpath.New("package_index_hosts"), knownvalue.ListExact([]knownvalue.Check{
					knownvalue.StringExact("files.pythonhosted.org"), knownvalue.StringExact("pypi.org"), knownvalue.StringExact("registry.npmjs.org"),
				})),
			}},
			ConfigStateChecks: []statecheck.StateCheck{
				snapshotStable.AddStateValue(envAddr, tfjsonpath.New("snapshot_id")),
				statecheck.ExpectKnownValue(envAddr, tfjsonpath.New("labels").AtMapKey("cost-center"), knownvalue.StringExact("42")),
			},
			Check: countBuilds(0),
		},
		resource.TestStep{
			// The store holds what the plan said; an import reads every attribute back.
			ResourceName:            envAddr,
			ImportState:             true,
			ImportStateVerify:       true,
			ImportStateVerifyIgnore: []string{"timeouts", "wait_for_ready", "network.package_indexes_in"},
		},
		resource.TestStep{
			Config: hcl(`  labels = {}
  network = { package_indexes = ["debian"], package_indexes_in = "build_and_sandbox" }`),
			ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
				plancheck.ExpectKnownValue(envAddr, tfjsonpath.New("snapshot_id"), knownvalue.StringRegexp(regexp.MustCompile(`^snap-`))),
			}},
			ConfigStateChecks: []statecheck.StateCheck{
				snapshotStable.AddStateValue(envAddr, tfjsonpath.New("snapshot_id")),
				statecheck.ExpectKnownValue(envAddr, tfjsonpath.New("network").AtMapKey("package_indexes_in"), knownvalue.StringExact("build_and_sandbox")),
			},
			Check: countBuilds(0),
		},
	)
}
