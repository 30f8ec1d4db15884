package provider

import (
	"fmt"
	"regexp"
	"testing"

	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// sharingPlane is what a sharing test needs of a control plane: two owners (team B,
// who owns what is shared, and team A, the attacker), each applying its own
// configuration in its own Terraform run.
type sharingPlane struct {
	teamB, teamA string
	providers    map[string]func() (tfprotov6.ProviderServer, error)
	// configAs is the configuration of one owner: the provider block as that owner with
	// body (team B's includes the sandbox provider).
	configAs func(owner, body string) string
	store    func() *store.Store
	// storeAs opens the store as an owner (on SQLite the owner is only a name, so any
	// store will do).
	storeAs func(owner string) *store.Store
	// database says whether the database itself refuses team A's direct writes
	// (PostgreSQL's row-level security).
	database bool
}

// sqliteSharing is the sharing plane on SQLite: owners are stated names, which only the
// provider tells apart.
func sqliteSharing(f *controlPlaneFixture) sharingPlane {
	return sharingPlane{
		teamB: "team_b", teamA: "team_a", providers: testAccProviders,
		configAs: func(owner, body string) string {
			if owner == "team_b" {
				return f.providerBlock(owner) + localProviderHCL + body
			}
			return f.providerBlock(owner) + body
		},
		store:   f.store,
		storeAs: func(string) *store.Store { return f.store() },
	}
}

// pgSharing is the sharing plane on PostgreSQL: owners are two team roles of one
// database, which refuses their direct writes too.
func pgSharing(f *pgFixture) sharingPlane {
	return sharingPlane{
		teamB: f.alice, teamA: f.bob, providers: f.providers,
		configAs: func(role, body string) string {
			if role == f.alice {
				return f.configAs(role, body)
			}
			return f.providerBlock(role) + body
		},
		store:    f.store,
		storeAs:  f.storeAs,
		database: true,
	}
}

// applyAsTeamA runs, in a sub-test of t, team A's apply of config against providers:
// refused with want when refused, else applied (its state passing checks) and then
// planned clean.
func applyAsTeamA(t *testing.T, providers map[string]func() (tfprotov6.ProviderServer, error), config string, refused bool, want *regexp.Regexp, checks ...statecheck.StateCheck) {
	steps := []resource.TestStep{{Config: config}}
	if refused {
		steps[0].ExpectError = want
	} else {
		steps[0].ConfigStateChecks = checks
		steps = append(steps, resource.TestStep{Config: config, PlanOnly: true})
	}
	t.Run(fmt.Sprintf("team A refused %v", refused), func(t *testing.T) {
		resource.Test(t, resource.TestCase{ProtoV6ProviderFactories: providers, Steps: steps})
	})
}

// consentSteps are the steps a sharing test starts with, team B's object at addr
// (imported as id) in config(shared_with): not shared, team A is refused (teamAApplies
// checks it, given true); shared with team A, it is not; imported, shared_with reads
// back. first are more checks of the first step.
func consentSteps(p sharingPlane, addr, id string, config func(sharedWith string) string, teamAApplies func(refused bool) func(*terraformState) error,
	first ...statecheck.StateCheck) []resource.TestStep {
	return []resource.TestStep{
		{
			Config:            p.configAs(p.teamB, config("")),
			ConfigStateChecks: append([]statecheck.StateCheck{statecheck.ExpectKnownValue(addr, tfjsonpath.New("shared_with"), knownvalue.SetSizeExact(0))}, first...),
			Check:             teamAApplies(true),
		},
		{
			// Sharing is in place: no replacement.
			Config: p.configAs(p.teamB, config(fmt.Sprintf("[%q]", p.teamA))),
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue(addr, tfjsonpath.New("shared_with"),
					knownvalue.SetExact([]knownvalue.Check{knownvalue.StringExact(p.teamA)})),
			},
			Check: teamAApplies(false),
		},
		{
			// Import reads shared_with back.
			ResourceName:            addr,
			ImportState:             true,
			ImportStateId:           id,
			ImportStateVerify:       true,
			ImportStateVerifyIgnore: []string{"timeouts"},
		},
	}
}

// teamBHCL is team B's environment py, with a network-scoped secret for its host and
// shared_with as given ("" leaves it out).
func teamBHCL(sharedWith string) string {
	extra := `  network = { allow_domains = ["b.example.com"] }`
	if sharedWith != "" {
		extra += "\n  shared_with = " + sharedWith
	}
	return envHCL("", extra) + `
resource "trueforge_secret" "tok" {
  environment = trueforge_environment.py.name
  env_name    = "B_TOKEN"
  value       = "team-b-secret"
  hosts       = ["b.example.com"]
}
`
}

// teamAHCL is team A's own configuration: an agent on team B's environment py.
const teamAHCL = `
data "trueforge_environment" "py" {
  name = "py"
}

resource "trueforge_agent" "thief" {
  name    = "thief"
  model   = { provider = "scripted", script = "[]" }
  sandbox = { enabled = true, environment = data.trueforge_environment.py.name }
}
`

// testEnvironmentSharing is issue 23's attack through Terraform: team A applies an agent
// on team B's environment that has a secret. The apply fails with a diagnostic naming
// sandbox.environment, the owner and the fix, and no agent row is stored; once team B
// sets shared_with = [team A], team A's apply passes and plans clean.
func testEnvironmentSharing(t *testing.T, p sharingPlane) {
	teamAApplies := func(wantRefused bool) func(*terraformState) error {
		return func(*terraformState) error {
			applyAsTeamA(t, p.providers, p.configAs(p.teamA, teamAHCL), wantRefused,
				cliError(fmt.Sprintf(`Environment Not Shared With This Owner.*Agent "thief" selects environment "py" \(sandbox.environment\), owned by %q.*does not share them with %q.*shared_with = \[%q\]`,
					p.teamB, p.teamA, p.teamA)),
				statecheck.ExpectKnownValue("trueforge_agent.thief", tfjsonpath.New("owner"), knownvalue.StringExact(p.teamA)),
				statecheck.ExpectKnownValue("data.trueforge_environment.py", tfjsonpath.New("shared_with"),
					knownvalue.SetExact([]knownvalue.Check{knownvalue.StringExact(p.teamA)})),
				statecheck.ExpectKnownValue("data.trueforge_environment.py", tfjsonpath.New("has_secrets"), knownvalue.Bool(true)),
			)
			_, err := p.store().GetAgent(t.Context(), "thief")
			if wantRefused && err == nil {
				return fmt.Errorf("team A's agent on team B's unshared environment was stored")
			}
			return nil
		}
	}
	resource.ParallelTest(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: p.providers,
		Steps: append(consentSteps(p, envAddr, "py", teamBHCL, teamAApplies),
			resource.TestStep{
				// Drift: shared_with changed outside Terraform shows in team B's plan.
				PreConfig: func() {
					if _, err := p.store().Exec(t.Context(), `UPDATE environments SET shared_with = '["*"]' WHERE name = 'py'`); err != nil {
						t.Fatal(err)
					}
				},
				Config:             p.configAs(p.teamB, teamBHCL(fmt.Sprintf("[%q]", p.teamA))),
				PlanOnly:           true,
				ExpectNonEmptyPlan: true,
			},
		),
	})
}

// The attack on SQLite: owners are stated names.
func TestAccEnvironmentSharing_secretsNeedConsent(t *testing.T) {
	testEnvironmentSharing(t, sqliteSharing(newFixture(t)))
}

// The attack on PostgreSQL: owners are two team roles of one database.
func TestAccPostgres_environmentSharing(t *testing.T) {
	testEnvironmentSharing(t, pgSharing(newPGFixture(t)))
}
