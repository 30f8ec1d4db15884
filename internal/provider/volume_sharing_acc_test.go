package provider

import (
	"errors"
	"fmt"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

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
func testVolumeSharing(t *testing.T, p sharingPlane) {
	teamAApplies := func(wantRefused bool) func(*terraformState) error {
		return func(*terraformState) error {
			applyAsTeamA(t, p.providers, p.configAs(p.teamA, teamAVolumeHCL), wantRefused,
				cliError(fmt.Sprintf(`Volume Not Shared With This Owner.*volumes\[0\] names volume "cache", which is owned by %q and not shared with %q.*Ask %q to add %q .* to the volume's shared_with`,
					p.teamB, p.teamA, p.teamB, p.teamA)),
				statecheck.ExpectKnownValue("trueforge_environment.loot", tfjsonpath.New("owner"), knownvalue.StringExact(p.teamA)),
			)
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
		Steps: append(consentSteps(p, volumeAddr, "cache", teamBVolumeHCL, teamAApplies,
			statecheck.ExpectKnownValue(volumeAddr, tfjsonpath.New("size"), knownvalue.Int64Exact(1))),
			resource.TestStep{
				// Growing is in place; shrinking replaces.
				Config:            p.configAs(p.teamB, teamBVolumeSized(fmt.Sprintf("[%q]", p.teamA), 2)),
				ConfigPlanChecks:  plannedAction(volumeAddr, plancheck.ResourceActionUpdate),
				ConfigStateChecks: []statecheck.StateCheck{statecheck.ExpectKnownValue(volumeAddr, tfjsonpath.New("size"), knownvalue.Int64Exact(2))},
			},
			resource.TestStep{
				Config:           p.configAs(p.teamB, teamBVolumeSized(fmt.Sprintf("[%q]", p.teamA), 1)),
				ConfigPlanChecks: plannedAction(volumeAddr, plancheck.ResourceActionReplace),
			},
		),
	})
}

// directMount is team A writing, past the provider, an environment whose settings mount
// team B's unshared volume: inserted so, and updated so from a row that mounts nothing.
// The database refuses both.
func directMount(t *testing.T, p sharingPlane) error {
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
	testVolumeSharing(t, sqliteSharing(newFixture(t)))
}

// The attack on PostgreSQL: owners are two team roles of one database, which refuses the
// direct write too.
func TestAccPostgres_volumeSharing(t *testing.T) {
	testVolumeSharing(t, pgSharing(newPGFixture(t)))
}
