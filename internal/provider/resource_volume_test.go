package provider

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox/daytona/daytonatest"
)

const volumeAddr = "trueforge_volume.cache"

func volumeHCL(provider string) string {
	return fmt.Sprintf(`
resource "trueforge_volume" "cache" {
  name             = "cache"
  sandbox_provider = trueforge_sandbox_provider.%s.name
}
`, provider)
}

// mountsCache is an environment's volumes attribute mounting the test volume; ref is
// how it names it (the resource's name attribute, or a literal that makes no
// dependency).
func mountsCache(ref string) string {
	return fmt.Sprintf("  volumes = [{ volume = %s, mount_path = \"/data\", subpath = \"team\" }]", ref)
}

// removeLocalVolume deletes a local volume outside Terraform: its directory, and its
// image (unmounted first) where it has one.
func removeLocalVolume(t *testing.T, dir string) {
	t.Helper()
	if exec.Command("mountpoint", "-q", dir).Run() == nil {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Fatalf("umount %s: %v: %s", dir, err, out)
		}
	}
	for _, p := range []string{dir, dir + ".img", dir + ".lock"} {
		if err := os.RemoveAll(p); err != nil {
			t.Fatal(err)
		}
	}
}

// On the local backend a volume is a directory under the data directory: created,
// imported, made again (empty) when deleted outside Terraform, and refused deletion,
// naming the environment, while an environment lists it.
func TestAccVolume_local(t *testing.T) {
	f := newFixture(t)
	dir := filepath.Join(f.dir, "local-backend", "volumes", "cache")
	exists := func(*terraformState) error {
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			return fmt.Errorf("volume directory %s: %v", dir, err)
		}
		return nil
	}
	withEnv := volumeHCL("local") + envHCL("", mountsCache("trueforge_volume.cache.name"))
	accTest(t,
		resource.TestStep{
			Config: f.config(withEnv),
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue(volumeAddr, tfjsonpath.New("id"), knownvalue.StringExact("cache")),
				statecheck.ExpectKnownValue(volumeAddr, tfjsonpath.New("remote_id"), knownvalue.StringExact("cache")),
			},
			Check: exists,
		},
		resource.TestStep{
			Config:           f.config(withEnv),
			ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()}},
		},
		resource.TestStep{
			ResourceName:      volumeAddr,
			ImportState:       true,
			ImportStateId:     "cache",
			ImportStateVerify: true,
		},
		resource.TestStep{
			// Deleted outside Terraform: the plan creates it again.
			PreConfig:        func() { removeLocalVolume(t, dir) },
			Config:           f.config(withEnv),
			ConfigPlanChecks: plannedAction(volumeAddr, plancheck.ResourceActionCreate),
			Check:            exists,
		},
		resource.TestStep{
			// The environment still lists it (by a literal name, so Terraform does not
			// order the two): the delete is refused, naming the environment.
			Config:      f.config(envHCL("", mountsCache(`"cache"`))),
			ExpectError: regexp.MustCompile(`(?s)Volume In Use.*environment\(s\)\s+py\.`),
		},
		resource.TestStep{
			Config: f.config(withEnv),
			Check:  exists,
		},
	)
}

// On Daytona a volume is a Daytona volume named trueforge-<name>, created ready; a
// refresh reads it (one call), one deleted outside Terraform is planned again, and a
// volume an environment lists cannot be deleted.
func TestAccVolume_daytona(t *testing.T) {
	f := newDaytonaFixture(t)
	withEnv := volumeHCL("daytona") + daytonaEnvHCL("py", "", mountsCache("trueforge_volume.cache.name"))
	resource.ParallelTest(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: f.providers,
		Steps: []resource.TestStep{
			{
				Config: f.config(withEnv),
				Check: func(*terraformState) error {
					if got := f.srv.VolumeState("trueforge-cache"); got != "ready" {
						return fmt.Errorf("Daytona volume trueforge-cache is %q, want ready", got)
					}
					return nil
				},
			},
			{
				PreConfig:        f.srv.ResetCounts,
				Config:           f.config(withEnv),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()}},
				Check: func(*terraformState) error {
					if n := f.srv.Count("POST /volumes") + f.srv.Count("DELETE /volumes/{id}"); n != 0 {
						return fmt.Errorf("a no-op plan wrote %d volume requests", n)
					}
					return nil
				},
			},
			{
				ResourceName:      volumeAddr,
				ImportState:       true,
				ImportStateId:     "cache",
				ImportStateVerify: true,
			},
			{
				PreConfig:        func() { f.srv.DeleteVolumeOutOfBand("trueforge-cache") },
				Config:           f.config(withEnv),
				ConfigPlanChecks: plannedAction(volumeAddr, plancheck.ResourceActionCreate),
			},
			{
				Config:      f.config(daytonaEnvHCL("py", "", mountsCache(`"cache"`))),
				ExpectError: regexp.MustCompile(`(?s)Volume In Use.*environment\(s\)\s+py\.`),
			},
			{
				Config: f.config(withEnv),
			},
		},
	})
}

// A trueforge_volume deleted and created again under the same name works on Daytona,
// although Daytona holds the name until its delete has finished (pending_delete counts,
// volume.service.ts:103-114, v0.190): the create waits for the delete and makes a new
// volume.
func TestAccVolume_daytonaRecreatedWhileDeleting(t *testing.T) {
	f := newDaytonaFixture(t, daytonatest.WithVolumeDeleteDelay(time.Second))
	var first string
	resource.ParallelTest(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: f.providers,
		Steps: []resource.TestStep{
			{
				Config: f.config(volumeHCL("daytona")),
				Check: resource.TestCheckResourceAttrWith(volumeAddr, "remote_id", func(id string) error {
					first = id
					return nil
				}),
			},
			{Config: f.config("")},
			{
				Config: f.config(volumeHCL("daytona")),
				Check: resource.TestCheckResourceAttrWith(volumeAddr, "remote_id", func(id string) error {
					if id == first || f.srv.VolumeState(id) != "ready" || f.srv.VolumeState(first) != "deleted" {
						return fmt.Errorf("volume %s (%s), the first %s (%s); want a new ready volume", id, f.srv.VolumeState(id), first, f.srv.VolumeState(first))
					}
					return nil
				}),
			},
		},
	})
}

// An environment naming a volume that does not exist is warned about at plan (the same
// apply may create it) and refused at apply, on volumes[0].volume, naming the volume.
func TestAccVolume_environmentNamesMissingVolume(t *testing.T) {
	f := newFixture(t)
	accTest(t,
		resource.TestStep{
			Config:      f.config(envHCL("", mountsCache(`"nope"`))),
			ExpectError: regexp.MustCompile(`(?s)Volume Not Found.*No volume "nope" exists`),
		},
	)
}
