package provider

import (
	"fmt"
	"regexp"
	"slices"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/compare"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
)

const envAddr = "trueforge_environment.py"

// envHCL renders an environment "py" with the given build script and body extras.
func envHCL(script, extra string) string {
	return fmt.Sprintf(`
resource "trueforge_environment" "py" {
  name             = "py"
  sandbox_provider = trueforge_sandbox_provider.local.name
  build_script     = %q
%s
}
`, script, extra)
}

// rebuildPlanned is the plan of environment addr baking a new snapshot: an in-place
// update with snapshot_id unknown, and the unknown attributes too.
func rebuildPlanned(addr string, unknown ...string) resource.ConfigPlanChecks {
	checks := []plancheck.PlanCheck{
		plancheck.ExpectResourceAction(addr, plancheck.ResourceActionUpdate),
		plancheck.ExpectUnknownValue(addr, tfjsonpath.New("snapshot_id")),
	}
	for _, attr := range unknown {
		checks = append(checks, plancheck.ExpectUnknownValue(addr, tfjsonpath.New(attr)))
	}
	return resource.ConfigPlanChecks{PreApply: checks}
}

func TestAccEnvironment_buildInputsVersusLiveChanges(t *testing.T) {
	f := newFixture(t)
	snapshotStable := statecheck.CompareValue(compare.ValuesSame())
	countBuilds := buildCounter(t, f)
	accTest(t,
		resource.TestStep{
			Config: f.config(envHCL("echo v1 > /usr/local/share/marker", `  env = { MODE = "a" }`)),
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue(envAddr, tfjsonpath.New("status"), knownvalue.StringExact("Ready")),
				statecheck.ExpectKnownValue(envAddr, tfjsonpath.New("owner"), knownvalue.StringExact("alice")),
				statecheck.ExpectKnownValue(envAddr, tfjsonpath.New("snapshot_id"), knownvalue.StringRegexp(regexp.MustCompile(`^snap-[0-9a-f]{20}$`))),
				statecheck.ExpectKnownValue(envAddr, tfjsonpath.New("build_hash"), knownvalue.StringRegexp(regexp.MustCompile(`^[0-9a-f]{64}$`))),
				snapshotStable.AddStateValue(envAddr, tfjsonpath.New("snapshot_id")),
			},
			// The provider's default environment and this one: two builds.
			Check: countBuilds(2),
		},
		resource.TestStep{
			// env is live: an in-place update that keeps snapshot_id known and unchanged.
			Config: f.config(envHCL("echo v1 > /usr/local/share/marker", `  env = { MODE = "b" }`)),
			ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
				plancheck.ExpectResourceAction(envAddr, plancheck.ResourceActionUpdate),
				plancheck.ExpectKnownValue(envAddr, tfjsonpath.New("snapshot_id"), knownvalue.StringRegexp(regexp.MustCompile(`^snap-`))),
				plancheck.ExpectKnownValue(envAddr, tfjsonpath.New("status"), knownvalue.StringExact("Ready")),
			}},
			ConfigStateChecks: []statecheck.StateCheck{snapshotStable.AddStateValue(envAddr, tfjsonpath.New("snapshot_id"))},
			Check:             countBuilds(0),
		},
		resource.TestStep{
			// network is live too.
			Config: f.config(envHCL("echo v1 > /usr/local/share/marker", `  env = { MODE = "b" }
  network = { allow_domains = ["api.github.com", "*.pypi.org"] }`)),
			ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
				plancheck.ExpectResourceAction(envAddr, plancheck.ResourceActionUpdate),
				plancheck.ExpectKnownValue(envAddr, tfjsonpath.New("snapshot_id"), knownvalue.StringRegexp(regexp.MustCompile(`^snap-`))),
			}},
			ConfigStateChecks: []statecheck.StateCheck{snapshotStable.AddStateValue(envAddr, tfjsonpath.New("snapshot_id"))},
			Check:             countBuilds(0),
		},
		resource.TestStep{
			// build_script bakes a new snapshot: in place, snapshot_id and status unknown in the plan.
			Config: f.config(envHCL("echo v2 > /usr/local/share/marker", `  env = { MODE = "b" }
  network = { allow_domains = ["api.github.com", "*.pypi.org"] }`)),
			ConfigPlanChecks: rebuildPlanned(envAddr, "status"),
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue(envAddr, tfjsonpath.New("status"), knownvalue.StringExact("Ready")),
			},
			Check: resource.ComposeTestCheckFunc(countBuilds(1), func(s *terraformState) error {
				// The old snapshot is a previous version now, kept from collection
				// (keep_versions defaults to 3): reverting to it needs no build.
				hist, err := f.store().SnapshotHistory(t.Context(), "py")
				if err != nil || len(hist) != 2 {
					return fmt.Errorf("snapshot history = %v, %v; want two snapshots", hist, err)
				}
				if _, err := f.store().GetSnapshot(t.Context(), hist[0]); err != nil {
					return fmt.Errorf("old snapshot %s was not kept: %w", hist[0], err)
				}
				return nil
			}),
		},
		resource.TestStep{
			// cpu, memory, disk and triggers are build inputs too.
			Config: f.config(envHCL("echo v2 > /usr/local/share/marker", `  env = { MODE = "b" }
  cpu      = 2
  triggers = { index = "2026-11-29" }
  network = { allow_domains = ["api.github.com", "*.pypi.org"] }`)),
			ConfigPlanChecks: rebuildPlanned(envAddr),
			Check:            countBuilds(1),
		},
		resource.TestStep{
			ResourceName:            envAddr,
			ImportState:             true,
			ImportStateId:           "py",
			ImportStateVerify:       true,
			ImportStateVerifyIgnore: []string{"timeouts"},
		},
		resource.TestStep{
			// Renaming replaces.
			Config: f.config(`
resource "trueforge_environment" "py" {
  name             = "py2"
  sandbox_provider = trueforge_sandbox_provider.local.name
}
`),
			ConfigPlanChecks: plannedAction(envAddr, plancheck.ResourceActionReplace),
		},
	)
}

// TestAccEnvironment_eachBuildInputBakesANewSnapshot changes one build input per step:
// each alone plans an in-place update with snapshot_id unknown and bakes exactly one new
// snapshot. (image is a build input too, but the local backend accepts only "platform";
// TestAccDaytona_imageChangeBakesNewSnapshot covers it.)
func TestAccEnvironment_eachBuildInputBakesANewSnapshot(t *testing.T) {
	f := newFixture(t)
	const script = "echo inputs > /usr/local/share/marker"
	snapshotChanges := statecheck.CompareValue(compare.ValuesDiffer())
	hashChanges := statecheck.CompareValue(compare.ValuesDiffer())
	countBuilds := buildCounter(t, f)
	rebuilds := func(attr string, want knownvalue.Check, extra string) resource.TestStep {
		return resource.TestStep{
			Config:           f.config(envHCL(script, extra)),
			ConfigPlanChecks: rebuildPlanned(envAddr, "status"),
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue(envAddr, tfjsonpath.New(attr), want),
				statecheck.ExpectKnownValue(envAddr, tfjsonpath.New("status"), knownvalue.StringExact("Ready")),
				snapshotChanges.AddStateValue(envAddr, tfjsonpath.New("snapshot_id")),
				hashChanges.AddStateValue(envAddr, tfjsonpath.New("build_hash")),
			},
			Check: countBuilds(1),
		}
	}
	accTest(t,
		resource.TestStep{
			Config: f.config(envHCL(script, "")),
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue(envAddr, tfjsonpath.New("status"), knownvalue.StringExact("Ready")),
				snapshotChanges.AddStateValue(envAddr, tfjsonpath.New("snapshot_id")),
				hashChanges.AddStateValue(envAddr, tfjsonpath.New("build_hash")),
			},
			// The provider's default environment and this one.
			Check: countBuilds(2),
		},
		rebuilds("memory", knownvalue.Int64Exact(2), `  memory = 2`),
		rebuilds("disk", knownvalue.Int64Exact(4), `  memory = 2
  disk   = 4`),
		rebuilds("triggers", knownvalue.MapExact(map[string]knownvalue.Check{"index": knownvalue.StringExact("2026-11-29")}), `  memory   = 2
  disk     = 4
  triggers = { index = "2026-11-29" }`),
		rebuilds("triggers", knownvalue.MapExact(map[string]knownvalue.Check{"index": knownvalue.StringExact("2026-11-30")}), `  memory   = 2
  disk     = 4
  triggers = { index = "2026-11-30" }`),
		rebuilds("cpu", knownvalue.Int64Exact(2), `  memory   = 2
  disk     = 4
  triggers = { index = "2026-11-30" }
  cpu      = 2`),
	)
}

func TestAccEnvironment_identicalInputsBuildOnce(t *testing.T) {
	f := newFixture(t)
	two := `
resource "trueforge_environment" "a" {
  name             = "team-a"
  sandbox_provider = trueforge_sandbox_provider.local.name
  build_script     = "mkdir -p /opt/tool && echo 1 > /opt/tool/v"
  env              = { TEAM = "a" }
}
resource "trueforge_environment" "b" {
  name             = "team-b"
  sandbox_provider = trueforge_sandbox_provider.local.name
  build_script     = "mkdir -p /opt/tool && echo 1 > /opt/tool/v"
  network          = { block_all = true }
}
`
	same := statecheck.CompareValue(compare.ValuesSame())
	resource.ParallelTest(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProviders,
		Steps: []resource.TestStep{{
			Config: f.config(two),
			ConfigStateChecks: []statecheck.StateCheck{
				same.AddStateValue("trueforge_environment.a", tfjsonpath.New("snapshot_id")),
				same.AddStateValue("trueforge_environment.b", tfjsonpath.New("snapshot_id")),
			},
			Check: func(*terraformState) error {
				n, err := f.store().CountBuilds(t.Context())
				if err != nil {
					return err
				}
				if n != 2 { // default + one shared build
					return fmt.Errorf("builds = %d, want 2 (default and one shared build)", n)
				}
				return nil
			},
		}},
	})
}

func TestAccEnvironment_failedBuild(t *testing.T) {
	f := newFixture(t)
	accTest(t,
		resource.TestStep{
			Config:      f.config(envHCL("echo installing; echo 'E: package nope not found' >&2; exit 3", "")),
			ExpectError: regexp.MustCompile(`(?s)Snapshot Build Failed.*exit.*3.*package nope not found`),
		},
		resource.TestStep{
			// The failed build was saved (tainted), so fixing the script replaces it and succeeds.
			Config: f.config(envHCL("echo fixed", "")),
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue(envAddr, tfjsonpath.New("status"), knownvalue.StringExact("Ready")),
			},
		},
	)
}

func TestAccEnvironment_disappears(t *testing.T) {
	f := newFixture(t)
	testDisappears(t, f, f.config(envHCL("", "")), envAddr, `DELETE FROM environments WHERE name = 'py'`)
}

func TestAccEnvironment_drift(t *testing.T) {
	f := newFixture(t)
	cfg := f.config(envHCL("echo drift > /etc/drift", `  env = { MODE = "a" }`))
	accTest(t,
		resource.TestStep{Config: cfg},
		resource.TestStep{
			// A live attribute changed outside Terraform: plan reverts it in place.
			PreConfig: func() { f.exec(`UPDATE environments SET env = '{"MODE":"hacked"}' WHERE name = 'py'`) },
			Config:    cfg,
			ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
				plancheck.ExpectResourceAction(envAddr, plancheck.ResourceActionUpdate),
				plancheck.ExpectKnownValue(envAddr, tfjsonpath.New("snapshot_id"), knownvalue.StringRegexp(regexp.MustCompile(`^snap-`))),
			}},
		},
		resource.TestStep{
			// The snapshot was deleted from the backend: refresh sees it and plan rebuilds.
			PreConfig: func() {
				env, err := f.store().GetEnvironment(t.Context(), "py")
				if err != nil {
					t.Fatal(err)
				}
				cp, err := f.controlPlane()
				if err != nil {
					t.Fatal(err)
				}
				b, err := cp.builder(t.Context(), mustProvider(t, cp))
				if err != nil {
					t.Fatal(err)
				}
				if err := b.DeleteSnapshot(t.Context(), env.SnapshotID); err != nil {
					t.Fatal(err)
				}
			},
			Config:           cfg,
			ConfigPlanChecks: rebuildPlanned(envAddr),
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue(envAddr, tfjsonpath.New("status"), knownvalue.StringExact("Ready")),
			},
		},
	)
}

func TestAccEnvironment_rules(t *testing.T) {
	f := newFixture(t)
	accTest(t,
		resource.TestStep{
			Config: f.config(`
resource "trueforge_environment" "d" {
  name             = "default"
  sandbox_provider = trueforge_sandbox_provider.local.name
}`),
			ExpectError: regexp.MustCompile(`(?s)"default" is reserved`),
		},
		resource.TestStep{Config: f.config(envHCL("", `  memory = -1`)), ExpectError: regexp.MustCompile(`(?s)memory.*must be between 1 and 512`)},
		resource.TestStep{Config: f.config(envHCL("", `  disk = 0`)), ExpectError: regexp.MustCompile(`(?s)disk.*must be between 1 and 2048`)},
		resource.TestStep{Config: f.config(envHCL("", `  env = { "BAD-NAME" = "x" }`)), ExpectError: attrError("env", `env key "BAD-NAME": "BAD-NAME" is not an environment variable name`)},
		resource.TestStep{Config: f.config(envHCL("", `  network = { allow_domains = ["*"] }`)), ExpectError: regexp.MustCompile(`(?s)would match every host`)},
		resource.TestStep{Config: f.config(envHCL("", `  network = { allow_domains = ["*.com"] }`)), ExpectError: regexp.MustCompile(`(?s)whole top-level domain`)},
		resource.TestStep{Config: f.config(envHCL("", `  network = { allow_domains = ["https://api.github.com"] }`)), ExpectError: regexp.MustCompile(`(?s)has a scheme`)},
		resource.TestStep{Config: f.config(envHCL("", `  image = "ubuntu:24.04"`)), ExpectError: regexp.MustCompile(`(?s)Image Not Supported By Backend`)},
		resource.TestStep{
			// Nothing was written by any refused step.
			PreConfig: func() {
				envs, err := f.store().ListEnvironments(t.Context())
				if err != nil {
					t.Fatal(err)
				}
				for _, e := range envs {
					if e.Name != "default" {
						t.Errorf("refused environment %q was stored", e.Name)
					}
				}
			},
			Config: f.config(envHCL("", "")),
		},
		resource.TestStep{
			// "default" cannot be renamed to.
			Config: f.config(`
resource "trueforge_environment" "py" {
  name             = "default"
  sandbox_provider = trueforge_sandbox_provider.local.name
}`),
			ExpectError: regexp.MustCompile(`(?s)"default" is reserved`),
		},
		resource.TestStep{
			// The default environment cannot be imported (and so not deleted) as a resource.
			// The refused rename before it changed nothing: py keeps its name.
			PreConfig:    func() { expectEnvironments(t, f, "default", "py") },
			ResourceName: "trueforge_environment.other",
			Config: f.config(envHCL("", "")) + `resource "trueforge_environment" "other" {
  name             = "other"
  sandbox_provider = trueforge_sandbox_provider.local.name
}`,
			ImportState:   true,
			ImportStateId: "default",
			ExpectError:   regexp.MustCompile(`Reserved Environment`),
		},
		resource.TestStep{
			// The refused import wrote nothing: no "other", and the default environment is
			// still the provider's, reserved.
			PreConfig: func() { expectEnvironments(t, f, "default", "py") },
			Config:    f.config(envHCL("", "")),
		},
	)
}

// expectEnvironments asserts that the store holds exactly the named environments, with
// default still reserved and all of them owned by the fixture's owner: a refused step
// left nothing behind.
func expectEnvironments(t *testing.T, f *controlPlaneFixture, names ...string) {
	t.Helper()
	envs, err := f.store().ListEnvironments(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range envs {
		got = append(got, e.Name)
		if e.Name == "default" && !e.Reserved {
			t.Errorf("the default environment is no longer reserved: %+v", e)
		}
		if e.Owner != f.owner {
			t.Errorf("environment %q is owned by %q, want %q", e.Name, e.Owner, f.owner)
		}
	}
	slices.Sort(got)
	want := slices.Sorted(slices.Values(names))
	if !slices.Equal(got, want) {
		// Errorf, not Fatalf: the step goes on, so the post-test destroy still runs.
		t.Errorf("stored environments = %v, want %v", got, want)
	}
}

func TestAccEnvironment_ownedByCreator(t *testing.T) {
	f := newFixture(t)
	asBob := func(body string) string {
		return f.providerBlock("bob") + localProviderHCL + body
	}
	accTest(t,
		resource.TestStep{Config: f.config(envHCL("", `  env = { A = "1" }`))},
		resource.TestStep{
			Config:      asBob(envHCL("", `  env = { A = "2" }`)),
			ExpectError: regexp.MustCompile(`(?s)Environment Owned By Another User.*owned by "alice".*cannot be changed by "bob"`),
		},
		resource.TestStep{
			Config:      asBob(""),
			ExpectError: regexp.MustCompile(`(?s)Environment Owned By Another User.*cannot be deleted by "bob"`),
		},
		resource.TestStep{
			PreConfig: func() {
				env, err := f.store().GetEnvironment(t.Context(), "py")
				if err != nil || env.Env["A"] != "1" {
					t.Errorf("bob changed alice's environment: %+v, %v", env, err)
				}
			},
			Config: f.config(envHCL("", `  env = { A = "1" }`)),
		},
	)
}

func TestAccEnvironment_blockAllMakesAllowListInert(t *testing.T) {
	f := newFixture(t)
	accTest(t,
		resource.TestStep{Config: f.config(envHCL("", `  network = { allow_domains = ["api.github.com"] }`))},
		resource.TestStep{
			// Turning block_all on keeps the allow list but warns that it is inert; no rebuild.
			Config: f.config(envHCL("", `  network = { block_all = true, allow_domains = ["api.github.com"] }`)),
			ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
				plancheck.ExpectResourceAction(envAddr, plancheck.ResourceActionUpdate),
				plancheck.ExpectKnownValue(envAddr, tfjsonpath.New("snapshot_id"), knownvalue.StringRegexp(regexp.MustCompile(`^snap-`))),
			}},
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue(envAddr, tfjsonpath.New("network").AtMapKey("block_all"), knownvalue.Bool(true)),
			},
		},
	)
}
