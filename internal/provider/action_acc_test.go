package provider

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/tfversion"

	"github.com/trueforge/terraform-provider-trueforge/internal/controlplane"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/agents"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/backend"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/harnesstest"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/lifecycle"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/runner"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// Actions (action blocks, lifecycle.action_trigger, `apply -invoke`) came with Terraform
// 1.14; the Terraform 1.16 lane runs these tests, which skip with this reason under
// Terraform 1.11 and OpenTofu (which has no actions).
var actionVersionChecks = []tfversion.TerraformVersionCheck{actionsCLI}

// actionsCLI and queryCLI are what the Terraform 1.14 features need of the CLI.
var (
	actionsCLI = needs1_14{feature: "provider actions (action blocks, lifecycle.action_trigger)"}
	queryCLI   = needs1_14{feature: "`terraform query` and list resources"}
)

// needs1_14 skips a test of feature, which Terraform 1.14 brought and OpenTofu lacks,
// under any other CLI, saying which lane tests it: the one rule for every such test,
// whether it runs as a TestCase (TerraformVersionChecks) or drives the CLI itself
// (skipUnlessCLIHas).
type needs1_14 struct{ feature string }

func (n needs1_14) CheckTerraformVersion(_ context.Context, req tfversion.CheckTerraformVersionRequest, resp *tfversion.CheckTerraformVersionResponse) {
	switch {
	case strings.Contains(os.Getenv("TF_ACC_PROVIDER_HOST"), "opentofu"):
		resp.Skip = fmt.Sprintf("OpenTofu %s has no %s: the Terraform 1.16 lane tests them", req.TerraformVersion, n.feature)
	case req.TerraformVersion.LessThan(tfversion.Version1_14_0):
		resp.Skip = fmt.Sprintf("Terraform %s has no %s (they need 1.14 or later): the Terraform 1.16 lane tests them", req.TerraformVersion, n.feature)
	}
}

// actionTest runs steps as an acceptance test on the CLIs that have actions.
func actionTest(t *testing.T, steps ...resource.TestStep) {
	t.Helper()
	resource.ParallelTest(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProviders,
		TerraformVersionChecks:   actionVersionChecks,
		Steps:                    steps,
	})
}

// greetToolBuild installs greet-tool, the command the check below needs.
const greetToolBuild = `printf '#!/bin/sh\necho hello from greet-tool\n' > /usr/local/bin/greet-tool && chmod +x /usr/local/bin/greet-tool`

// helperCheck needs python3 and greet-tool, and a Q&A step stays out of the sandbox.
const helperCheck = `{
  "name": "helper still works",
  "steps": [
    {"name": "answers without a sandbox", "message": "2 + 2?", "turns": [{"text": "Four."}], "expect": {"no_sandbox": true}},
    {"name": "python3 runs", "message": "Which Python?",
     "turns": [{"tool_calls": [{"name": "exec", "arguments": {"command": "python3 -c 'print(6*7)'"}}]}, {"text": "42."}],
     "expect": {"exit_codes": [0], "output_matches": ["(?m)^42$"]}},
    {"name": "greet-tool runs", "message": "Greet.",
     "turns": [{"tool_calls": [{"name": "exec", "arguments": {"command": "greet-tool"}}]}, {"text": "Greeted."}],
     "expect": {"exit_codes": [0], "output_matches": ["hello from greet-tool"]}}
  ]
}`

// toolsHCL is environment "tools" (build script build, live env MODE = mode) whose
// updates trigger the agent check of agent "helper" on it, then extra.
func toolsHCL(build, mode, extra string) string {
	return fmt.Sprintf(`
resource "trueforge_environment" "tools" {
  name             = "tools"
  sandbox_provider = trueforge_sandbox_provider.local.name
  build_script     = %q
  env              = { MODE = %q }
  lifecycle {
    action_trigger {
      events  = [after_update]
      actions = [action.trueforge_agent_check.helper]
    }
  }
}

resource "trueforge_agent" "helper" {
  name    = "helper"
  model   = { provider = "scripted", script = "[]" }
  sandbox = { enabled = true, environment = trueforge_environment.tools.name }
}

action "trueforge_agent_check" "helper" {
  config {
    agent = "helper"
    check = %q
  }
}
%s`, build, mode, helperCheck, extra)
}

// The agent check as users run it: triggered by the environment's update, it passes
// while the environment gives the agent what the check needs, and fails the apply,
// naming the step, once an environment change removes greet-tool. Every check's sandbox
// is deleted after it.
func TestAccActionAgentCheck_failsTheApplyWhenTheEnvironmentLosesACommand(t *testing.T) {
	f := newFixture(t)
	noSandboxLeft := func(*terraformState) error {
		recs, err := f.store().ListSessionSandboxes(context.Background())
		if err != nil {
			return err
		}
		for _, r := range recs {
			if r.State != store.SandboxStateDeleted {
				return fmt.Errorf("session %s's sandbox %s is %s after the check; want deleted", r.SessionID, r.SandboxID, r.State)
			}
		}
		if len(recs) == 0 {
			return fmt.Errorf("no check ran: no session sandbox at all")
		}
		return nil
	}
	actionTest(t,
		resource.TestStep{Config: f.config(toolsHCL(greetToolBuild, "one", ""))},
		// A check file that is wrong is refused at plan, naming the field.
		resource.TestStep{
			Config:      f.config(strings.Replace(toolsHCL(greetToolBuild, "one", ""), `exit_codes`, `exit_code`, 1)),
			ExpectError: expectError(`Invalid Agent Check .* unknown field "exit_code"`),
			PlanOnly:    true,
		},
		// A live change: the update triggers the check, which passes.
		resource.TestStep{Config: f.config(toolsHCL(greetToolBuild, "two", "")), Check: noSandboxLeft},
		// The build no longer installs greet-tool: the apply that made the change fails.
		resource.TestStep{
			Config:      f.config(toolsHCL("echo no greet-tool > /opt/note", "two", "")),
			ExpectError: expectError(`Agent Check Failed .* Agent "helper" failed check "helper still works" at step "greet-tool runs": .* exit_codes: want \[0\] from the step's exec calls, got \[127\]`),
		},
	)
}

// startSandbox makes a running sandbox for a new session of agent, as the harness does.
func (f *controlPlaneFixture) startSandbox(t *testing.T, agent string) string {
	t.Helper()
	ctx := context.Background()
	st := f.store()
	a, err := agents.Load(ctx, st, agent)
	if err != nil {
		t.Fatal(err)
	}
	id, err := (&runner.Runner{Store: st, Agent: a}).NewSession(ctx, f.owner)
	if err != nil {
		t.Fatal(err)
	}
	m := f.sandboxes()
	l, err := m.Acquire(ctx, id, a)
	if err != nil {
		t.Fatal(err)
	}
	l.Release(ctx)
	return id
}

// sandboxes is a lifecycle manager on the fixture's control plane, as the harness's.
func (f *controlPlaneFixture) sandboxes() *lifecycle.Manager {
	st := f.store()
	return lifecycle.New(lifecycle.Config{Store: st, Runtimes: backend.New(controlplane.New(st))})
}

// stopBase is environment "box" with agents "one" and "two" on it.
const stopBase = `
resource "trueforge_environment" "box" {
  name             = "box"
  sandbox_provider = trueforge_sandbox_provider.local.name
  build_script     = "echo box > /opt/box"
}

resource "trueforge_agent" "one" {
  name    = "one"
  model   = { provider = "scripted", script = "[]" }
  sandbox = { enabled = true, environment = trueforge_environment.box.name }
}

resource "trueforge_agent" "two" {
  name    = "two"
  model   = { provider = "scripted", script = "[]" }
  sandbox = { enabled = true, environment = trueforge_environment.box.name }
}
`

// stopHCL is stopBase and a terraform_data whose creation or update (input) triggers
// trueforge_sandboxes_stop with target ("agent = ..." or "environment = ...").
func stopHCL(input, target string) string {
	return stopBase + fmt.Sprintf(`
action "trueforge_sandboxes_stop" "leak" {
  config {
    %s
  }
}

resource "terraform_data" "leak" {
  input      = %q
  depends_on = [trueforge_agent.one, trueforge_agent.two]
  lifecycle {
    action_trigger {
      events  = [after_create, after_update]
      actions = [action.trueforge_sandboxes_stop.leak]
    }
  }
}
`, target, input)
}

// trueforge_sandboxes_stop stops the running sandboxes of one agent (not another's on
// the same environment), then of a whole environment; it fails on a name that does not
// exist.
func TestAccActionSandboxesStop_stopsWhatItNamesOnly(t *testing.T) {
	f := newFixture(t)
	sessions := map[string][]string{}
	start := func(*terraformState) error {
		for _, a := range []string{"one", "one", "two"} {
			sessions[a] = append(sessions[a], f.startSandbox(t, a))
		}
		return nil
	}
	states := func(want map[string]string) resource.TestCheckFunc {
		return func(*terraformState) error {
			for agent, state := range want {
				for _, id := range sessions[agent] {
					rec, err := f.store().GetSessionSandbox(context.Background(), id)
					if err != nil {
						return err
					}
					if rec.State != state {
						return fmt.Errorf("agent %s's sandbox %s is %s; want %s", agent, rec.SandboxID, rec.State, state)
					}
				}
			}
			return nil
		}
	}
	actionTest(t,
		resource.TestStep{Config: f.config(stopBase), Check: start},
		resource.TestStep{Config: f.config(stopHCL("first", `agent = trueforge_agent.one.name`)),
			Check: states(map[string]string{"one": store.SandboxStateStopped, "two": store.SandboxStateRunning})},
		resource.TestStep{Config: f.config(stopHCL("second", `environment = trueforge_environment.box.name`)),
			Check: resource.ComposeTestCheckFunc(states(map[string]string{"one": store.SandboxStateStopped, "two": store.SandboxStateStopped}),
				// Deleted before the destroy removes their sandbox provider.
				func(*terraformState) error {
					for _, ids := range sessions {
						for _, id := range ids {
							if err := f.sandboxes().Delete(context.Background(), id); err != nil {
								return err
							}
						}
					}
					return nil
				})},
		resource.TestStep{Config: f.config(stopHCL("third", `environment = "nope"`)),
			ExpectError: expectError(`Environment Not Found .* No environment "nope" is in the control plane`)},
	)
}

// invokeHCL is a terraform_data whose creation or update (input) triggers action, an
// action block's address, declared in block.
func invokeHCL(input, block, action string) string {
	return block + fmt.Sprintf(`
resource "terraform_data" "go" {
  input = %q
  lifecycle {
    action_trigger {
      events  = [after_create, after_update]
      actions = [%s]
    }
  }
}
`, input, action)
}

// Authority over an environment's sandboxes and builds and an agent's checks follows
// ownership: another team (here alice, against the environment and agent of team
// "tester", made outside this configuration) may neither stop the sandboxes, nor run the
// check, nor rebuild the environment. The refusal comes before anything is read from a
// sandbox, run or built.
func TestAccActionOwnership_anotherTeamMayNotStopCheckOrRebuild(t *testing.T) {
	f := newFixture(t)
	st := f.store()
	harnesstest.AddEnvironment(t, st, "theirs", sandbox.StatusReady)
	harnesstest.AddAgent(t, st, "their-agent", "theirs", harnesstest.AgentSpec{"model": harnesstest.Script(), "sandbox": harnesstest.Sandbox("theirs", 5, 60, 120)})
	const check = `{"steps": [{"message": "hi", "turns": [{"text": "hello"}], "expect": {"no_sandbox": true}}]}`
	actionTest(t,
		resource.TestStep{
			Config: f.providerBlock(f.owner) + invokeHCL("1", `
action "trueforge_sandboxes_stop" "theirs" {
  config {
    environment = "theirs"
  }
}
`, "action.trueforge_sandboxes_stop.theirs"),
			ExpectError: expectError(`Environment Owned By Another User .* Environment "theirs" is owned by "tester" and cannot be stopped \(its sandboxes\) by "alice"`),
		},
		resource.TestStep{
			Config: f.providerBlock(f.owner) + invokeHCL("2", `
action "trueforge_sandboxes_stop" "theirs" {
  config {
    agent = "their-agent"
  }
}
`, "action.trueforge_sandboxes_stop.theirs"),
			ExpectError: expectError(`Agent Owned By Another User .* Agent "their-agent" is owned by "tester" and cannot be stopped \(its sandboxes\) by "alice"`),
		},
		resource.TestStep{
			Config: f.providerBlock(f.owner) + invokeHCL("3", fmt.Sprintf(`
action "trueforge_agent_check" "theirs" {
  config {
    agent = "their-agent"
    check = %q
  }
}
`, check), "action.trueforge_agent_check.theirs"),
			ExpectError: expectError(`Agent Owned By Another User .* Agent "their-agent" is owned by "tester" and cannot be checked by "alice"`),
		},
		resource.TestStep{
			Config: f.providerBlock(f.owner) + invokeHCL("4", `
action "trueforge_environment_rebuild" "theirs" {
  config {
    environment = "theirs"
  }
}
`, "action.trueforge_environment_rebuild.theirs"),
			ExpectError: expectError(`Environment Owned By Another User .* Environment "theirs" is owned by "tester" and cannot be rebuilt by "alice"`),
		},
	)
}
