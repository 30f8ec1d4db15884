package provider

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
)

// A no-op plan of a configuration that uses every resource and every environment
// setting on Daytona makes no write to Daytona and at most one read per resource, as
// the contract for plans says: a volume, a registry, an environment built from
// a Dockerfile with a context, a GPU and an entrypoint, and one with labels, address
// ranges, package indexes and both references.
func TestAccDaytona_noOpPlanOfEveryResourceReadsOnceWritesNothing(t *testing.T) {
	f := newDaytonaFixture(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "app.txt"), []byte("v1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := f.config(fmt.Sprintf(`
resource "trueforge_volume" "data" {
  name             = "data"
  sandbox_provider = trueforge_sandbox_provider.daytona.name
}

resource "trueforge_registry" "ghcr" {
  name             = "ghcr"
  sandbox_provider = trueforge_sandbox_provider.daytona.name
  url              = "ghcr.io"
  username         = "robot"
  password         = "registry-password"
}

resource "trueforge_environment" "df" {
  name             = "df"
  sandbox_provider = trueforge_sandbox_provider.daytona.name
  dockerfile       = "FROM platform\nCOPY app.txt /workspace/app.txt\n"
  build_context    = %q
  gpu              = 1
  gpu_type         = "H100"
  entrypoint       = ["sleep", "infinity"]
}

resource "trueforge_environment" "live" {
  name             = "live"
  sandbox_provider = trueforge_sandbox_provider.daytona.name
  build_script     = "echo live > /etc/live"
  registry         = trueforge_registry.ghcr.name
  labels           = { team = "data" }
  volumes          = [{ volume = trueforge_volume.data.name, mount_path = "/data", subpath = "team" }]
  network = {
    allow_domains      = ["api.example.com"]
    allow_cidrs        = ["192.30.252.0/22"]
    package_indexes    = ["pypi"]
    package_indexes_in = "build_and_sandbox"
  }
}
`, dir))
	// provider, volume, registry, two environments.
	const resources = 5
	noOp := func() {
		counts := f.srv.Counts()
		f.srv.ResetCounts()
		sum := 0
		for route, n := range counts {
			sum += n
			if !strings.HasPrefix(route, "GET ") && !strings.HasPrefix(route, "HEAD ") {
				t.Errorf("a no-op plan wrote to Daytona: %s x%d (all: %v)", route, n, counts)
			}
		}
		if sum > resources {
			t.Errorf("a no-op plan of %d resources made %d requests to Daytona: %v", resources, sum, counts)
		}
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: f.providers,
		Steps: []resource.TestStep{
			{Config: cfg},
			{Config: cfg, PlanOnly: true, PreConfig: f.srv.ResetCounts},
			{Config: cfg, PlanOnly: true, PreConfig: noOp},
			{Config: cfg, PlanOnly: true, PreConfig: noOp},
		},
	})
}
