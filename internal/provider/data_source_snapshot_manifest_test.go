package provider

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
)

// A build script that installs a pinned package (what pip and dpkg leave: a dist-info
// folder, a status.d stanza; builds here have no network) is in its snapshot's manifest,
// read by environment or by snapshot id, and in the CycloneDX document.
func TestAccDataSourceSnapshotManifest(t *testing.T) {
	f := newFixture(t)
	cfg := f.config(`
resource "trueforge_environment" "pinned" {
  name             = "pinned"
  sandbox_provider = trueforge_sandbox_provider.local.name
  build_script     = <<-EOT
    d=/usr/local/lib/python3.11/dist-packages/pinned_pkg-1.2.3.dist-info
    mkdir -p $d /var/lib/dpkg/status.d
    printf 'Metadata-Version: 2.1\nName: pinned_pkg\nVersion: 1.2.3\n' > $d/METADATA
    printf 'Package: trueforge-demo\nVersion: 0.9-1\nArchitecture: all\n' > /var/lib/dpkg/status.d/trueforge-demo
  EOT
}

data "trueforge_snapshot_manifest" "by_env" {
  environment = trueforge_environment.pinned.name
}

data "trueforge_snapshot_manifest" "by_id" {
  snapshot_id = trueforge_environment.pinned.snapshot_id
}
`)
	const env, byID = "data.trueforge_snapshot_manifest.by_env", "data.trueforge_snapshot_manifest.by_id"
	accTest(t,
		resource.TestStep{
			Config: cfg,
			Check: resource.ComposeAggregateTestCheckFunc(
				resource.TestCheckResourceAttrPair(env, "snapshot_id", "trueforge_environment.pinned", "snapshot_id"),
				resource.TestCheckResourceAttrPair(env, "digest", byID, "digest"),
				resource.TestMatchResourceAttr(env, "digest", regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)),
				resource.TestCheckTypeSetElemNestedAttrs(env, "packages.*", map[string]string{
					"ecosystem": "pypi", "name": "pinned-pkg", "version": "1.2.3", "arch": "", "purl": "pkg:pypi/pinned-pkg@1.2.3"}),
				resource.TestCheckTypeSetElemNestedAttrs(env, "packages.*", map[string]string{
					"ecosystem": "deb", "name": "trueforge-demo", "version": "0.9-1", "arch": "all"}),
				resource.TestCheckResourceAttr(env, "omitted", "0"),
				resource.TestCheckResourceAttrWith(env, "counts.pypi", positive),
				resource.TestCheckResourceAttrWith(env, "cyclonedx", func(v string) error {
					var bom struct {
						BOMFormat   string `json:"bomFormat"`
						SpecVersion string `json:"specVersion"`
						Components  []struct {
							Name, Version, PURL string
						} `json:"components"`
					}
					if err := json.Unmarshal([]byte(v), &bom); err != nil {
						return err
					}
					if bom.BOMFormat != "CycloneDX" || bom.SpecVersion != "1.5" {
						return fmt.Errorf("bomFormat %q specVersion %q", bom.BOMFormat, bom.SpecVersion)
					}
					for _, c := range bom.Components {
						if c.PURL == "pkg:pypi/pinned-pkg@1.2.3" {
							return nil
						}
					}
					return fmt.Errorf("no component for pinned-pkg among %d", len(bom.Components))
				}),
			),
		},
		resource.TestStep{
			Config: cfg + `
data "trueforge_snapshot_manifest" "both" {
  snapshot_id = trueforge_environment.pinned.snapshot_id
  environment = "pinned"
}
`,
			ExpectError: regexp.MustCompile(`(?s)Invalid Attribute Combination`),
		},
		dataSourceStep(cfg, "trueforge_snapshot_manifest", "ghost", "environment", "ghost", regexp.MustCompile(`(?s)Environment Not Found.*No environment "ghost"`)),
	)
}

func positive(v string) error {
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		return fmt.Errorf("%q is not a positive count", v)
	}
	return nil
}

// On Daytona the manifest is read by a reader in a short-lived sandbox of the snapshot
// (the emulator runs it for real, on the host's platform image), recorded when the
// build turns Ready, and the sandbox is gone afterwards.
func TestAccDaytona_snapshotManifest(t *testing.T) {
	f := newDaytonaFixture(t)
	cfg := f.config(daytonaEnvHCL("mf", "echo built", "") + `
data "trueforge_snapshot_manifest" "mf" {
  environment = trueforge_environment.mf.name
}
`)
	resource.ParallelTest(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProviders,
		Steps: []resource.TestStep{{
			Config: cfg,
			Check: resource.ComposeAggregateTestCheckFunc(
				resource.TestCheckResourceAttrPair("data.trueforge_snapshot_manifest.mf", "snapshot_id", "trueforge_environment.mf", "snapshot_id"),
				resource.TestMatchResourceAttr("data.trueforge_snapshot_manifest.mf", "digest", regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)),
				resource.TestCheckResourceAttrWith("data.trueforge_snapshot_manifest.mf", "package_count", positive),
				func(*terraformState) error {
					created, deleted := f.srv.Count("POST /sandbox"), f.srv.Count("DELETE /sandbox/{id}")
					if created == 0 || created != deleted {
						return fmt.Errorf("the emulator saw %d sandboxes created and %d deleted; want the manifest's one, deleted", created, deleted)
					}
					return nil
				},
			),
		}},
	})
}

// On a shared PostgreSQL control plane the team role whose apply builds writes the
// manifest (it is granted like snapshots), and reads it back.
func TestAccPostgres_snapshotManifest(t *testing.T) {
	f := newPGFixture(t)
	resource.ParallelTest(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: f.providers,
		Steps: []resource.TestStep{{
			Config: f.config(pgTeamHCL("a", "v1", `"api.example.com"`, "Be brief.") + `
data "trueforge_snapshot_manifest" "team" {
  snapshot_id = ` + envAddr + `.snapshot_id
}
`),
			Check: resource.ComposeAggregateTestCheckFunc(
				resource.TestMatchResourceAttr("data.trueforge_snapshot_manifest.team", "digest", regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)),
				resource.TestCheckResourceAttrWith("data.trueforge_snapshot_manifest.team", "package_count", positive),
			),
		}},
	})
}
