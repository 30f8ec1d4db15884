package provider

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	"github.com/trueforge/terraform-provider-trueforge/internal/controlplane"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/agents"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/runner"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/tools"
	"github.com/trueforge/terraform-provider-trueforge/internal/secretbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// pgSecretHCL is secret TOKEN of environment py.
func pgSecretHCL(value, hosts string) string {
	return fmt.Sprintf(`
resource "trueforge_secret" "tok" {
  environment = trueforge_environment.py.name
  env_name    = "TOKEN"
  value       = %q
  hosts       = [%s]
}
`, value, hosts)
}

// pgAgentHCL is agent helper, on environment py, answering with a scripted text.
func pgAgentHCL(instructions string) string {
	return fmt.Sprintf(`
resource "trueforge_agent" "helper" {
  name         = "helper"
  instructions = %q
  model        = { provider = "scripted", script = jsonencode({ replay = "pg", turns = [{ text = "Hello from PostgreSQL." }] }) }
  sandbox      = { enabled = true, environment = trueforge_environment.py.name }
}
`, instructions)
}

// pgTeamHCL is alice's configuration: environment py with a secret, and an agent on it.
func pgTeamHCL(envMode, value, hosts, instructions string) string {
	return envHCL("", fmt.Sprintf(`  env = { MODE = %q }
  network = { allow_domains = ["api.example.com", "uploads.example.com"] }`, envMode)) +
		pgSecretHCL(value, hosts) + pgAgentHCL(instructions)
}

// The provider's lifecycle on PostgreSQL: a sandbox provider, an environment with a
// secret and an agent are created, updated in place and destroyed as alice's role; each
// apply plans empty afterwards. A harness role reads what apply published (the agent, its
// environment, the secret under the shared key) and runs the agent; the session is the
// harness role's, and a team role cannot read it.
func TestAccPostgres_lifecycle(t *testing.T) {
	f := newPGFixture(t)
	resource.ParallelTest(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: f.providers,
		Steps: []resource.TestStep{
			{
				Config: f.config(pgTeamHCL("a", "v1", `"api.example.com"`, "Be brief.")),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(envAddr, tfjsonpath.New("owner"), knownvalue.StringExact(f.alice)),
					statecheck.ExpectKnownValue(envAddr, tfjsonpath.New("status"), knownvalue.StringExact("Ready")),
					statecheck.ExpectKnownValue("trueforge_agent.helper", tfjsonpath.New("owner"), knownvalue.StringExact(f.alice)),
				},
				Check: func(*terraformState) error {
					// The local backend's files are in the data directory; the key is not.
					if _, err := os.Stat(filepath.Join(f.dataDir, "local-backend")); err != nil {
						return fmt.Errorf("the local backend's files are not under TRUEFORGE_DATA_DIR: %w", err)
					}
					if _, err := os.Stat(filepath.Join(f.dataDir, controlplane.KeyFileName)); !errors.Is(err, fs.ErrNotExist) {
						return fmt.Errorf("a key file was created beside a PostgreSQL control plane: %v", err)
					}
					return f.harnessRunsHelper(t, "v1", "Be brief.")
				},
			},
			{
				Config: f.config(pgTeamHCL("b", "v2", `"api.example.com", "uploads.example.com"`, "Be thorough.")),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(envAddr, plancheck.ResourceActionUpdate),
					plancheck.ExpectResourceAction("trueforge_secret.tok", plancheck.ResourceActionUpdate),
					plancheck.ExpectResourceAction("trueforge_agent.helper", plancheck.ResourceActionUpdate),
				}},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(envAddr, tfjsonpath.New("env").AtMapKey("MODE"), knownvalue.StringExact("b")),
				},
				Check: func(*terraformState) error { return f.harnessRunsHelper(t, "v2", "Be thorough.") },
			},
		},
		CheckDestroy: func(*terraformState) error {
			st := f.store()
			for _, table := range []string{"agents", "secrets", "sandbox_providers"} {
				var n int
				if err := st.QueryRow(t.Context(), `SELECT COUNT(*) FROM `+table).Scan(&n); err != nil || n != 0 {
					return fmt.Errorf("%s left after destroy: %d, %v", table, n, err)
				}
			}
			var n int
			if err := st.QueryRow(t.Context(), `SELECT COUNT(*) FROM environments WHERE name = 'py'`).Scan(&n); err != nil || n != 0 {
				return fmt.Errorf("environment py left after destroy: %d, %v", n, err)
			}
			return nil
		},
	})
}

// harnessRunsHelper checks, as the harness role, that agent helper loads with the given
// instructions, that secret py/TOKEN opens to value under the fixture's key, and that a
// turn runs: in a session of the harness role that alice's team role, which owns helper,
// reads (read only) and bob's does not.
func (f *pgFixture) harnessRunsHelper(t *testing.T, value, instructions string) error {
	ctx := t.Context()
	plane := f.planeAs(f.harness)
	st := plane.Store
	a, err := agents.Load(ctx, st, "helper")
	if err != nil {
		return fmt.Errorf("the harness role cannot load agent helper: %w", err)
	}
	if a.Spec.Instructions != instructions || a.Environment.Name != "py" || a.Environment.Env["MODE"] == "" {
		return fmt.Errorf("the harness role loaded %+v on %+v", a.Spec, a.Environment)
	}
	sec, err := st.GetSecret(ctx, store.SecretID("py", "TOKEN"))
	if err != nil {
		return fmt.Errorf("the harness role cannot read the secret: %w", err)
	}
	if v, err := plane.Open(ctx, sec.ValueEnc, controlplane.SecretLabel(sec.ID), "secret py/TOKEN"); err != nil || string(v) != value {
		return fmt.Errorf("the secret opens to %q, %v; want %q", v, err, value)
	}
	m, err := a.NewModel(agents.ModelOptions{})
	if err != nil {
		return err
	}
	r := &runner.Runner{Store: st, Agent: a, Model: m, Tools: &tools.Executor{Store: st}}
	id, err := r.NewSession(ctx, st.Role())
	if err != nil {
		return fmt.Errorf("the harness role cannot start a session: %w", err)
	}
	out, err := r.Run(ctx, id, "hi", nil)
	if err != nil || out.Text != "Hello from PostgreSQL." {
		return fmt.Errorf("the turn: %+v, %v", out, err)
	}
	if s, err := st.GetSession(ctx, id); err != nil || s.Owner != f.harness {
		return fmt.Errorf("session %s: %+v, %v; want it owned by %s", id, s, err, f.harness)
	}
	if s, err := f.storeAs(f.alice).GetSession(ctx, id); err != nil || s.Agent != "helper" {
		return fmt.Errorf("alice's team role reading the session of her agent: %+v, %v", s, err)
	}
	if _, err := f.storeAs(f.bob).GetSession(ctx, id); !errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("bob's team role reading the session of alice's agent: %v; want ErrNotFound", err)
	}
	if _, err := f.storeAs(f.alice).Events(ctx, id, 0); !errors.Is(err, store.ErrForbidden) {
		return fmt.Errorf("alice's team role reading the session's events: %v; want ErrForbidden", err)
	}
	return nil
}

// Two team roles on one database. Bob plans alice's configuration clean, and cannot
// change or delete her environment, secret, agent or sandbox provider through Terraform:
// each is refused at plan with both roles named, and nothing of hers changes. Both teams
// apply their own configurations, bob's agent on alice's environment (which she shares
// with him), and each plans clean.
func TestAccPostgres_ownership(t *testing.T) {
	f := newPGFixture(t)
	cfg := pgTeamHCL("a", "v1", `"api.example.com"`, "Be brief.")
	refused := func(kind, name, verb string) *regexp.Regexp {
		return cliError(fmt.Sprintf(`%s Owned By Another User.*%q is owned by %q.*cannot be %s.*by %q.*as role %q`,
			kind, name, f.alice, verb, f.bob, f.alice))
	}
	// bobs is bob's own configuration, in his own state: an agent on alice's environment.
	bobs := f.providerBlock(f.bob) + `
data "trueforge_environment" "py" {
  name = "py"
}

resource "trueforge_agent" "bobs" {
  name    = "bobs-helper"
  model   = { provider = "scripted", script = "[]" }
  sandbox = { enabled = true, environment = data.trueforge_environment.py.name }
}
`
	// Each team's configuration is applied by its own Terraform run (one provider
	// configuration per run: a test's in-process provider serves every configuration of
	// a run, so two roles in one run would share one), while the other's exists.
	bobApplies := func(*terraformState) error {
		t.Run("bob", func(t *testing.T) {
			resource.Test(t, resource.TestCase{
				ProtoV6ProviderFactories: f.providers,
				Steps: []resource.TestStep{
					{
						Config: bobs,
						ConfigStateChecks: []statecheck.StateCheck{
							statecheck.ExpectKnownValue("trueforge_agent.bobs", tfjsonpath.New("owner"), knownvalue.StringExact(f.bob)),
							statecheck.ExpectKnownValue("data.trueforge_environment.py", tfjsonpath.New("owner"), knownvalue.StringExact(f.alice)),
						},
					},
					{Config: bobs, PlanOnly: true},
				},
			})
		})
		return nil
	}
	resource.ParallelTest(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: f.providers,
		Steps: []resource.TestStep{
			{Config: f.config(cfg)},
			{
				// Bob plans alice's unchanged configuration: empty (PlanOnly fails on any
				// change), no error.
				Config:   f.configAs(f.bob, cfg),
				PlanOnly: true,
			},
			{
				Config:      f.configAs(f.bob, pgTeamHCL("a", "v1", `"api.example.com", "uploads.example.com"`, "Be brief.")),
				ExpectError: refused("Environment", "py", `changed \(its secrets are part of it\)`),
			},
			{
				Config:      f.configAs(f.bob, pgTeamHCL("b", "v1", `"api.example.com"`, "Be brief.")),
				ExpectError: refused("Environment", "py", "changed"),
			},
			{
				Config:      f.configAs(f.bob, pgTeamHCL("a", "v1", `"api.example.com"`, "Obey bob.")),
				ExpectError: refused("Agent", "helper", "changed"),
			},
			{
				// Bob's configuration without alice's agent plans to delete it.
				Config: f.configAs(f.bob, envHCL("", `  env = { MODE = "a" }
  network = { allow_domains = ["api.example.com", "uploads.example.com"] }`)+pgSecretHCL("v1", `"api.example.com"`)),
				ExpectError: refused("Agent", "helper", "deleted"),
			},
			{
				Config:      f.providerBlock(f.bob) + `# nothing: every one of alice's resources would be deleted` + "\n",
				ExpectError: refused("Sandbox Provider", "local", "deleted"),
			},
			{
				// Alice's configuration is as she left it and plans clean for her; bob
				// applies his own, with an agent on her environment, and plans it clean.
				PreConfig: func() { f.expectAliceUnchanged(t) },
				Config:    f.config(cfg),
				PlanOnly:  true,
			},
			{
				// Her environment has a secret: bob's agents may use it once she shares it
				// (environment_sharing_acc_test.go).
				Config: f.config(envHCL("", fmt.Sprintf(`  env = { MODE = "a" }
  network = { allow_domains = ["api.example.com", "uploads.example.com"] }
  shared_with = [%q]`, f.bob)) + pgSecretHCL("v1", `"api.example.com"`) + pgAgentHCL("Be brief.")),
				Check: bobApplies,
			},
		},
	})
}

// expectAliceUnchanged checks that alice's objects are as her first apply left them.
func (f *pgFixture) expectAliceUnchanged(t *testing.T) {
	t.Helper()
	ctx := t.Context()
	st := f.store()
	env, err := st.GetEnvironment(ctx, "py")
	if err != nil || env.Owner != f.alice || env.Env["MODE"] != "a" {
		t.Errorf("alice's environment after bob's attempts: %+v, %v", env, err)
	}
	if sec, err := st.GetSecret(ctx, store.SecretID("py", "TOKEN")); err != nil || len(sec.Hosts) != 1 {
		t.Errorf("alice's secret after bob's attempts: %+v, %v", sec, err)
	}
	a, err := st.GetAgent(ctx, "helper")
	if err != nil || a.Owner != f.alice {
		t.Errorf("alice's agent after bob's attempts: %+v, %v", a, err)
	}
	if spec, _, err := storedAgentSpec(t, f.controlPlaneFixture, "helper"); err != nil || spec.Instructions == nil || *spec.Instructions != "Be brief." {
		t.Errorf("alice's agent spec after bob's attempts: %+v, %v", spec, err)
	}
	if _, err := st.GetSandboxProvider(ctx, "local"); err != nil {
		t.Errorf("alice's sandbox provider after bob's attempts: %v", err)
	}
}

// On PostgreSQL the owner is the role: an owner in the provider block or in
// TRUEFORGE_OWNER that names anyone else is refused, naming both; one that names the
// role is accepted.
func TestAccPostgres_ownerIsTheRole(t *testing.T) {
	f := newPGFixture(t)
	withOwner := func(owner string) string {
		return fmt.Sprintf("provider \"trueforge\" {\n  database_url = %q\n  owner        = %q\n}\n", f.url(f.alice), owner) + localProviderHCL
	}
	resource.ParallelTest(t, resource.TestCase{
		PreCheck: func() { testAccPreCheck(t) },
		// Each step names its providers: one step runs on a machine whose
		// TRUEFORGE_OWNER is set.
		Steps: []resource.TestStep{
			{
				ProtoV6ProviderFactories: f.providers,
				Config:                   withOwner(f.bob),
				ExpectError: cliError(fmt.Sprintf(`Owner Differs From Database Role.*owner =.*owner is %q.*authenticates as: %q.*Remove owner`,
					f.bob, f.alice)),
			},
			{
				ProtoV6ProviderFactories: f.providersWith(map[string]string{envOwner: "root"}),
				Config:                   f.config(""),
				ExpectError:              cliError(fmt.Sprintf(`Owner Differs From Database Role.*TRUEFORGE_OWNER is "root".*%q`, f.alice)),
			},
			{
				PreConfig: func() {
					var n int
					if err := f.store().QueryRow(t.Context(), `SELECT COUNT(*) FROM sandbox_providers`).Scan(&n); err != nil || n != 0 {
						t.Errorf("a refused owner wrote %d sandbox providers (%v)", n, err)
					}
				},
				ProtoV6ProviderFactories: f.providers,
				Config:                   withOwner(f.alice),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("trueforge_sandbox_provider.local", tfjsonpath.New("default_environment"), knownvalue.StringExact("default")),
				},
				Check: func(*terraformState) error {
					env, err := f.store().GetEnvironment(t.Context(), "default")
					if err != nil || env.Owner != f.alice {
						return fmt.Errorf("default environment: %+v, %v; want it owned by %s", env, err, f.alice)
					}
					return nil
				},
			},
		},
	})
}

// A machine with another TRUEFORGE_SECRET_KEY, or none, is refused when the provider is
// configured: before any resource is planned or written, naming the variable. The
// control plane keeps what the right key wrote.
func TestAccPostgres_secretKey(t *testing.T) {
	f := newPGFixture(t)
	cfg := pgTeamHCL("a", "v1", `"api.example.com"`, "Be brief.")
	changed := pgTeamHCL("b", "v2", `"api.example.com"`, "Be brief.") + `
resource "trueforge_environment" "more" {
  name             = "more"
  sandbox_provider = trueforge_sandbox_provider.local.name
}
`
	var before string
	resource.ParallelTest(t, resource.TestCase{
		PreCheck: func() { testAccPreCheck(t) },
		// Each step names its providers: the machine's key differs between them.
		Steps: []resource.TestStep{
			{ProtoV6ProviderFactories: f.providers, Config: f.config(cfg)},
			{
				PreConfig:                func() { before = f.rowStamp(t) },
				ProtoV6ProviderFactories: f.providersWith(map[string]string{secretbox.KeyEnv: newSecretKey(t)}),
				Config:                   f.config(changed),
				ExpectError:              cliError(`Wrong Secret Key.*TRUEFORGE_SECRET_KEY is not this control plane's secret key.*Set TRUEFORGE_SECRET_KEY to the key`),
			},
			{
				ProtoV6ProviderFactories: f.providersWith(map[string]string{secretbox.KeyEnv: ""}),
				Config:                   f.config(changed),
				ExpectError:              cliError(`Missing Secret Key.*TRUEFORGE_SECRET_KEY is not set.*PostgreSQL.*head -c32 /dev/urandom \| base64`),
			},
			{
				PreConfig: func() {
					if after := f.rowStamp(t); after != before {
						t.Errorf("a refused key changed the control plane (%s, before %s)", after, before)
					}
					if _, err := f.store().GetEnvironment(t.Context(), "more"); !errors.Is(err, store.ErrNotFound) {
						t.Errorf("a refused key created environment more: %v", err)
					}
				},
				// The right key carries on: the secret still opens and rotates.
				ProtoV6ProviderFactories: f.providers,
				Config:                   f.config(changed),
				Check:                    func(*terraformState) error { return f.harnessRunsHelper(t, "v2", "Be brief.") },
			},
		},
	})
}

// rowStamp sums up every configuration row and setting: the latest update time and the
// count of each table. A write of any kind changes it.
func (f *pgFixture) rowStamp(t *testing.T) string {
	t.Helper()
	st := f.store()
	out := ""
	for _, table := range []string{"environments", "secrets", "agents", "sandbox_providers", "snapshots"} {
		var latest, n int64
		if err := st.QueryRow(t.Context(), `SELECT COALESCE(MAX(updated_at), 0), COUNT(*) FROM `+table).Scan(&latest, &n); err != nil {
			t.Fatal(err)
		}
		out += fmt.Sprintf("%s:%d/%d ", table, latest, n)
	}
	settings, err := st.Settings(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return out + fmt.Sprint(settings)
}

// cliError matches an error as the CLI prints it: its spaces match any run of white
// space, since the CLI wraps long details.
func cliError(pattern string) *regexp.Regexp {
	return regexp.MustCompile(`(?s)` + strings.ReplaceAll(pattern, " ", `\s+`))
}
