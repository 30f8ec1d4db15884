package provider

import (
	"errors"
	"fmt"
	"testing"

	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// volumePlane is what the volume consent test needs of a control plane: team B owns the
// sandbox provider and the volume, team A (the attacker) applies its own environment in
// its own Terraform run.
type volumePlane struct {
	teamB, teamA string
	providers    map[string]func() (tfprotov6.ProviderServer, error)
	configAs     func(owner, body string) string
	// storeAs opens the store as an owner (on SQLite the owner is only a name, so any
	// store will do).
	storeAs func(owner string) *store.Store
	// database says whether the database itself refuses team A's direct write
	// (PostgreSQL's row-level security).
	database bool
}

// teamBVolumeHCL is team B's volume cache, shared as given ("" leaves shared_with out).
func teamBVolumeHCL(sharedWith string) string { return teamBVolumeSized(sharedWith, 1) }

// teamBVolumeSized is teamBVolumeHCL of size GB.
func teamBVolumeSized(sharedWith string, size int) string {
	extra := ""
	if sharedWith != "" {
		extra = "  shared_with = " + sharedWith + "\n"
	}
	return fmt.Sprintf(`
resource "trueforge_volume" "cache" {
  name             = "cache"
  sandbox_provider = trueforge_sandbox_provider.local.name
  size             = %d
%s}
`, size, extra)
}

// teamAVolumeHCL is team A's own environment, mounting team B's volume by name.
const teamAVolumeHCL = `
resource "trueforge_environment" "loot" {
  name             = "loot"
  sandbox_provider = "local"
  volumes          = [{ volume = "cache", mount_path = "/data" }]
}
`

// testVolumeSharing is issue 23's attack through Terraform: team A lists team B's volume
// in its own environment. Its apply fails with a diagnostic naming volumes[0], the owner
// and the fix, and no environment row is stored; where the database enforces it, team
// A's direct write of an environment's settings that mount the volume is refused by the
// database. Once team B sets shared_with = [team A], team A's apply passes and plans
// clean.
func testVolumeSharing(t *testing.T, p volumePlane) {
	teamAApplies := func(wantRefused bool) func(*terraformState) error {
		return func(*terraformState) error {
			steps := []resource.TestStep{{Config: p.configAs(p.teamA, teamAVolumeHCL)}}
			if wantRefused {
				steps[0].ExpectError = cliError(fmt.Sprintf(`Volume Not Shared With This Owner.*volumes\[0\] names volume "cache", which is owned by %q and not shared with %q.*Ask %q to add %q .* to the volume's shared_with`,
					p.teamB, p.teamA, p.teamB, p.teamA))
			} else {
				steps[0].ConfigStateChecks = []statecheck.StateCheck{
					statecheck.ExpectKnownValue("trueforge_environment.loot", tfjsonpath.New("owner"), knownvalue.StringExact(p.teamA)),
				}
				steps = append(steps, resource.TestStep{Config: p.configAs(p.teamA, teamAVolumeHCL), PlanOnly: true})
			}
			t.Run(fmt.Sprintf("team A refused %v", wantRefused), func(t *testing.T) {
				resource.Test(t, resource.TestCase{ProtoV6ProviderFactories: p.providers, Steps: steps})
			})
			if _, err := p.storeAs(p.teamB).GetEnvironment(t.Context(), "loot"); wantRefused && err == nil {
				return errors.New("team A's environment mounting team B's unshared volume was stored")
			}
			if wantRefused && p.database {
				return directMount(t, p)
			}
			return nil
		}
	}
	resource.ParallelTest(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: p.providers,
		Steps: []resource.TestStep{
			{
				Config: p.configAs(p.teamB, teamBVolumeHCL("")),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(volumeAddr, tfjsonpath.New("shared_with"), knownvalue.SetSizeExact(0)),
					statecheck.ExpectKnownValue(volumeAddr, tfjsonpath.New("size"), knownvalue.Int64Exact(1)),
				},
				Check: teamAApplies(true),
			},
			{
				// Sharing is in place: no replacement, the files stay.
				Config: p.configAs(p.teamB, teamBVolumeHCL(fmt.Sprintf("[%q]", p.teamA))),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(volumeAddr, tfjsonpath.New("shared_with"),
						knownvalue.SetExact([]knownvalue.Check{knownvalue.StringExact(p.teamA)})),
				},
				Check: teamAApplies(false),
			},
			{
				ResourceName:            volumeAddr,
				ImportState:             true,
				ImportStateId:           "cache",
				ImportStateVerify:       true,
				ImportStateVerifyIgnore: []string{"timeouts"},
			},
			{
				// Growing is in place; shrinking replaces.
				Config: p.configAs(p.teamB, teamBVolumeSized(fmt.Sprintf("[%q]", p.teamA), 2)),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(volumeAddr, plancheck.ResourceActionUpdate),
				}},
				ConfigStateChecks: []statecheck.StateCheck{statecheck.ExpectKnownValue(volumeAddr, tfjsonpath.New("size"), knownvalue.Int64Exact(2))},
			},
			{
				Config: p.configAs(p.teamB, teamBVolumeSized(fmt.Sprintf("[%q]", p.teamA), 1)),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(volumeAddr, plancheck.ResourceActionReplace),
				}},
			},
		},
	})
}

// directMount is team A writing, past the provider, an environment whose settings mount
// team B's unshared volume: inserted so, and updated so from a row that mounts nothing.
// The database refuses both.
func directMount(t *testing.T, p volumePlane) error {
	ctx := t.Context()
	a := p.storeAs(p.teamA)
	if _, _, err := a.ClaimSnapshot(ctx, store.Snapshot{ID: "snap-raw", Provider: "local", BuildHash: "h-raw", Spec: "{}"}, sandbox.StatusBuilding, sandbox.StatusFailed); err != nil {
		return err
	}
	env := store.Environment{ID: "env-raw", Name: "raw", Provider: "local", Owner: p.teamA, Image: sandbox.PlatformImage,
		CPU: 1, MemoryGB: 1, DiskGB: 3, BuildHash: "h-raw", SnapshotID: "snap-raw",
		Settings: store.EnvironmentSettings{Volumes: []store.EnvironmentVolume{{Volume: "cache", MountPath: "/data"}}}}
	if err := a.CreateEnvironment(ctx, env); !errors.Is(err, store.ErrForbidden) {
		return fmt.Errorf("team A inserting an environment that mounts team B's unshared volume: %v; want the database's refusal", err)
	}
	env.Settings = store.EnvironmentSettings{}
	if err := a.CreateEnvironment(ctx, env); err != nil {
		return err
	}
	defer func() { _ = a.DeleteEnvironment(ctx, "raw") }()
	_, err := a.Exec(ctx, `UPDATE environments SET settings = '{"volumes":[{"volume":"cache","mount_path":"/data"}]}' WHERE name = 'raw'`)
	if !errors.Is(err, store.ErrForbidden) {
		return fmt.Errorf("team A's direct UPDATE of its environment's settings to mount team B's volume: %v; want the database's refusal", err)
	}
	return nil
}

// The attack on SQLite: owners are stated names; the provider refuses (the database has
// no roles to tell them apart).
func TestAccVolumeSharing_needsConsent(t *testing.T) {
	f := newFixture(t)
	testVolumeSharing(t, volumePlane{
		teamB: "team_b", teamA: "team_a", providers: testAccProviders,
		configAs: func(owner, body string) string {
			if owner == "team_b" {
				return f.providerBlock(owner) + localProviderHCL + body
			}
			return f.providerBlock(owner) + body
		},
		storeAs: func(string) *store.Store { return f.store() },
	})
}

// The attack on PostgreSQL: owners are two team roles of one database, which refuses the
// direct write too.
func TestAccPostgres_volumeSharing(t *testing.T) {
	f := newPGFixture(t)
	testVolumeSharing(t, volumePlane{
		teamB: f.alice, teamA: f.bob, providers: f.providers,
		configAs: func(role, body string) string {
			if role == f.alice {
				return f.configAs(role, body)
			}
			return f.providerBlock(role) + body
		},
		storeAs:  f.storeAs,
		database: true,
	})
}
