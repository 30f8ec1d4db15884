package provider

import (
	"errors"
	"fmt"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

func TestAccEnvironmentVersionsPinned_sqlite(t *testing.T) {
	f := newFixture(t)
	testEnvironmentVersionsPinned(t, versionsPlane{config: f.config, store: f.store, providers: testAccProviders})
}

func TestAccEnvironmentVersionsPinned_postgres(t *testing.T) {
	f := newPGFixture(t)
	testEnvironmentVersionsPinned(t, versionsPlane{config: f.config, store: f.store, providers: f.providers})
}

// pinsHCL is environment py at build script v keeping 1 previous version, and agent
// "pinned" on version pin when pin is not "".
func pinsHCL(v, pin string) string {
	hcl := envHCL(versionScript(v), "  keep_versions = 1")
	if pin != "" {
		hcl += fmt.Sprintf(`
resource "trueforge_agent" "pinned" {
  name    = "pinned"
  model   = { provider = "scripted", script = "[]" }
  sandbox = { enabled = true, environment = trueforge_environment.py.name, environment_version = %q }
}
`, pin)
	}
	return hcl
}

// An agent pinned to v1 keeps v1's snapshot while py moves on to v2..v5 with
// keep_versions = 1 (versions says so: kept, pinned_by), and the agent still resolves
// to it; once the agent goes, the next apply of py collects v1, and exactly
// keep_versions previous versions are kept again.
func testEnvironmentVersionsPinned(t *testing.T, p versionsPlane) {
	snaps := map[string]string{}
	record := func(v string) resource.TestCheckFunc {
		return func(s *terraformState) error {
			snaps[v] = s.RootModule().Resources[envAddr].Primary.Attributes["snapshot_id"]
			return nil
		}
	}
	collected := func(vs ...string) resource.TestCheckFunc {
		return func(*terraformState) error {
			for _, v := range vs {
				if _, err := p.store().GetSnapshot(t.Context(), snaps[v]); !errors.Is(err, store.ErrNotFound) {
					return fmt.Errorf("%s's snapshot %s was not collected: %v", v, snaps[v], err)
				}
			}
			return nil
		}
	}
	pinnedV1 := func(at int) []statecheck.StateCheck {
		v := tfjsonpath.New("versions").AtSliceIndex(at)
		return []statecheck.StateCheck{
			statecheck.ExpectKnownValue(envAddr, v.AtMapKey("kept"), knownvalue.Bool(true)),
			statecheck.ExpectKnownValue(envAddr, v.AtMapKey("build_hash"), knownvalue.StringExact(versionHash("v1"))),
			statecheck.ExpectKnownValue(envAddr, v.AtMapKey("pinned_by"), knownvalue.ListExact([]knownvalue.Check{knownvalue.StringExact("pinned")})),
		}
	}
	pin := versionHash("v1")
	resource.ParallelTest(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: p.providers,
		Steps: []resource.TestStep{
			{
				Config: p.config(pinsHCL("v1", pin)),
				Check:  resource.ComposeTestCheckFunc(record("v1"), p.expectAgentSnapshot(t, "pinned", snaps, "v1")),
			},
			{
				Config: p.config(pinsHCL("v2", pin)),
				Check:  resource.ComposeTestCheckFunc(record("v2"), p.expectVersions(t, snaps, "v2", "v1")),
			},
			{
				// v1 is past keep_versions = 1: only the pin keeps it.
				Config:            p.config(pinsHCL("v3", pin)),
				ConfigStateChecks: pinnedV1(2),
				Check:             resource.ComposeTestCheckFunc(record("v3"), p.expectVersions(t, snaps, "v3", "v2", "v1")),
			},
			{
				Config: p.config(pinsHCL("v4", pin)),
				Check:  resource.ComposeTestCheckFunc(record("v4"), p.expectVersions(t, snaps, "v4", "v3", "v1"), collected("v2")),
			},
			{
				Config: p.config(pinsHCL("v5", pin)),
				ConfigStateChecks: append(pinnedV1(4),
					statecheck.ExpectKnownValue(envAddr, tfjsonpath.New("versions").AtSliceIndex(1).AtMapKey("pinned_by"), knownvalue.ListSizeExact(0))),
				Check: resource.ComposeTestCheckFunc(record("v5"), p.expectVersions(t, snaps, "v5", "v4", "v1"), collected("v2", "v3"),
					p.expectAgentSnapshot(t, "pinned", snaps, "v1")),
			},
			{
				// The pinned agent goes; py does not change, so nothing is collected yet.
				Config: p.config(pinsHCL("v5", "")),
				Check: func(*terraformState) error {
					if _, err := p.store().GetSnapshot(t.Context(), snaps["v1"]); err != nil {
						return fmt.Errorf("v1's snapshot, its agent just gone, is collected by py's next apply, not by the agent's delete: %v", err)
					}
					return nil
				},
			},
			{
				// py's next apply collects v1: exactly keep_versions = 1 previous version again.
				Config: p.config(pinsHCL("v6", "")),
				Check:  resource.ComposeTestCheckFunc(record("v6"), p.expectVersions(t, snaps, "v6", "v5"), collected("v1", "v4")),
			},
		},
	})
}
