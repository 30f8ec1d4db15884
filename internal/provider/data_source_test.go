package provider

import (
	"fmt"
	"regexp"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/compare"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
)

// dataSourceStep is a step that reads data source typ (as label) with attr = value on top
// of config, which must fail with want: a lookup of what does not exist, or a malformed
// value refused naming the attribute.
func dataSourceStep(config, typ, label, attr, value string, want *regexp.Regexp) resource.TestStep {
	return resource.TestStep{
		Config:      config + fmt.Sprintf("\ndata %q %q {\n  %s = %q\n}\n", typ, label, attr, value),
		ExpectError: want,
	}
}

func TestAccDataSourceEnvironment(t *testing.T) {
	f := newFixture(t)
	cfg := f.config(`
resource "trueforge_environment" "py" {
  name             = "py"
  sandbox_provider = trueforge_sandbox_provider.local.name
  build_script     = "mkdir -p /opt/py"
  memory           = 2
  env              = { MODE = "test" }
  triggers         = { index = "2026-01-01" }
  network          = { allow_domains = ["pypi.org"] }
}

data "trueforge_environment" "default" {
  name = trueforge_sandbox_provider.local.default_environment
}

data "trueforge_environment" "py" {
  name = trueforge_environment.py.name
}
`)
	const def, py, res = "data.trueforge_environment.default", "data.trueforge_environment.py", "trueforge_environment.py"
	same := func(attr string) statecheck.StateCheck {
		return statecheck.CompareValuePairs(res, tfjsonpath.New(attr), py, tfjsonpath.New(attr), compare.ValuesSame())
	}
	accTest(t,
		resource.TestStep{
			Config: cfg,
			ConfigStateChecks: []statecheck.StateCheck{
				// The reserved default environment: platform image, 1 CPU, 1 GB, 3 GB.
				statecheck.ExpectKnownValue(def, tfjsonpath.New("image"), knownvalue.StringExact("platform")),
				statecheck.ExpectKnownValue(def, tfjsonpath.New("cpu"), knownvalue.Int64Exact(1)),
				statecheck.ExpectKnownValue(def, tfjsonpath.New("memory"), knownvalue.Int64Exact(1)),
				statecheck.ExpectKnownValue(def, tfjsonpath.New("disk"), knownvalue.Int64Exact(3)),
				statecheck.ExpectKnownValue(def, tfjsonpath.New("build_script"), knownvalue.StringExact("")),
				statecheck.ExpectKnownValue(def, tfjsonpath.New("status"), knownvalue.StringExact("Ready")),
				statecheck.ExpectKnownValue(def, tfjsonpath.New("sandbox_provider"), knownvalue.StringExact("local")),
				statecheck.ExpectKnownValue(def, tfjsonpath.New("owner"), knownvalue.StringExact("alice")),
				statecheck.ExpectKnownValue(def, tfjsonpath.New("env"), knownvalue.MapSizeExact(0)),
				statecheck.ExpectKnownValue(def, tfjsonpath.New("triggers"), knownvalue.MapSizeExact(0)),
				statecheck.ExpectKnownValue(def, tfjsonpath.New("snapshot_id"), knownvalue.StringRegexp(regexp.MustCompile(`^snap-`))),
				statecheck.ExpectKnownValue(def, tfjsonpath.New("network"), knownvalue.ObjectExact(map[string]knownvalue.Check{
					"allow_domains":      knownvalue.ListSizeExact(0),
					"block_all":          knownvalue.Bool(false),
					"allow_cidrs":        knownvalue.ListSizeExact(0),
					"package_indexes":    knownvalue.ListSizeExact(0),
					"package_indexes_in": knownvalue.StringExact("build"),
				})),
				// A user's environment reads back what the resource says.
				same("snapshot_id"), same("build_hash"), same("status"), same("owner"), same("image"),
				same("build_script"), same("cpu"), same("memory"), same("disk"), same("env"), same("triggers"),
				// The resource keeps the configuration's nulls; the data source reads empty lists.
				statecheck.CompareValuePairs(res, tfjsonpath.New("network").AtMapKey("allow_domains"), py, tfjsonpath.New("network").AtMapKey("allow_domains"), compare.ValuesSame()),
				statecheck.CompareValuePairs(res, tfjsonpath.New("network").AtMapKey("block_all"), py, tfjsonpath.New("network").AtMapKey("block_all"), compare.ValuesSame()),
				statecheck.ExpectKnownValue(py, tfjsonpath.New("status"), knownvalue.StringExact("Ready")),
				statecheck.ExpectKnownValue(py, tfjsonpath.New("env"), knownvalue.MapExact(map[string]knownvalue.Check{"MODE": knownvalue.StringExact("test")})),
			},
		},
		dataSourceStep(cfg, "trueforge_environment", "ghost", "name", "ghost", expectError(`Environment Not Found.*"ghost"`)),
	)
}

func TestAccDataSourceAgent(t *testing.T) {
	f := newFixture(t)
	pdf := skillDir(t, "pdf", nil)
	cfg := f.config(`
resource "trueforge_environment" "py" {
  name             = "py"
  sandbox_provider = trueforge_sandbox_provider.local.name
  build_script     = "mkdir -p /opt/py"
}
` + agentHCL("reader", `
  description  = "Reads"
  instructions = "Be brief."
  mcp_servers  = [{ name = "github", url = "https://api.githubcopilot.com/mcp/", credential_env = "GITHUB_MCP_TOKEN" }]
  skills       = [{ name = "pdf", path = "`+pdf+`" }]
  code_mode    = true
  sandbox      = { enabled = true, environment = trueforge_environment.py.name, delete_after_minutes = 20000 }
`) + `
data "trueforge_agent" "a" {
  name = trueforge_agent.a.name
}
`)
	const ds = "data.trueforge_agent.a"
	var checks []statecheck.StateCheck
	for _, attr := range []string{"id", "name", "owner", "description", "instructions", "model", "mcp_servers", "skills", "code_mode", "sandbox", "max_turns", "token_budget"} {
		checks = append(checks, statecheck.CompareValuePairs(agentAddr, tfjsonpath.New(attr), ds, tfjsonpath.New(attr), compare.ValuesSame()))
	}
	checks = append(checks,
		statecheck.ExpectKnownValue(ds, tfjsonpath.New("sandbox").AtMapKey("environment"), knownvalue.StringExact("py")),
		statecheck.ExpectKnownValue(ds, tfjsonpath.New("sandbox").AtMapKey("delete_after_minutes"), knownvalue.Int64Exact(20000)),
		statecheck.ExpectKnownValue(ds, tfjsonpath.New("mcp_servers").AtSliceIndex(0).AtMapKey("credential_env"), knownvalue.StringExact("GITHUB_MCP_TOKEN")),
		statecheck.ExpectKnownValue(ds, tfjsonpath.New("model").AtMapKey("provider"), knownvalue.StringExact("scripted")),
	)
	accTest(t,
		resource.TestStep{Config: cfg, ConfigStateChecks: checks},
		dataSourceStep(cfg, "trueforge_agent", "ghost", "name", "ghost", expectError(`Agent Not Found.*"ghost"`)),
	)
}
