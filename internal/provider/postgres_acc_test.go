package provider

import (
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
)

// The fixture's control plane works: alice applies a sandbox provider, and owns what it
// created (the default environment) as her role.
func TestAccPostgres_fixture(t *testing.T) {
	f := newPGFixture(t)
	resource.ParallelTest(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: f.providers,
		Steps: []resource.TestStep{{
			Config: f.config(envHCL("", "")),
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue(envAddr, tfjsonpath.New("owner"), knownvalue.StringExact(f.alice)),
			},
		}},
	})
}
