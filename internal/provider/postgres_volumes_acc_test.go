package provider

import (
	"fmt"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// On PostgreSQL a volume belongs to the team that created it: another team's plan to
// delete it is refused at plan, naming the owner; and while another team's environment
// mounts it, its owner cannot delete it either, the refusal naming that environment.
func TestAccPostgres_volumeOwnershipAndUse(t *testing.T) {
	f := newPGFixture(t)
	withEnv := volumeHCL("local") + envHCL("", mountsCache("trueforge_volume.cache.name"))
	resource.ParallelTest(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: f.providers,
		Steps: []resource.TestStep{
			{Config: f.config(withEnv)},
			{
				// Bob plans alice's configuration without her volume.
				Config: f.configAs(f.bob, envHCL("", mountsCache(`"cache"`))),
				ExpectError: cliError(fmt.Sprintf(`Volume Owned By Another User.*"cache" is owned by %q.*cannot be deleted.*by %q`,
					f.alice, f.bob)),
			},
			{
				// Alice stops mounting it first: Terraform deletes a resource before it
				// updates those that referenced it, so both in one apply would fail.
				Config: f.config(volumeHCL("local") + envHCL("", "")),
			},
			{
				// Bob's own environment mounts alice's volume, which she shares with him
				// (issue 23: without that the database refuses his row): she cannot
				// delete it.
				PreConfig: func() {
					bob := f.storeAs(f.bob)
					ctx := t.Context()
					if err := f.storeAs(f.alice).UpdateVolume(ctx, "cache", store.DefaultVolumeSizeGB, []string{f.bob}); err != nil {
						t.Fatal(err)
					}
					if _, _, err := bob.ClaimSnapshot(ctx, store.Snapshot{ID: "snap-bobs", Provider: "local", BuildHash: "h-bobs", Spec: "{}"}, sandbox.StatusBuilding, sandbox.StatusFailed); err != nil {
						t.Fatal(err)
					}
					if err := bob.CreateEnvironment(ctx, store.Environment{ID: "env-bobs", Name: "bobs", Provider: "local", Owner: f.bob, Image: sandbox.PlatformImage,
						CPU: 1, MemoryGB: 1, DiskGB: 3, BuildHash: "h-bobs", SnapshotID: "snap-bobs",
						Settings: store.EnvironmentSettings{Volumes: []store.EnvironmentVolume{{Volume: "cache", MountPath: "/shared"}}}}); err != nil {
						t.Fatal(err)
					}
				},
				Config:      f.config(envHCL("", "")),
				ExpectError: cliError(`Volume In Use.*environment\(s\) bobs\.`),
			},
			{
				// Once bob's environment no longer mounts it, it goes.
				PreConfig: func() {
					if err := f.storeAs(f.bob).DeleteEnvironment(t.Context(), "bobs"); err != nil {
						t.Fatal(err)
					}
				},
				Config: f.config(envHCL("", "")),
			},
		},
	})
}
