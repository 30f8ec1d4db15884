package provider

import (
	"context"
	"fmt"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/compare"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// The data sources modules use to find what other configurations published: the sandbox
// provider, and filtered lists of environments and agents.

// namesAre checks a data source's `names`.
func namesAre(addr string, names ...string) statecheck.StateCheck {
	checks := make([]knownvalue.Check, len(names))
	for i, n := range names {
		checks[i] = knownvalue.StringExact(n)
	}
	return statecheck.ExpectKnownValue(addr, tfjsonpath.New("names"), knownvalue.ListExact(checks))
}

// othersEnvironment stores environment name as owner, outside Terraform (another team's
// apply), on the snapshot of environment like so that nothing is built.
func othersEnvironment(t *testing.T, st *store.Store, name, owner, like string) {
	t.Helper()
	ctx := context.Background()
	src, err := st.GetEnvironment(ctx, like)
	if err != nil {
		t.Fatalf("reading environment %s: %v", like, err)
	}
	env := src
	env.ID, env.Name, env.Owner, env.Reserved = newID("env"), name, owner, false
	if err := st.CreateEnvironment(ctx, env); err != nil {
		t.Fatalf("creating %s's environment %s: %v", owner, name, err)
	}
}

func TestAccDataSourceSandboxProvider(t *testing.T) {
	f := newFixture(t)
	cfg := f.config(`
data "trueforge_sandbox_provider" "by_name" {
  name = trueforge_sandbox_provider.local.name
}

# A module that knows no name reads the control plane's only provider.
data "trueforge_sandbox_provider" "only" {
  depends_on = [trueforge_sandbox_provider.local]
}
`)
	const res = "trueforge_sandbox_provider.local"
	var checks []statecheck.StateCheck
	for _, ds := range []string{"data.trueforge_sandbox_provider.by_name", "data.trueforge_sandbox_provider.only"} {
		for _, attr := range []string{"id", "name", "type", "status", "release_snapshot", "default_environment", "scopes", "api_url", "target", "require_limits"} {
			checks = append(checks, statecheck.CompareValuePairs(res, tfjsonpath.New(attr), ds, tfjsonpath.New(attr), compare.ValuesSame()))
		}
		checks = append(checks,
			statecheck.ExpectKnownValue(ds, tfjsonpath.New("name"), knownvalue.StringExact("local")),
			statecheck.ExpectKnownValue(ds, tfjsonpath.New("owner"), knownvalue.StringExact("alice")),
			statecheck.ExpectKnownValue(ds, tfjsonpath.New("status"), knownvalue.StringExact("Ready")),
		)
	}
	accTest(t,
		resource.TestStep{Config: cfg, ConfigStateChecks: checks},
		dataSourceStep(cfg, "trueforge_sandbox_provider", "ghost", "name", "ghost", expectError(`Sandbox Provider Not Found.*"ghost"`)),
		dataSourceStep(cfg, "trueforge_sandbox_provider", "bad", "name", "Not A Name", attrError("name", `not a valid name`)),
		resource.TestStep{Config: cfg}, // the configuration the destroy runs with
	)
}

// Environments listed with each filter, in name order whatever the order of creation,
// another owner's environment among them; a filter matching nothing lists nothing; a
// malformed filter is refused naming the attribute.
func TestAccDataSourceEnvironments(t *testing.T) {
	f := newFixture(t)
	base := f.config(agentEnvHCL("zeta", "mkdir -p /opt/z", true) + agentEnvHCL("alpha", "mkdir -p /opt/a", true))
	lists := base + `
data "trueforge_environments" "all" {}

data "trueforge_environments" "alice" {
  owner = "alice"
}

data "trueforge_environments" "bob" {
  owner = "bob"
}

data "trueforge_environments" "ready_on_local" {
  sandbox_provider = "local"
  status           = "Ready"
}

data "trueforge_environments" "building" {
  status = "Building"
}

data "trueforge_environments" "elsewhere" {
  sandbox_provider = "elsewhere"
}
`
	const all = "data.trueforge_environments.all"
	item := func(i int, attr string) tfjsonpath.Path {
		return tfjsonpath.New("environments").AtSliceIndex(i).AtMapKey(attr)
	}
	accTest(t,
		resource.TestStep{Config: base},
		resource.TestStep{
			// Bob's environment "mid", applied by another configuration.
			PreConfig: func() { othersEnvironment(t, f.store(), "mid", "bob", "alpha") },
			Config:    lists,
			ConfigStateChecks: []statecheck.StateCheck{
				namesAre(all, "alpha", "default", "mid", "zeta"),
				namesAre("data.trueforge_environments.alice", "alpha", "default", "zeta"),
				namesAre("data.trueforge_environments.bob", "mid"),
				namesAre("data.trueforge_environments.ready_on_local", "alpha", "default", "mid", "zeta"),
				namesAre("data.trueforge_environments.building"),
				namesAre("data.trueforge_environments.elsewhere"),
				statecheck.ExpectKnownValue("data.trueforge_environments.elsewhere", tfjsonpath.New("environments"), knownvalue.ListSizeExact(0)),
				statecheck.ExpectKnownValue(all, item(0, "reserved"), knownvalue.Bool(false)),
				statecheck.ExpectKnownValue(all, item(1, "reserved"), knownvalue.Bool(true)),
				statecheck.ExpectKnownValue(all, item(2, "owner"), knownvalue.StringExact("bob")),
				statecheck.ExpectKnownValue(all, item(0, "status"), knownvalue.StringExact("Ready")),
				statecheck.ExpectKnownValue(all, item(0, "sandbox_provider"), knownvalue.StringExact("local")),
				statecheck.ExpectKnownValue(all, item(0, "env"), knownvalue.MapSizeExact(0)),
				statecheck.ExpectKnownValue(all, item(0, "network"), knownvalue.ObjectExact(map[string]knownvalue.Check{
					"allow_domains":      knownvalue.ListSizeExact(0),
					"block_all":          knownvalue.Bool(false),
					"allow_cidrs":        knownvalue.ListSizeExact(0),
					"package_indexes":    knownvalue.ListSizeExact(0),
					"package_indexes_in": knownvalue.StringExact("build"),
				})),
				// An element reads back what the resource says.
				statecheck.CompareValuePairs("trueforge_environment.alpha", tfjsonpath.New("snapshot_id"), all, item(0, "snapshot_id"), compare.ValuesSame()),
				statecheck.CompareValuePairs("trueforge_environment.alpha", tfjsonpath.New("build_hash"), all, item(0, "build_hash"), compare.ValuesSame()),
				statecheck.CompareValuePairs("trueforge_environment.zeta", tfjsonpath.New("cpu"), all, item(3, "cpu"), compare.ValuesSame()),
				statecheck.CompareValuePairs("trueforge_environment.zeta", tfjsonpath.New("memory"), all, item(3, "memory"), compare.ValuesSame()),
				statecheck.CompareValuePairs("trueforge_environment.zeta", tfjsonpath.New("disk"), all, item(3, "disk"), compare.ValuesSame()),
				statecheck.CompareValuePairs("trueforge_environment.zeta", tfjsonpath.New("image"), all, item(3, "image"), compare.ValuesSame()),
			},
		},
		dataSourceStep(base, "trueforge_environments", "bad", "status", "ready", attrError("status", `value must be one of: \["Building" "Ready" "Failed"\], got: "ready"`)),
		dataSourceStep(base, "trueforge_environments", "bad", "sandbox_provider", "Local Provider", attrError("sandbox_provider", `not a valid name`)),
		resource.TestStep{
			// Bob's environment goes (his configuration destroyed), so alice's destroy
			// can delete the sandbox provider.
			PreConfig: func() {
				if err := f.store().DeleteEnvironment(context.Background(), "mid"); err != nil {
					t.Fatal(err)
				}
			},
			Config: base,
		},
	)
}

// agentsHCL is two agents: "b-coder" on environment py with Code Mode, and "a-chat" with
// its sandbox off.
const agentsHCL = `
resource "trueforge_agent" "coder" {
  name        = "b-coder"
  model       = { provider = "scripted", script = "[]" }
  mcp_servers = [{ name = "github", url = "https://api.githubcopilot.com/mcp/", credential_env = "GITHUB_MCP_TOKEN" }]
  code_mode   = true
  sandbox     = { enabled = true, environment = trueforge_environment.py.name }
}

resource "trueforge_agent" "chat" {
  name        = "a-chat"
  description = "Answers questions"
  model       = { provider = "scripted", script = "[]" }
  sandbox     = { enabled = false }
}
`

// Agents listed with each filter, in name order; agents with their sandbox off have no
// environment or sandbox provider and match no such filter.
func TestAccDataSourceAgents(t *testing.T) {
	f := newFixture(t)
	base := f.config(envHCL("mkdir -p /opt/py", "") + agentsHCL)
	lists := base + `
data "trueforge_agents" "all" {}

data "trueforge_agents" "code_mode" {
  code_mode = true
}

data "trueforge_agents" "on_py" {
  environment = "py"
}

data "trueforge_agents" "on_local" {
  sandbox_provider = "local"
}

data "trueforge_agents" "alice" {
  owner = "alice"
}

data "trueforge_agents" "bob" {
  owner = "bob"
}

data "trueforge_agents" "on_default" {
  environment = "default"
}
`
	const all = "data.trueforge_agents.all"
	item := func(i int, attr string) tfjsonpath.Path {
		return tfjsonpath.New("agents").AtSliceIndex(i).AtMapKey(attr)
	}
	accTest(t,
		resource.TestStep{Config: base},
		resource.TestStep{
			Config: lists,
			ConfigStateChecks: []statecheck.StateCheck{
				namesAre(all, "a-chat", "b-coder"),
				namesAre("data.trueforge_agents.code_mode", "b-coder"),
				namesAre("data.trueforge_agents.on_py", "b-coder"),
				namesAre("data.trueforge_agents.on_local", "b-coder"),
				namesAre("data.trueforge_agents.alice", "a-chat", "b-coder"),
				namesAre("data.trueforge_agents.bob"),
				namesAre("data.trueforge_agents.on_default"),
				statecheck.ExpectKnownValue("data.trueforge_agents.bob", tfjsonpath.New("agents"), knownvalue.ListSizeExact(0)),
				statecheck.ExpectKnownValue(all, tfjsonpath.New("agents").AtSliceIndex(0), knownvalue.ObjectExact(map[string]knownvalue.Check{
					"code_mode":        knownvalue.Bool(false),
					"description":      knownvalue.StringExact("Answers questions"),
					"environment":      knownvalue.Null(),
					"mcp_servers":      knownvalue.ListSizeExact(0),
					"model_name":       knownvalue.Null(),
					"model_provider":   knownvalue.StringExact("scripted"),
					"name":             knownvalue.StringExact("a-chat"),
					"owner":            knownvalue.StringExact("alice"),
					"sandbox_enabled":  knownvalue.Bool(false),
					"sandbox_provider": knownvalue.Null(),
					"skills":           knownvalue.ListSizeExact(0),
				})),
				statecheck.ExpectKnownValue(all, item(1, "environment"), knownvalue.StringExact("py")),
				statecheck.ExpectKnownValue(all, item(1, "sandbox_provider"), knownvalue.StringExact("local")),
				statecheck.ExpectKnownValue(all, item(1, "code_mode"), knownvalue.Bool(true)),
				statecheck.ExpectKnownValue(all, item(1, "mcp_servers"), knownvalue.ListExact([]knownvalue.Check{knownvalue.StringExact("github")})),
				statecheck.ExpectKnownValue(all, item(1, "description"), knownvalue.Null()),
			},
		},
		dataSourceStep(base, "trueforge_agents", "bad", "environment", "Py Env", attrError("environment", `not a valid name`)),
		resource.TestStep{Config: base}, // the configuration the destroy runs with
	)
}

// On PostgreSQL a team role lists every team's environments and agents (row-level
// security hides only other teams' secrets, which no data source exposes), filters by
// role, and reads the sandbox provider another role may own.
func TestAccPostgres_listDataSources(t *testing.T) {
	f := newPGFixture(t)
	base := pgTeamHCL("a", "v1", `"api.example.com"`, "Be brief.")
	lists := base + fmt.Sprintf(`
data "trueforge_sandbox_provider" "this" {}

data "trueforge_environments" "all" {}

data "trueforge_environments" "bob" {
  owner = %[1]q
}

data "trueforge_agents" "all" {}

data "trueforge_agents" "bob" {
  owner = %[1]q
}

data "trueforge_agents" "on_py" {
  environment = "py"
}
`, f.bob)
	resource.ParallelTest(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: f.providers,
		Steps: []resource.TestStep{
			{Config: f.config(base)},
			{
				// Bob's environment, stored through his own role.
				PreConfig: func() { othersEnvironment(t, f.storeAs(f.bob), "bobs", f.bob, "py") },
				Config:    f.config(lists),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("data.trueforge_sandbox_provider.this", tfjsonpath.New("owner"), knownvalue.StringExact(f.alice)),
					namesAre("data.trueforge_environments.all", "bobs", "default", "py"),
					namesAre("data.trueforge_environments.bob", "bobs"),
					statecheck.ExpectKnownValue("data.trueforge_environments.bob", tfjsonpath.New("environments").AtSliceIndex(0).AtMapKey("status"), knownvalue.StringExact("Ready")),
					namesAre("data.trueforge_agents.all", "helper"),
					namesAre("data.trueforge_agents.bob"),
					namesAre("data.trueforge_agents.on_py", "helper"),
				},
			},
			{
				// Bob lists the same as alice does.
				Config:   f.configAs(f.bob, lists),
				PlanOnly: true,
			},
			{
				PreConfig: func() {
					if err := f.storeAs(f.bob).DeleteEnvironment(context.Background(), "bobs"); err != nil {
						t.Fatal(err)
					}
				},
				Config: f.config(base),
			},
		},
	})
}
