package provider

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/go-version"
	"github.com/hashicorp/terraform-plugin-testing/tfversion"
)

// skipWithoutActions skips a cliRunner test when r's CLI has no actions.
func skipWithoutActions(t *testing.T, r *cliRunner) {
	t.Helper()
	skipUnlessCLIHas(t, actionsCLI, r.must("version", "-json"))
}

// skipUnlessCLIHas skips t with need's reason when the CLI whose `version -json` output
// is versionJSON lacks what need names (terraform-plugin-testing's version checks do it
// for a TestCase).
func skipUnlessCLIHas(t *testing.T, need needs1_14, versionJSON string) {
	t.Helper()
	var v struct {
		Version string `json:"terraform_version"`
	}
	if err := json.Unmarshal([]byte(versionJSON), &v); err != nil {
		t.Fatalf("reading the CLI's version: %v", err)
	}
	var resp tfversion.CheckTerraformVersionResponse
	need.CheckTerraformVersion(context.Background(), tfversion.CheckTerraformVersionRequest{TerraformVersion: version.Must(version.NewVersion(v.Version))}, &resp)
	if resp.Skip != "" {
		t.Skip(resp.Skip)
	}
}

// checkModule is a module whose only resource runs an agent check when it is created:
// the way `terraform test` runs one (agent-checks-in-ci guide, section 3).
// The tests' provider is served under its implied address (providerAddress), so neither
// this module nor the configuration names a source.
const checkModule = `
variable "agent" { type = string }
variable "check_file" { type = string }

action "trueforge_agent_check" "this" {
  config {
    agent = var.agent
    check = file(var.check_file)
  }
}

resource "terraform_data" "check" {
  input = var.check_file
  lifecycle {
    action_trigger {
      events  = [after_create]
      actions = [action.trueforge_agent_check.this]
    }
  }
}
`

// cliCheck is a one-step check that runs command and expects it to succeed.
func cliCheck(command string) string {
	b, _ := json.Marshal(map[string]any{"name": "cli", "steps": []any{map[string]any{
		"name": "runs " + command, "message": "go",
		"turns":  []any{map[string]any{"tool_calls": []any{map[string]any{"name": "exec", "arguments": map[string]any{"command": command}}}}, map[string]any{"text": "done"}},
		"expect": map[string]any{"exit_codes": []int{0}},
	}}})
	return string(b)
}

// actionCLI is a Terraform CLI runner for the action tests and its control plane, skipped where the CLI has
// no actions, with a fresh control plane that the provider reads from the environment,
// as in CI: every provider configuration of `terraform test` (the test file's and the
// run module's) then names the same one. Its callers are not parallel: the variables
// are the process's.
func actionCLI(t *testing.T) (*controlPlaneFixture, *cliRunner) {
	t.Helper()
	testAccPreCheck(t)
	f := newFixture(t)
	r := newCLIRunner(t, freshProviders)
	skipWithoutActions(t, r)
	t.Setenv(envDatabaseURL, f.dbURL)
	t.Setenv(envOwner, f.owner)
	return f, r
}

// The agent check from the command line, as the guide shows it: `terraform apply
// -invoke` runs it on demand (with its progress messages), and `terraform test` runs it
// through a module whose resource triggers it; both exit 0 while the check holds and 1,
// with the failed step, once it does not.
func TestAccActionAgentCheck_invokeAndTerraformTest(t *testing.T) {
	_, r := actionCLI(t)
	r.write("main.tf", localProviderHCL+`
resource "trueforge_environment" "tools" {
  name             = "tools"
  sandbox_provider = trueforge_sandbox_provider.local.name
  build_script     = "echo hi > /opt/hi"
}

resource "trueforge_agent" "helper" {
  name    = "helper"
  model   = { provider = "scripted", script = "[]" }
  sandbox = { enabled = true, environment = trueforge_environment.tools.name }
}

action "trueforge_agent_check" "helper" {
  config {
    agent = "helper"
    check = file("${path.module}/checks/helper.json")
  }
}
`)
	for _, d := range []string{"checks", "tests/agent-check"} {
		if err := os.MkdirAll(filepath.Join(r.dir, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	r.write("checks/helper.json", cliCheck("cat /opt/hi && python3 -V"))
	r.write("tests/agent-check/main.tf", checkModule)
	r.write("tests/agent.tftest.hcl", `run "helper_still_works" {
  command = apply
  module {
    source = "./tests/agent-check"
  }
  variables {
    agent      = "helper"
    check_file = "checks/helper.json"
  }
}
`)
	r.init()
	r.apply()
	t.Cleanup(func() { r.run("destroy", "-auto-approve", "-no-color") })

	invoke := func() cliResult {
		return r.run("apply", "-invoke=action.trueforge_agent_check.helper", "-auto-approve", "-no-color")
	}
	if res := invoke(); res.code != 0 || !strings.Contains(res.stdout, `agent "helper": check "cli" passed: 1 steps`) {
		t.Fatalf("invoke of a passing check: %s", res)
	}
	if res := r.run("test", "-no-color"); res.code != 0 || !strings.Contains(res.stdout, "1 passed, 0 failed") {
		t.Fatalf("terraform test of a passing check: %s", res)
	}

	r.write("checks/helper.json", cliCheck("cat /opt/hi && no-such-tool"))
	failed := expectError(`Agent Check Failed .* Agent "helper" failed check "cli" at step "runs cat /opt/hi && no-such-tool": .* exit_codes: want \[0\] from the step's exec calls, got \[127\]`)
	if res := invoke(); res.code != 1 || !failed.MatchString(res.stderr) {
		t.Fatalf("invoke of a failing check: %s", res)
	}
	if res := r.run("test", "-no-color"); res.code != 1 || !failed.MatchString(res.stderr+res.stdout) || !strings.Contains(res.stdout, "0 passed, 1 failed") {
		t.Fatalf("terraform test of a failing check: %s", res)
	}
}

// The rebuild on demand, as its example shows it: `terraform apply -invoke` builds the
// environment again (its progress messages name the new snapshot and the previous one),
// and the next `plan -detailed-exitcode` exits 0: no change.
func TestAccActionEnvironmentRebuild_invokeThenEmptyPlan(t *testing.T) {
	f, r := actionCLI(t)
	r.write("main.tf", localProviderHCL+`
resource "trueforge_environment" "py" {
  name             = "py"
  sandbox_provider = trueforge_sandbox_provider.local.name
  build_script     = "echo hi > /opt/hi"
}

action "trueforge_environment_rebuild" "py" {
  config {
    environment = trueforge_environment.py.name
  }
}
`)
	r.init()
	r.apply()
	t.Cleanup(func() { r.run("destroy", "-auto-approve", "-no-color") })
	before, err := f.store().GetEnvironment(t.Context(), "py")
	if err != nil {
		t.Fatal(err)
	}
	res := r.run("apply", "-invoke=action.trueforge_environment_rebuild.py", "-auto-approve", "-no-color")
	after, err := f.store().GetEnvironment(t.Context(), "py")
	if err != nil {
		t.Fatal(err)
	}
	if res.code != 0 || after.SnapshotID == before.SnapshotID ||
		!strings.Contains(res.stdout, `environment "py": now on snapshot `+after.SnapshotID) || !strings.Contains(res.stdout, before.SnapshotID+" is a previous version") {
		t.Fatalf("invoke of the rebuild (snapshot %s before, %s after): %s", before.SnapshotID, after.SnapshotID, res)
	}
	if res := r.run("plan", "-detailed-exitcode", "-no-color"); res.code != 0 {
		t.Fatalf("plan after the rebuild: want exit 0 (no changes): %s", res)
	}
}
