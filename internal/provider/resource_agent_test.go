package provider

import (
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	"github.com/trueforge/terraform-provider-trueforge/internal/agentspec"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/agents"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

const agentAddr = "trueforge_agent.a"

// agentHCL renders agent "a" with the given name and body. The scripted model needs no
// credentials, so it is the default model of these tests.
func agentHCL(name, body string) string {
	if !strings.Contains(body, "model =") {
		body = `  model = { provider = "scripted", script = "[]" }` + "\n" + body
	}
	return fmt.Sprintf(`
resource "trueforge_agent" "a" {
  name = %q
%s
}
`, name, body)
}

// expectError matches a diagnostic however Terraform wraps it: each space of pattern
// matches any run of white space, and . matches newlines.
func expectError(pattern string) *regexp.Regexp {
	return regexp.MustCompile(`(?s)` + strings.ReplaceAll(pattern, " ", `\s+`))
}

// agentEnvHCL renders an environment with the given name and build script; wait=false
// returns while it builds.
func agentEnvHCL(name, script string, wait bool) string {
	return fmt.Sprintf(`
resource "trueforge_environment" %[1]q {
  name             = %[1]q
  sandbox_provider = trueforge_sandbox_provider.local.name
  build_script     = %[2]q
  wait_for_ready   = %[3]t
}
`, name, script, wait)
}

// afterProvider makes an agent on the default environment wait for the sandbox provider
// that creates it.
const afterProvider = `  depends_on = [trueforge_sandbox_provider.local]`

// storedAgentSpec returns agent name's stored spec and the environment its row
// references ("" for none).
func storedAgentSpec(t *testing.T, f *controlPlaneFixture, name string) (agentspec.Spec, string, error) {
	t.Helper()
	a, err := f.store().GetAgent(t.Context(), name)
	if err != nil {
		return agentspec.Spec{}, "", err
	}
	s, err := agentspec.Decode(a.Spec)
	if err != nil {
		return s, "", fmt.Errorf("stored spec %s: %w", a.Spec, err)
	}
	return s, a.Environment, nil
}

// harnessRuns checks that trueforge-harness loads agent name from the fixture's control
// plane with spec want (and, when its sandbox is on, the environment want names): what
// the provider stored is what the harness runs.
func harnessRuns(t *testing.T, f *controlPlaneFixture, name string, want agents.Spec) error {
	t.Helper()
	a, err := agents.Load(t.Context(), f.store(), name)
	if err != nil {
		return fmt.Errorf("the harness cannot load agent %q: %w", name, err)
	}
	if !reflect.DeepEqual(a.Spec, want) {
		return fmt.Errorf("the harness runs agent %q as\n%+v\nwant\n%+v", name, a.Spec, want)
	}
	if env := a.Environment.Name; want.Sandbox.Enabled && env != want.Sandbox.Environment || !want.Sandbox.Enabled && env != "" {
		return fmt.Errorf("the harness loaded agent %q with environment %q", name, env)
	}
	return nil
}

// defaultAgentRun is how the harness runs agent name configured with only the scripted
// model: the documented defaults, written out rather than taken from agentspec.
func defaultAgentRun(name string) agents.Spec {
	return agents.Spec{
		Name: name, Model: agents.ModelSpec{Provider: "scripted", Script: "[]"}, MaxTurns: 50, TokenBudget: 1_000_000,
		CodeLimits: agentspec.DefaultCodeModeLimits(), // no agent sets them yet
		Sandbox:    storedSandbox(agents.SandboxSpec{Enabled: false, Environment: "default", FileDownloads: true, IdleStopMinutes: 15, ArchiveAfterMinutes: 1440, DeleteAfterMinutes: 10080}),
	}
}

// storedSandbox is sb as apply stores it: sandbox.extract_limits always written, at its
// defaults when the configuration sets none (the schema's default fills them in).
func storedSandbox(sb agentspec.Sandbox) agentspec.Sandbox {
	l := agentspec.DefaultExtractLimits()
	sb.ExtractLimits = &l
	return sb
}

func agentCount(t *testing.T, f *controlPlaneFixture) int {
	t.Helper()
	var n int
	if err := f.store().DB().QueryRow(`SELECT COUNT(*) FROM agents`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// expectAgents is a PreConfig that asserts how many agents are stored: failing steps
// must leave nothing behind.
func expectAgents(t *testing.T, f *controlPlaneFixture, want int) func() {
	return func() {
		t.Helper()
		if n := agentCount(t, f); n != want {
			t.Fatalf("agents stored = %d, want %d", n, want)
		}
	}
}

func defaultSandboxValue(enabled bool, env string) knownvalue.Check {
	return knownvalue.ObjectExact(map[string]knownvalue.Check{
		"approve_code":          knownvalue.Bool(false),
		"archive_after_minutes": knownvalue.Int64Exact(1440),
		"delete_after_minutes":  knownvalue.Int64Exact(10080),
		"enabled":               knownvalue.Bool(enabled),
		"environment":           knownvalue.StringExact(env),
		"file_downloads":        knownvalue.Bool(true),
		"idle_stop_minutes":     knownvalue.Int64Exact(15),
		"environment_version":   knownvalue.Null(),
		"extract_limits":        defaultExtractLimitsValue(),
	})
}

// defaultExtractLimitsValue is sandbox.extract_limits as an agent that sets none has it.
func defaultExtractLimitsValue() knownvalue.Check {
	return knownvalue.ObjectExact(map[string]knownvalue.Check{
		"max_bytes":   knownvalue.Int64Exact(agentspec.DefaultExtractMaxBytes),
		"max_entries": knownvalue.Int64Exact(agentspec.DefaultExtractMaxEntries),
		"max_ratio":   knownvalue.Int64Exact(agentspec.DefaultExtractMaxRatio),
	})
}

const fullAgentBody = `
  description  = "Answers questions about the repo"
  instructions = "Be brief."
  model = {
    provider    = "openai"
    name        = "gpt-4.1"
    base_url    = "https://llm.internal.example.com/v1"
    api_key_env = "OPENAI_API_KEY"
  }
  mcp_servers = [
    {
      name           = "github"
      url            = "https://api.githubcopilot.com/mcp/"
      credential_env = "GITHUB_MCP_TOKEN"
      allowed_tools  = ["get_issue", "list_pull_requests"]
    },
    {
      name          = "docs"
      url           = "http://docs.internal:8080/mcp"
      allowed_tools = []
    },
  ]
  max_turns    = 12
  token_budget = 200000
  skills    = [{ name = "pdf", path = "/srv/skills/pdf" }]
  code_mode = true
  code_mode_limits = {
    max_calls           = 25
    call_timeout_seconds = 10
  }
  sandbox = {
    enabled           = true
    approve_code      = true
    environment       = trueforge_environment.py.name
    file_downloads    = false
    idle_stop_minutes = 30
  }
`

// fullAgentRun is how the harness runs fullAgentBody's agent "helper".
var fullAgentRun = agents.Spec{
	Name: "helper", Description: "Answers questions about the repo", Instructions: "Be brief.",
	Model: agents.ModelSpec{Provider: "openai", Name: "gpt-4.1", BaseURL: "https://llm.internal.example.com/v1", APIKeyEnv: "OPENAI_API_KEY"},
	MCPServers: []agents.MCPServer{
		{Name: "github", URL: "https://api.githubcopilot.com/mcp/", CredentialEnv: "GITHUB_MCP_TOKEN", AllowedTools: []string{"get_issue", "list_pull_requests"}},
		{Name: "docs", URL: "http://docs.internal:8080/mcp"}, // allowed_tools = []: every tool, as documented
	},
	Skills:   []agents.Skill{{Name: "pdf", Path: "/srv/skills/pdf", Description: "Does pdf things."}}, // and the folder's digest
	CodeMode: true,
	// Set ones as configured, the others at their defaults.
	CodeLimits: agentspec.CodeModeLimits{MaxCalls: 25, CallTimeoutSeconds: 10, RunTimeoutSeconds: agentspec.DefaultCodeRunTimeoutSeconds, MaxResultBytes: agentspec.DefaultCodeMaxResultBytes},
	Sandbox:    storedSandbox(agents.SandboxSpec{Enabled: true, ApproveCode: true, Environment: "py", FileDownloads: false, IdleStopMinutes: 30, ArchiveAfterMinutes: 1440, DeleteAfterMinutes: 10080}),
	MaxTurns:   12, TokenBudget: 200000,
}

func TestAccAgent_basic(t *testing.T) {
	f := newFixture(t)
	py := agentEnvHCL("py", "mkdir -p /opt/py", true)
	pdf := skillDir(t, "pdf", nil)
	fullBody := strings.ReplaceAll(fullAgentBody, "/srv/skills/pdf", pdf)
	fullRun := fullAgentRun
	fullRun.Skills = []agents.Skill{{Name: "pdf", Path: pdf, Description: "Does pdf things.", Digest: skillDigest(t, pdf)}}
	accTest(t,
		resource.TestStep{
			// Everything omitted takes its default; the sandbox is off.
			Config: f.config(agentHCL("helper", afterProvider)),
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue(agentAddr, tfjsonpath.New("id"), knownvalue.StringExact("helper")),
				statecheck.ExpectKnownValue(agentAddr, tfjsonpath.New("owner"), knownvalue.StringExact("alice")),
				statecheck.ExpectKnownValue(agentAddr, tfjsonpath.New("code_mode"), knownvalue.Bool(false)),
				statecheck.ExpectKnownValue(agentAddr, tfjsonpath.New("max_turns"), knownvalue.Int64Exact(50)),
				statecheck.ExpectKnownValue(agentAddr, tfjsonpath.New("token_budget"), knownvalue.Int64Exact(1_000_000)),
				statecheck.ExpectKnownValue(agentAddr, tfjsonpath.New("description"), knownvalue.Null()),
				statecheck.ExpectKnownValue(agentAddr, tfjsonpath.New("mcp_servers"), knownvalue.Null()),
				statecheck.ExpectKnownValue(agentAddr, tfjsonpath.New("skills"), knownvalue.Null()),
				statecheck.ExpectKnownValue(agentAddr, tfjsonpath.New("sandbox"), defaultSandboxValue(false, "default")),
				statecheck.ExpectKnownValue(agentAddr, tfjsonpath.New("model"), knownvalue.ObjectExact(map[string]knownvalue.Check{
					"api_key_credential": knownvalue.Null(),
					"api_key_env":        knownvalue.Null(),
					"base_url":           knownvalue.Null(),
					"name":               knownvalue.Null(),
					"provider":           knownvalue.StringExact("scripted"),
					"script":             knownvalue.StringExact("[]"),
				})),
			},
			Check: func(*terraformState) error {
				s, env, err := storedAgentSpec(t, f, "helper")
				if err != nil {
					return err
				}
				// The sandbox is off, so the row references no environment.
				if env != "" || !reflect.DeepEqual(s.Sandbox, storedSandbox(agentspec.DefaultSandbox())) || s.Model.Provider != "scripted" || s.MCPServers != nil ||
					s.MaxTurns != agentspec.DefaultMaxTurns || s.TokenBudget != agentspec.DefaultTokenBudget {
					return fmt.Errorf("stored agent: environment %q, spec %+v", env, s)
				}
				return harnessRuns(t, f, "helper", defaultAgentRun("helper"))
			},
		},
		resource.TestStep{
			// Every attribute but the name changes in place.
			Config:           f.config(py + agentHCL("helper", fullBody)),
			ConfigPlanChecks: plannedAction(agentAddr, plancheck.ResourceActionUpdate),
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue(agentAddr, tfjsonpath.New("id"), knownvalue.StringExact("helper")),
				statecheck.ExpectKnownValue(agentAddr, tfjsonpath.New("code_mode"), knownvalue.Bool(true)),
				statecheck.ExpectKnownValue(agentAddr, tfjsonpath.New("code_mode_limits"), knownvalue.ObjectExact(map[string]knownvalue.Check{
					"call_timeout_seconds": knownvalue.Int64Exact(10),
					"max_calls":            knownvalue.Int64Exact(25),
					"max_result_bytes":     knownvalue.Int64Exact(agentspec.DefaultCodeMaxResultBytes),
					"run_timeout_seconds":  knownvalue.Int64Exact(agentspec.DefaultCodeRunTimeoutSeconds),
				})),
				statecheck.ExpectKnownValue(agentAddr, tfjsonpath.New("max_turns"), knownvalue.Int64Exact(12)),
				statecheck.ExpectKnownValue(agentAddr, tfjsonpath.New("token_budget"), knownvalue.Int64Exact(200000)),
				statecheck.ExpectKnownValue(agentAddr, tfjsonpath.New("sandbox"), knownvalue.ObjectExact(map[string]knownvalue.Check{
					"approve_code":          knownvalue.Bool(true),
					"archive_after_minutes": knownvalue.Int64Exact(1440),
					"delete_after_minutes":  knownvalue.Int64Exact(10080),
					"enabled":               knownvalue.Bool(true),
					"environment":           knownvalue.StringExact("py"),
					"file_downloads":        knownvalue.Bool(false),
					"idle_stop_minutes":     knownvalue.Int64Exact(30),
					"environment_version":   knownvalue.Null(),
					"extract_limits":        defaultExtractLimitsValue(),
				})),
				statecheck.ExpectKnownValue(agentAddr, tfjsonpath.New("mcp_servers").AtSliceIndex(0).AtMapKey("allowed_tools"),
					knownvalue.ListExact([]knownvalue.Check{knownvalue.StringExact("get_issue"), knownvalue.StringExact("list_pull_requests")})),
				statecheck.ExpectKnownValue(agentAddr, tfjsonpath.New("mcp_servers").AtSliceIndex(1).AtMapKey("allowed_tools"), knownvalue.ListSizeExact(0)),
				statecheck.ExpectKnownValue(agentAddr, tfjsonpath.New("mcp_servers").AtSliceIndex(1).AtMapKey("credential_env"), knownvalue.Null()),
				statecheck.ExpectKnownValue(agentAddr, tfjsonpath.New("skills"), knownvalue.ListExact([]knownvalue.Check{
					knownvalue.ObjectExact(map[string]knownvalue.Check{"name": knownvalue.StringExact("pdf"), "path": knownvalue.StringExact(pdf),
						"description": knownvalue.StringExact("Does pdf things."), "digest": knownvalue.StringExact(skillDigest(t, pdf))}),
				})),
			},
			Check: func(*terraformState) error {
				s, env, err := storedAgentSpec(t, f, "helper")
				if err != nil {
					return err
				}
				if env != "py" || !s.Sandbox.Enabled || s.Sandbox.Environment != "py" || !s.CodeMode || len(s.MCPServers) != 2 ||
					*s.MCPServers[0].CredentialEnv != "GITHUB_MCP_TOKEN" || *s.Model.APIKeyEnv != "OPENAI_API_KEY" || *s.Instructions != "Be brief." ||
					s.MaxTurns != 12 || s.TokenBudget != 200000 {
					return fmt.Errorf("stored agent: environment %q, spec %+v", env, s)
				}
				return harnessRuns(t, f, "helper", fullRun)
			},
		},
		resource.TestStep{
			ResourceName:      agentAddr,
			ImportState:       true,
			ImportStateId:     "helper",
			ImportStateVerify: true,
		},
		resource.TestStep{
			// Empty lists and an empty string are kept apart from omitted ones: applying
			// them leaves no diff behind (the harness of the test checks the plan is empty).
			Config: f.config(py + agentHCL("helper", `
  description = ""
  mcp_servers = []
  skills      = []
  sandbox     = { enabled = true, environment = trueforge_environment.py.name }
`)),
			ConfigPlanChecks: plannedAction(agentAddr, plancheck.ResourceActionUpdate),
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue(agentAddr, tfjsonpath.New("description"), knownvalue.StringExact("")),
				statecheck.ExpectKnownValue(agentAddr, tfjsonpath.New("instructions"), knownvalue.Null()),
				statecheck.ExpectKnownValue(agentAddr, tfjsonpath.New("mcp_servers"), knownvalue.ListSizeExact(0)),
				statecheck.ExpectKnownValue(agentAddr, tfjsonpath.New("skills"), knownvalue.ListSizeExact(0)),
				statecheck.ExpectKnownValue(agentAddr, tfjsonpath.New("code_mode"), knownvalue.Bool(false)),
				statecheck.ExpectKnownValue(agentAddr, tfjsonpath.New("sandbox"), defaultSandboxValue(true, "py")),
			},
		},
		resource.TestStep{
			ResourceName:      agentAddr,
			ImportState:       true,
			ImportStateId:     "helper",
			ImportStateVerify: true,
		},
		resource.TestStep{
			// The name is the agent's identity: changing it replaces the agent.
			Config:           f.config(py + agentHCL("helper-2", afterProvider)),
			ConfigPlanChecks: plannedAction(agentAddr, plancheck.ResourceActionReplace),
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue(agentAddr, tfjsonpath.New("id"), knownvalue.StringExact("helper-2")),
			},
			Check: func(*terraformState) error {
				if n := agentCount(t, f); n != 1 {
					return fmt.Errorf("agents stored = %d, want 1 (the old name is gone)", n)
				}
				return nil
			},
		},
	)
}

func TestAccAgent_disappears(t *testing.T) {
	f := newFixture(t)
	testDisappears(t, f, f.config(agentHCL("gone", afterProvider)), agentAddr, `DELETE FROM agents WHERE name = ?`, "gone")
}

func TestAccAgent_outOfBandDrift(t *testing.T) {
	f := newFixture(t)
	cfg := f.config(agentHCL("drifty", afterProvider+`
  instructions = "Be brief."
  mcp_servers  = [{ name = "github", url = "https://api.githubcopilot.com/mcp/" }]
  sandbox      = { idle_stop_minutes = 30 }
`))
	accTest(t,
		resource.TestStep{Config: cfg},
		resource.TestStep{
			// Someone edits the published spec directly: refresh shows every change.
			PreConfig: func() {
				f.exec(`UPDATE agents SET spec = json_set(spec, '$.instructions', 'Be verbose.', '$.sandbox.idle_stop_minutes', 5,
					'$.mcp_servers[0].url', 'https://evil.example.com/mcp', '$.code_mode', json('true')) WHERE name = ?`, "drifty")
			},
			RefreshState:       true,
			ExpectNonEmptyPlan: true,
			Check: resource.ComposeTestCheckFunc(
				resource.TestCheckResourceAttr(agentAddr, "instructions", "Be verbose."),
				resource.TestCheckResourceAttr(agentAddr, "sandbox.idle_stop_minutes", "5"),
				resource.TestCheckResourceAttr(agentAddr, "mcp_servers.0.url", "https://evil.example.com/mcp"),
				resource.TestCheckResourceAttr(agentAddr, "code_mode", "true"),
			),
			RefreshPlanChecks: resource.RefreshPlanChecks{PostRefresh: []plancheck.PlanCheck{
				plancheck.ExpectResourceAction(agentAddr, plancheck.ResourceActionUpdate),
			}},
		},
		resource.TestStep{
			// Applying the configuration puts it back, in place.
			Config:           cfg,
			ConfigPlanChecks: plannedAction(agentAddr, plancheck.ResourceActionUpdate),
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue(agentAddr, tfjsonpath.New("instructions"), knownvalue.StringExact("Be brief.")),
				statecheck.ExpectKnownValue(agentAddr, tfjsonpath.New("code_mode"), knownvalue.Bool(false)),
				statecheck.ExpectKnownValue(agentAddr, tfjsonpath.New("sandbox").AtMapKey("idle_stop_minutes"), knownvalue.Int64Exact(30)),
				statecheck.ExpectKnownValue(agentAddr, tfjsonpath.New("mcp_servers").AtSliceIndex(0).AtMapKey("url"),
					knownvalue.StringExact("https://api.githubcopilot.com/mcp/")),
			},
			Check: func(*terraformState) error {
				s, _, err := storedAgentSpec(t, f, "drifty")
				if err != nil {
					return err
				}
				if *s.Instructions != "Be brief." || s.Sandbox.IdleStopMinutes != 30 || s.MCPServers[0].URL != "https://api.githubcopilot.com/mcp/" {
					return fmt.Errorf("stored spec not restored: %+v", s)
				}
				return nil
			},
		},
	)
}

// TestAccAgent_rules covers every plan-time rule; none of them reaches the store.
func TestAccAgent_rules(t *testing.T) {
	f := newFixture(t)
	cfg := func(body string) string {
		return f.providerBlock(f.owner) + fmt.Sprintf(`
resource "trueforge_agent" "a" {
  name = "rules"
%s
}
`, body)
	}
	scripted := `  model = { provider = "scripted", script = "[]" }` + "\n"
	cases := []struct {
		body string
		want string
	}{
		{scripted + `  skills = [{ name = "pdf", path = "/srv/skills/pdf" }]`, `Skills Require The Sandbox.*sandbox = \{ enabled = true \}`},
		{scripted + `  skills = [{ name = "pdf", path = "/srv/skills/pdf" }]
  sandbox = { enabled = false }`, `Skills Require The Sandbox`},
		{scripted + `  code_mode = true`, `Code Mode Requires The Sandbox.*sandbox.enabled = true`},
		{scripted + `  sandbox = { approve_code = true }`, `Approving Code Requires The Sandbox.*sandbox.enabled = true`},
		{`  model = { provider = "openai", name = "gpt-4.1", api_key_env = "sk-proj-4f9a8b7c6d5e4f3a2b1c" }`, `model.api_key_env.*looks like a credential`},
		{`  model = { provider = "openai", name = "gpt-4.1", api_key_env = "OPENAI KEY" }`, `model.api_key_env.*not an environment variable name`},
		{scripted + `  mcp_servers = [{ name = "gh", url = "https://x.example.com/mcp", credential_env = "ghp_aB3dE5fG7hJ9kL1mN3pQ5rS7" }]`, `credential_env.*looks like a credential`},
		{`  model = { provider = "scripted" }`, `Missing Model Script.*model.script`},
		{`  model = { provider = "openai" }`, `Missing Model Name.*model.name`},
		{`  model = { provider = "anthropic", api_key_env = "ANTHROPIC_API_KEY" }`, `Missing Model Name.*claude`},
		{`  model = { provider = "gemini", name = "g" }`, `model.provider.*value must be one of`},
		{`  model = { provider = "openai", name = "gpt-4.1", base_url = "ftp://llm.example.com" }`, `model.base_url.*not an http\(s\) URL`},
		{scripted + `  mcp_servers = [{ name = "gh", url = "api.githubcopilot.com/mcp" }]`, `mcp_servers\[0\].url.*not an http\(s\) URL`},
		{scripted + `  mcp_servers = [{ name = "gh", url = "https://a.example.com" }, { name = "gh", url = "https://b.example.com" }]`,
			`Duplicate MCP Server Name.*mcp_servers\[0\] and mcp_servers\[1\]`},
		{scripted + `  sandbox = { idle_stop_minutes = 0 }`, `sandbox.idle_stop_minutes.*at least 1`},
		{scripted + `  sandbox = { idle_stop_minutes = 120, archive_after_minutes = 60 }`, `Invalid Sandbox Timings.*archive_after_minutes \(60\) is less than sandbox.idle_stop_minutes \(120\)`},
		{scripted + `  sandbox = { delete_after_minutes = 60 }`, `Invalid Sandbox Timings.*delete_after_minutes \(60\) is less than sandbox.archive_after_minutes \(1440\)`},
		{scripted + `  sandbox = { environment = "Not A Name" }`, `sandbox.environment.*not a valid name`},
		{scripted + `  max_turns = 0`, `max_turns.*between 1 and 1000`},
		{scripted + `  token_budget = 10`, `token_budget.*between 1000 and 100000000`},
		{scripted + `  code_mode_limits = { max_calls = 0 }`, `code_mode_limits.max_calls.*between 1 and 10000`},
		{scripted + `  code_mode_limits = { call_timeout_seconds = 601 }`, `code_mode_limits.call_timeout_seconds.*between 1 and 600`},
		{scripted + `  code_mode_limits = { run_timeout_seconds = 0 }`, `code_mode_limits.run_timeout_seconds.*between 1 and 3600`},
		{scripted + `  code_mode_limits = { max_result_bytes = 10 }`, `code_mode_limits.max_result_bytes.*between 1024 and 67108864`},
	}
	var steps []resource.TestStep
	for _, c := range cases {
		steps = append(steps, resource.TestStep{Config: cfg(c.body), PlanOnly: true, ExpectError: expectError(c.want)})
	}
	// Values unknown at plan time skip the plan-time checks; apply checks them again.
	later := `
resource "terraform_data" "later" {
  input = "sk-proj-4f9a8b7c6d5e4f3a2b1c"
}
`
	for _, c := range []struct{ body, want string }{
		{scripted + `  code_mode = terraform_data.later.output != ""`, `Code Mode Requires The Sandbox`},
		{`  model = { provider = "openai", name = "gpt-4.1", api_key_env = terraform_data.later.output }`, `model.api_key_env.*looks like a credential`},
		{scripted + `  sandbox = { idle_stop_minutes = length(terraform_data.later.output), archive_after_minutes = 20 }`,
			`Invalid Sandbox Timings.*archive_after_minutes \(20\) is less than sandbox.idle_stop_minutes \(28\)`},
	} {
		steps = append(steps, resource.TestStep{Config: later + cfg(c.body), ExpectError: expectError(c.want)})
	}
	// Nothing was written by any of them.
	steps = append(steps, resource.TestStep{PreConfig: expectAgents(t, f, 0), Config: f.providerBlock(f.owner)})
	resource.ParallelTest(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProviders,
		Steps:                    steps,
	})
}

// TestAccAgent_environmentMustBeReady: only Ready environments can be selected, at plan
// time when the environment exists, and again at apply (where a missing one is an error).
func TestAccAgent_environmentMustBeReady(t *testing.T) {
	f := newFixture(t)
	// The build outlives the test; destroying the environment stops it.
	slow := agentEnvHCL("slow", "sleep 300", false)
	base := f.config(slow + agentHCL("a", afterProvider))
	accTest(t,
		resource.TestStep{
			Config: base,
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue("trueforge_environment.slow", tfjsonpath.New("status"), knownvalue.StringExact("Building")),
			},
		},
		resource.TestStep{
			// A literal name of an environment that does not exist passes the plan (it could be
			// created in the same apply) and fails at apply, for an update and for a create.
			Config: f.config(slow + agentHCL("a", `  sandbox = { enabled = true, environment = "ghost" }`) + `
resource "trueforge_agent" "b" {
  name    = "b"
  model   = { provider = "scripted", script = "[]" }
  sandbox = { enabled = true, environment = "ghost" }
}
`),
			ExpectError: expectError(`Environment Not Found.*"ghost".*trueforge_environment.<name>.name`),
		},
		resource.TestStep{
			// Selecting a Building environment fails at plan time.
			PreConfig:   expectAgents(t, f, 1),
			Config:      f.config(slow + agentHCL("a", `  sandbox = { enabled = true, environment = trueforge_environment.slow.name }`)),
			ExpectError: expectError(`Environment Not Ready.*"slow" is Building.*only Ready environments`),
		},
		resource.TestStep{
			Config: f.config(slow + agentHCL("a", afterProvider) + `
resource "trueforge_agent" "b" {
  name    = "b"
  model   = { provider = "scripted", script = "[]" }
  sandbox = { enabled = true, environment = trueforge_environment.slow.name }
}
`),
			ExpectError: expectError(`Environment Not Ready.*"slow" is Building`),
		},
		resource.TestStep{
			// Nothing was written: agent "a" still has its sandbox off and references no
			// environment.
			PreConfig: func() {
				expectAgents(t, f, 1)()
				if s, env, err := storedAgentSpec(t, f, "a"); err != nil || env != "" || !reflect.DeepEqual(s.Sandbox, storedSandbox(agentspec.DefaultSandbox())) {
					t.Fatalf("agent a: environment %q, sandbox %+v, %v; want none and the default sandbox", env, s.Sandbox, err)
				}
			},
			Config:   base,
			PlanOnly: true,
		},
		resource.TestStep{
			// An agent already on an environment is not blocked while it rebuilds: only a
			// new selection must be Ready. (The agent is moved onto "slow" out of band.)
			PreConfig: func() {
				f.exec(`UPDATE agents SET environment = 'slow', spec = json_set(spec, '$.sandbox.enabled', json('true'), '$.sandbox.environment', 'slow') WHERE name = ?`, "a")
			},
			Config: f.config(slow + agentHCL("a", `  instructions = "Edited while slow builds."
  sandbox      = { enabled = true, environment = trueforge_environment.slow.name }`)),
			ConfigPlanChecks: plannedAction(agentAddr, plancheck.ResourceActionUpdate),
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue(agentAddr, tfjsonpath.New("instructions"), knownvalue.StringExact("Edited while slow builds.")),
				statecheck.ExpectKnownValue("trueforge_environment.slow", tfjsonpath.New("status"), knownvalue.StringExact("Building")),
			},
		},
	)
}

// TestAccAgent_environmentInUse: an environment referenced by a saved agent cannot be
// deleted; the store's foreign key refuses and the environment resource says why.
func TestAccAgent_environmentInUse(t *testing.T) {
	f := newFixture(t)
	py := agentEnvHCL("py", "mkdir -p /opt/py", true)
	withEnv := f.config(py + agentHCL("user", `  sandbox = { enabled = true, environment = trueforge_environment.py.name }`))
	accTest(t,
		resource.TestStep{Config: withEnv},
		resource.TestStep{
			// Only the environment is removed; the agent keeps selecting it by name.
			Config:      f.config(agentHCL("user", `  sandbox = { enabled = true, environment = "py" }`)),
			ExpectError: expectError(`Environment In Use.*referenced by agent\(s\) user`),
		},
		resource.TestStep{
			// It is still there, Ready, and still in state: nothing to do.
			PreConfig: func() {
				if _, err := f.store().GetEnvironment(t.Context(), "py"); err != nil {
					t.Fatalf("environment py: %v", err)
				}
			},
			Config: withEnv,
			ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
				plancheck.ExpectEmptyPlan(),
			}},
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue("trueforge_environment.py", tfjsonpath.New("status"), knownvalue.StringExact("Ready")),
			},
		},
	)
}

// TestAgentValidateAtApply covers the apply-time check, which repeats the attribute
// validators' rules for values that were unknown at plan time.
func TestAgentValidateAtApply(t *testing.T) {
	str := types.StringValue
	null := types.StringNull()
	model := func(provider, name, baseURL, keyEnv types.String) types.Object {
		return types.ObjectValueMust(modelSettingsAttrTypes, map[string]attr.Value{
			"api_key_credential": null, "api_key_env": keyEnv, "base_url": baseURL, "name": name, "provider": provider, "script": null,
		})
	}
	servers := func(names ...string) types.List {
		var vals []attr.Value
		for _, n := range names {
			vals = append(vals, types.ObjectValueMust(mcpServerAttrTypes, map[string]attr.Value{
				"allowed_tools": types.ListNull(types.StringType), "credential": null, "credential_env": str("GITHUB_TOKEN"), "name": str(n), "url": str("ftp://x"),
			}))
		}
		return types.ListValueMust(types.ObjectType{AttrTypes: mcpServerAttrTypes}, vals)
	}
	sb := func(idle int64) types.Object {
		return types.ObjectValueMust(agentSandboxAttrTypes, map[string]attr.Value{
			"approve_code": types.BoolValue(false), "archive_after_minutes": types.Int64Value(1440), "delete_after_minutes": types.Int64Value(10080), "enabled": types.BoolValue(false),
			"environment": str("default"), "file_downloads": types.BoolValue(true), "idle_stop_minutes": types.Int64Value(idle), "environment_version": types.StringNull(),
			"extract_limits": extractLimitsObject(agentspec.DefaultExtractLimits()),
		})
	}
	base := func() agentModel {
		return agentModel{
			Name: str("a"), CodeMode: types.BoolValue(false), Model: model(str("openai"), str("gpt-4.1"), null, null),
			MCPServers: types.ListNull(types.ObjectType{AttrTypes: mcpServerAttrTypes}), Skills: types.ListNull(types.ObjectType{AttrTypes: skillAttrTypes}),
			Sandbox: sb(15),
		}
	}
	cases := []struct {
		name   string
		mutate func(*agentModel)
		want   string
	}{
		{"valid", func(*agentModel) {}, ""},
		{"name", func(m *agentModel) { m.Name = str("Bad Name") }, "name: \"Bad Name\" is not a valid name"},
		{"provider", func(m *agentModel) { m.Model = model(str("gemini"), str("g"), null, null) }, "not a model provider"},
		{"base_url", func(m *agentModel) { m.Model = model(str("openai"), str("g"), str("llm.example.com"), null) }, "model.base_url"},
		{"api_key_env", func(m *agentModel) {
			m.Model = model(str("openai"), str("g"), null, str("sk-proj-4f9a8b7c6d5e4f3a2b1c"))
		}, "looks like a credential"},
		{"mcp url and duplicate", func(m *agentModel) { m.MCPServers = servers("gh", "gh") }, "mcp_servers[0].url"},
		{"harness variable", func(m *agentModel) {
			m.Model = model(str("openai"), str("g"), null, str("TRUEFORGE_SECRET_KEY"))
		}, `model.api_key_env: "TRUEFORGE_SECRET_KEY": variables named TRUEFORGE_* are the harness's own settings`},
		{"timing", func(m *agentModel) { m.Sandbox = sb(0) }, "sandbox.idle_stop_minutes is 0; it must be at least 1 minute"},
		{"code mode", func(m *agentModel) { m.CodeMode = types.BoolValue(true) }, "Code Mode Requires The Sandbox"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := base()
			c.mutate(&m)
			var diags diag.Diagnostics
			m.validate(t.Context(), true, &diags)
			var got []string
			for _, d := range diags.Errors() {
				got = append(got, d.Summary()+": "+d.Detail())
			}
			all := strings.Join(got, "\n")
			if c.want == "" && len(got) > 0 || c.want != "" && !strings.Contains(all, c.want) {
				t.Fatalf("errors:\n%s\nwant one containing %q", all, c.want)
			}
			// The same model passes the plan-time check, which leaves these rules to the
			// attribute validators (except the rules that span attributes).
			if c.name == "name" || c.name == "provider" || c.name == "base_url" || c.name == "api_key_env" || c.name == "timing" {
				var plan diag.Diagnostics
				m.validate(t.Context(), false, &plan)
				if plan.HasError() {
					t.Fatalf("plan-time check reported %v", plan)
				}
			}
		})
	}
}

// TestAccAgent_credentialEnvMustNameAVariable: api_key_env and mcp_servers[].credential_env
// hold the name of a harness variable; a value that is neither a variable name nor a
// credential is refused too, naming the attribute, and nothing is stored. The steps are
// full applies, so an accepted value would be written and caught by the next step. (For
// attributes nested in an object, Terraform quotes the resource's first line, so the
// attribute is matched in the detail only.)
func TestAccAgent_credentialEnvMustNameAVariable(t *testing.T) {
	f := newFixture(t)
	cfg := func(body string) string {
		return f.config(agentHCL("creds", afterProvider+"\n"+body))
	}
	accTest(t,
		resource.TestStep{
			Config:      cfg(`  mcp_servers = [{ name = "gh", url = "https://api.githubcopilot.com/mcp/", credential_env = "not a name" }]`),
			ExpectError: expectError(`mcp_servers\[0\]\.credential_env: "not a name" is not an environment variable name`),
		},
		resource.TestStep{
			PreConfig:   expectAgents(t, f, 0),
			Config:      cfg(`  model = { provider = "openai", name = "gpt-4.1", api_key_env = "1ABC" }`),
			ExpectError: expectError(`model\.api_key_env: "1ABC" is not an environment variable name`),
		},
		resource.TestStep{
			// Nothing was written by either.
			PreConfig: expectAgents(t, f, 0),
			Config:    f.config(""),
		},
	)
}

// TestAccAgent_failedEnvironmentCannotBeSelected: an environment whose build failed is not
// Ready, so selecting it is refused at plan time, naming the status and the reason, and no
// agent is stored.
func TestAccAgent_failedEnvironmentCannotBeSelected(t *testing.T) {
	f := newFixture(t)
	broken := agentEnvHCL("broken", "echo 'E: no such package' >&2; exit 1", true)
	accTest(t,
		resource.TestStep{
			// The build fails; the environment is kept (tainted) with its Failed snapshot.
			Config:      f.config(broken),
			ExpectError: expectError(`Snapshot Build Failed.*exit`),
		},
		resource.TestStep{
			PreConfig: func() {
				env, err := f.store().GetEnvironment(t.Context(), "broken")
				if err != nil {
					t.Fatalf("environment broken: %v", err)
				}
				snap, err := f.store().GetSnapshot(t.Context(), env.SnapshotID)
				if err != nil || snap.Status != "Failed" {
					t.Fatalf("snapshot of broken = %+v, %v; want Failed", snap, err)
				}
			},
			Config:      f.config(broken + agentHCL("a", `  sandbox = { enabled = true, environment = trueforge_environment.broken.name }`)),
			ExpectError: expectError(`Environment Not Ready.*"broken" is Failed.*only Ready environments.*Its build failed`),
		},
		resource.TestStep{
			// A literal name is checked the same way.
			Config:      f.config(broken + agentHCL("a", `  sandbox = { enabled = true, environment = "broken" }`)),
			ExpectError: expectError(`Environment Not Ready.*"broken" is Failed`),
		},
		resource.TestStep{
			// Nothing was written; removing the environment cleans up.
			PreConfig: expectAgents(t, f, 0),
			Config:    f.config(""),
		},
	)
}

// qaAgentsHCL renders two agents without a sandbox: "qa" sets no sandbox block, and "off"
// sets enabled = false with an environment that does not exist, which is never checked.
const qaAgentsHCL = `
resource "trueforge_agent" "qa" {
  name  = "qa"
  model = { provider = "scripted", script = "[]" }
}

resource "trueforge_agent" "off" {
  name    = "off"
  model   = { provider = "scripted", script = "[]" }
  sandbox = { enabled = false, environment = "ghost" }
}
`

// qaAgentsState checks the state of agents "qa" and "off": the sandbox as configured.
func qaAgentsState() []statecheck.StateCheck {
	return []statecheck.StateCheck{
		statecheck.ExpectKnownValue("trueforge_agent.qa", tfjsonpath.New("sandbox"), defaultSandboxValue(false, "default")),
		statecheck.ExpectKnownValue("trueforge_agent.off", tfjsonpath.New("sandbox").AtMapKey("environment"), knownvalue.StringExact("ghost")),
	}
}

// checkQAAgents checks that agents "qa" and "off" are stored referencing no environment
// and that the harness runs them without one.
func checkQAAgents(t *testing.T, f *controlPlaneFixture) func(*terraformState) error {
	return func(*terraformState) error {
		off := defaultAgentRun("off")
		off.Sandbox.Environment = "ghost"
		for name, want := range map[string]agents.Spec{"qa": defaultAgentRun("qa"), "off": off} {
			if _, env, err := storedAgentSpec(t, f, name); err != nil || env != "" {
				return fmt.Errorf("agent %s: references environment %q, %v; want none", name, env, err)
			}
			if err := harnessRuns(t, f, name, want); err != nil {
				return err
			}
		}
		return nil
	}
}

// TestAccAgent_withoutSandboxBesideANewProvider: agents whose sandbox is off are created
// in the same apply as the control plane's first sandbox provider even when Terraform
// creates them first (forced here: the provider depends on them), since they resolve no
// environment; and the provider can then be destroyed while they stay.
func TestAccAgent_withoutSandboxBesideANewProvider(t *testing.T) {
	f := newFixture(t)
	accTest(t,
		resource.TestStep{
			Config: f.providerBlock(f.owner) + qaAgentsHCL + `
resource "trueforge_sandbox_provider" "local" {
  name       = "local"
  type       = "local"
  depends_on = [trueforge_agent.qa, trueforge_agent.off]
}
`,
			ConfigStateChecks: append(qaAgentsState(),
				statecheck.ExpectKnownValue("trueforge_sandbox_provider.local", tfjsonpath.New("status"), knownvalue.StringExact("Ready"))),
			Check: checkQAAgents(t, f),
		},
		resource.TestStep{
			// Nothing references the provider's default environment, so it goes.
			Config: f.providerBlock(f.owner) + qaAgentsHCL,
			ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
				plancheck.ExpectResourceAction("trueforge_sandbox_provider.local", plancheck.ResourceActionDestroy),
				plancheck.ExpectResourceAction("trueforge_agent.qa", plancheck.ResourceActionNoop),
			}},
			Check: func(s *terraformState) error {
				if p, err := f.store().OnlySandboxProvider(t.Context()); !errors.Is(err, store.ErrNotFound) {
					return fmt.Errorf("sandbox provider %+v, %v; want none", p, err)
				}
				return checkQAAgents(t, f)(s)
			},
		},
	)
}

// TestAccAgent_withoutSandboxAlone: agents whose sandbox is off exist on a control plane
// that has no sandbox provider at all, read back and import unchanged; turning one's
// sandbox on checks its environment again.
func TestAccAgent_withoutSandboxAlone(t *testing.T) {
	f := newFixture(t)
	alone := f.providerBlock(f.owner) + qaAgentsHCL
	accTest(t,
		resource.TestStep{
			Config:            alone,
			ConfigStateChecks: qaAgentsState(),
			Check:             checkQAAgents(t, f),
		},
		resource.TestStep{ResourceName: "trueforge_agent.off", ImportState: true, ImportStateId: "off", ImportStateVerify: true},
		resource.TestStep{
			Config:      f.providerBlock(f.owner) + strings.Replace(qaAgentsHCL, "enabled = false", "enabled = true", 1),
			ExpectError: expectError(`Environment Not Found.*"ghost"`),
		},
		resource.TestStep{
			// Nothing was written.
			PreConfig: func() {
				if err := checkQAAgents(t, f)(nil); err != nil {
					t.Fatal(err)
				}
			},
			Config:   alone,
			PlanOnly: true,
		},
	)
}
