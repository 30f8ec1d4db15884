package provider

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/tfversion"
)

const registryAddr = "trueforge_registry.ghcr"

func registryHCL(provider, username, password string) string {
	return fmt.Sprintf(`
resource "trueforge_registry" "ghcr" {
  name             = "ghcr"
  sandbox_provider = trueforge_sandbox_provider.%s.name
  url              = "ghcr.io"
  username         = %q
  project          = "acme"
%s
}
`, provider, username, password)
}

// registryIs checks the emulator's registry trueforge-ghcr.
func (f *daytonaFixture) registryIs(user, password string) func(*terraformState) error {
	return func(*terraformState) error {
		url, u, pw, ok := f.srv.Registry("trueforge-ghcr")
		if !ok || url != "ghcr.io" || u != user || pw != password {
			return fmt.Errorf("Daytona registry trueforge-ghcr: %q %q %q (exists %v); want ghcr.io %q %q", url, u, pw, ok, user, password)
		}
		return nil
	}
}

// A registry on Daytona: created as an organization docker registry with the
// write-only password, rotated in place by a new password_wo_version, imported, and
// repaired in place when changed or deleted outside Terraform; an environment naming
// it keeps it from being deleted.
func TestAccRegistry_daytona(t *testing.T) {
	f := newDaytonaFixture(t)
	cfg := func(user string, version int, env bool) string {
		body := registryHCL("daytona", user, fmt.Sprintf("  password_wo = \"pw-%d\"\n  password_wo_version = %d", version, version))
		if env {
			body += daytonaEnvHCL("py", "", "  registry = trueforge_registry.ghcr.name")
		}
		return f.config(body)
	}
	resource.ParallelTest(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: f.providers,
		TerraformVersionChecks:   []tfversion.TerraformVersionCheck{tfversion.SkipBelow(tfversion.Version1_11_0)},
		Steps: []resource.TestStep{
			{
				Config: cfg("bot", 1, false),
				Check: resource.ComposeTestCheckFunc(
					resource.TestCheckNoResourceAttr(registryAddr, "password_wo"),
					resource.TestCheckNoResourceAttr(registryAddr, "password"),
					f.registryIs("bot", "pw-1"),
				),
			},
			{
				Config:           cfg("bot", 1, false),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()}},
			},
			{
				// Rotation: in place, the same Daytona registry with the new password.
				Config:           cfg("bot", 2, false),
				ConfigPlanChecks: plannedAction(registryAddr, plancheck.ResourceActionUpdate),
				Check:            f.registryIs("bot", "pw-2"),
			},
			{
				ResourceName:            registryAddr,
				ImportState:             true,
				ImportStateId:           "ghcr",
				ImportStateVerify:       true,
				ImportStateVerifyIgnore: []string{"password_wo_version"},
			},
			{
				// Changed outside Terraform: the plan reverts it in place.
				PreConfig:        func() { f.srv.SetRegistryUsername("trueforge-ghcr", "mallory") },
				Config:           cfg("bot", 2, false),
				ConfigPlanChecks: plannedAction(registryAddr, plancheck.ResourceActionUpdate),
				Check:            f.registryIs("bot", "pw-2"),
			},
			{
				// Deleted outside Terraform: apply creates it again, password included.
				PreConfig:        func() { f.srv.DeleteRegistryOutOfBand("trueforge-ghcr") },
				Config:           cfg("bot", 2, false),
				ConfigPlanChecks: plannedAction(registryAddr, plancheck.ResourceActionUpdate),
				Check:            f.registryIs("bot", "pw-2"),
			},
			{
				// The plain password: kept in state (sealed in the store), rotated in
				// place, and read back without drift.
				Config:           f.config(registryHCL("daytona", "bot", `  password = "pw-plain"`)),
				ConfigPlanChecks: plannedAction(registryAddr, plancheck.ResourceActionUpdate),
				Check:            f.registryIs("bot", "pw-plain"),
			},
			{
				Config:           f.config(registryHCL("daytona", "bot", `  password = "pw-plain"`)),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()}},
			},
			{
				Config: cfg("bot", 2, true),
			},
			{
				// Daytona picks a registry by the image's host: an image of another host
				// would be pulled without these credentials.
				Config: f.config(registryHCL("daytona", "bot", "  password_wo = \"pw-2\"\n  password_wo_version = 2") +
					daytonaEnvHCL("py", "", "  image = \"docker.io/library/python:3.12\"\n  registry = trueforge_registry.ghcr.name")),
				ExpectError: regexp.MustCompile(`(?s)Image Not From Registry.*docker\.io.*ghcr\.io`),
			},
			{
				// The environment names it (literally, so Terraform does not order them):
				// deleting the registry is refused, naming the environment.
				Config:      f.config(daytonaEnvHCL("py", "", `  registry = "ghcr"`)),
				ExpectError: regexp.MustCompile(`(?s)Registry In Use.*environment\(s\)\s+py\.`),
			},
			{
				Config: cfg("bot", 2, true),
			},
		},
	})
}

// Removing project from a Daytona registry clears it on Daytona: the update sends
// project "" (Daytona keeps a project the PATCH omits, docker-registry.service.ts:151-159,
// v0.190), so the next plan is empty rather than showing the stale project as drift.
func TestAccRegistry_daytonaProjectRemoved(t *testing.T) {
	f := newDaytonaFixture(t)
	withProject := f.config(registryHCL("daytona", "bot", `  password = "pw"`))
	without := strings.Replace(withProject, `  project          = "acme"`+"\n", "", 1)
	projectIs := func(want string) func(*terraformState) error {
		return func(*terraformState) error {
			if got, ok := f.srv.RegistryProject("trueforge-ghcr"); !ok || got != want {
				return fmt.Errorf("Daytona registry trueforge-ghcr project %q (exists %v); want %q", got, ok, want)
			}
			return nil
		}
	}
	resource.ParallelTest(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: f.providers,
		Steps: []resource.TestStep{
			{Config: withProject, Check: projectIs("acme")},
			{
				Config:           without,
				ConfigPlanChecks: plannedAction(registryAddr, plancheck.ResourceActionUpdate),
				Check:            resource.ComposeTestCheckFunc(projectIs(""), resource.TestCheckNoResourceAttr(registryAddr, "project")),
			},
			{
				Config:           without,
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()}},
			},
		},
	})
}

// A url Daytona's @IsUrl() refuses (no top-level domain) is refused at plan, on url,
// before anything reaches Daytona.
func TestAccRegistry_daytonaURLRefused(t *testing.T) {
	f := newDaytonaFixture(t)
	hcl := strings.Replace(registryHCL("daytona", "bot", `  password = "pw"`), `"ghcr.io"`, `"localhost:5000"`, 1)
	resource.ParallelTest(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: f.providers,
		Steps: []resource.TestStep{{
			Config:      f.config(hcl),
			ExpectError: regexp.MustCompile(`(?s)url:\s+Daytona\s+refuses\s+registry\s+URL\s+"localhost:5000".*top-level\s+domain`),
		}},
	})
	if n := f.srv.Count("POST /docker-registry"); n != 0 {
		t.Fatalf("%d registry creates reached Daytona; want none", n)
	}
}

// The local backend runs only the platform image: a registry of a local provider is
// refused at plan, on the sandbox_provider attribute, saying what to use instead.
func TestAccRegistry_localRefused(t *testing.T) {
	f := newFixture(t)
	accTest(t,
		resource.TestStep{Config: f.config("")},
		resource.TestStep{
			Config:      f.config(registryHCL("local", "bot", "")),
			ExpectError: regexp.MustCompile(`Missing Password`),
		},
		resource.TestStep{
			Config:      f.config(registryHCL("local", "bot", `  password = "pw"`)),
			ExpectError: regexp.MustCompile(`(?s)Registries Not Supported By Backend.*need\s+a\s+daytona\s+provider`),
		},
	)
}
