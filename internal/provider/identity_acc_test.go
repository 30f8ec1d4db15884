package provider

import (
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	"github.com/hashicorp/terraform-plugin-testing/tfversion"
)

// Resource identity needs Terraform (or OpenTofu) 1.12 or later: scripts/test.sh runs
// these tests under Terraform 1.16 (scripts/ensure-terraform.sh) and OpenTofu 1.12,
// where they must pass, and they skip with this reason under Terraform 1.11.
// TestAccImport_stringIDs (below) covers string ids on every CLI.
var identityVersionChecks = []tfversion.TerraformVersionCheck{tfversion.SkipBelow(tfversion.Version1_12_0)}

// nameIdentity checks an identity of {name}, equal to the name in state.
func nameIdentity(addr, name string) []statecheck.StateCheck {
	return []statecheck.StateCheck{
		statecheck.ExpectIdentity(addr, map[string]knownvalue.Check{"name": knownvalue.StringExact(name)}),
		statecheck.ExpectIdentityValueMatchesState(addr, tfjsonpath.New("name")),
	}
}

// importByIdentity is a plan-only step with an import block naming addr by the identity
// the previous step stored: it must plan an import and nothing else for addr, with the
// same identity. config is what the import block joins (no state: a fresh directory).
func importByIdentity(addr, config string) resource.TestStep {
	return resource.TestStep{
		Config:          config,
		ResourceName:    addr,
		ImportState:     true,
		ImportStateKind: resource.ImportBlockWithResourceIdentity,
	}
}

// identityTest runs steps as an acceptance test on the CLIs that have resource identity.
func identityTest(t *testing.T, steps ...resource.TestStep) {
	resource.ParallelTest(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProviders,
		TerraformVersionChecks:   identityVersionChecks,
		Steps:                    steps,
	})
}

// updateKeepsIdentity is a step that applies config as an in-place update of addr,
// whose identity must still pass checks.
func updateKeepsIdentity(config, addr string, checks []statecheck.StateCheck) resource.TestStep {
	return resource.TestStep{
		Config:            config,
		ConfigPlanChecks:  plannedAction(addr, plancheck.ResourceActionUpdate),
		ConfigStateChecks: checks,
	}
}

// The import steps' configurations name their dependencies literally: the import plans
// in a directory of its own, where resources the configuration references would be
// planned for creation (and a second sandbox provider is refused).

func TestAccIdentity_sandboxProvider(t *testing.T) {
	f := newFixture(t)
	identityTest(t,
		resource.TestStep{Config: f.config(""), ConfigStateChecks: nameIdentity(providerAddr, "local")},
		importByIdentity(providerAddr, f.config("")),
	)
}

func TestAccIdentity_environment(t *testing.T) {
	f := newFixture(t)
	identityTest(t,
		resource.TestStep{Config: f.config(envHCL("", "")), ConfigStateChecks: nameIdentity(envAddr, "py")},
		// An in-place update keeps the identity.
		updateKeepsIdentity(f.config(envHCL("", `  env = { A = "1" }`)), envAddr, nameIdentity(envAddr, "py")),
		importByIdentity(envAddr, f.providerBlock(f.owner)+`
resource "trueforge_environment" "py" {
  name             = "py"
  sandbox_provider = "local"
  build_script     = ""
  env              = { A = "1" }
}
`),
	)
}

func TestAccIdentity_agent(t *testing.T) {
	f := newFixture(t)
	identityTest(t,
		resource.TestStep{Config: f.config(agentHCL("helper", afterProvider)), ConfigStateChecks: nameIdentity(agentAddr, "helper")},
		updateKeepsIdentity(f.config(agentHCL("helper", afterProvider+"\n  max_turns = 7")), agentAddr, nameIdentity(agentAddr, "helper")),
		importByIdentity(agentAddr, f.providerBlock(f.owner)+agentHCL("helper", "  max_turns = 7")),
	)
}

func TestAccIdentity_secret(t *testing.T) {
	f := newFixture(t)
	env := envHCL("", "")
	identity := []statecheck.StateCheck{
		statecheck.ExpectIdentity(secretAddr, map[string]knownvalue.Check{
			"environment": knownvalue.StringExact("py"),
			"env_name":    knownvalue.StringExact("GITHUB_TOKEN"),
		}),
		statecheck.ExpectIdentityValueMatchesState(secretAddr, tfjsonpath.New("environment")),
		statecheck.ExpectIdentityValueMatchesState(secretAddr, tfjsonpath.New("env_name")),
	}
	identityTest(t,
		resource.TestStep{Config: f.config(env + secretHCL(`  value = "ghp_first"`, `["api.github.com"]`)), ConfigStateChecks: identity},
		updateKeepsIdentity(f.config(env+secretHCL(`  value = "ghp_first"`, `["api.github.com", "uploads.github.com"]`)), secretAddr, identity),
		resource.TestStep{
			// The value is never imported (its plaintext does not enter state through
			// an import), so the import plans one in-place update: the configured value
			// sealed again.
			Config: f.providerBlock(f.owner) + `
resource "trueforge_secret" "gh" {
  environment = "py"
  env_name    = "GITHUB_TOKEN"
  hosts       = ["api.github.com", "uploads.github.com"]
  value       = "ghp_first"
}
`,
			ResourceName:       secretAddr,
			ImportState:        true,
			ImportStateKind:    resource.ImportBlockWithResourceIdentity,
			ExpectNonEmptyPlan: true,
			ImportPlanChecks: resource.ImportPlanChecks{PreApply: []plancheck.PlanCheck{
				plancheck.ExpectResourceAction(secretAddr, plancheck.ResourceActionUpdate),
				plancheck.ExpectKnownValue(secretAddr, tfjsonpath.New("hosts"), knownvalue.ListExact([]knownvalue.Check{
					knownvalue.StringExact("api.github.com"), knownvalue.StringExact("uploads.github.com"),
				})),
			}},
		},
	)
}

// TestAccImport_stringIDs imports every resource by its string id, with `terraform
// import` and with an import block's id, on every CLI (before 1.12 there is no identity;
// from 1.12 on the read that follows the import records one).
func TestAccImport_stringIDs(t *testing.T) {
	f := newFixture(t)
	config := f.config(envHCL("", "") + agentHCL("helper", afterProvider) + secretHCL(`  value = "ghp_first"`, `["api.github.com"]`))
	byCommand := func(addr, id string, ignore ...string) resource.TestStep {
		return resource.TestStep{
			ResourceName: addr, ImportState: true, ImportStateId: id,
			ImportStateVerify: true, ImportStateVerifyIgnore: append([]string{"timeouts"}, ignore...),
		}
	}
	byBlock := func(addr, id, config string, nonEmpty bool) resource.TestStep {
		return resource.TestStep{
			Config: config, ResourceName: addr, ImportState: true, ImportStateId: id,
			ImportStateKind: resource.ImportBlockWithID, ExpectNonEmptyPlan: nonEmpty,
		}
	}
	literal := f.providerBlock(f.owner)
	accTest(t,
		resource.TestStep{Config: config},
		byCommand(providerAddr, "local"),
		byCommand(envAddr, "py"),
		byCommand(agentAddr, "helper"),
		byCommand(secretAddr, "py/GITHUB_TOKEN", "value"),
		byBlock(providerAddr, "local", f.config(""), false),
		byBlock(envAddr, "py", literal+`
resource "trueforge_environment" "py" {
  name             = "py"
  sandbox_provider = "local"
  build_script     = ""
}
`, false),
		byBlock(agentAddr, "helper", literal+agentHCL("helper", ""), false),
		byBlock(secretAddr, "py/GITHUB_TOKEN", literal+`
resource "trueforge_secret" "gh" {
  environment = "py"
  env_name    = "GITHUB_TOKEN"
  hosts       = ["api.github.com"]
  value       = "ghp_first"
}
`, true),
	)
}
