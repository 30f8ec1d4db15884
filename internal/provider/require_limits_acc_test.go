package provider

import (
	"fmt"
	"os"
	"regexp"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
)

// localWithLimits is a local sandbox provider with require_limits set to setting ("" to
// leave it unset) and an environment on it.
func (f *controlPlaneFixture) localWithLimits(setting string) string {
	line := ""
	if setting != "" {
		line = "  require_limits = " + setting + "\n"
	}
	return f.providerBlock(f.owner) + `
resource "trueforge_sandbox_provider" "local" {
  name = "local"
  type = "local"
` + line + `}

resource "trueforge_environment" "py" {
  name             = "py"
  sandbox_provider = trueforge_sandbox_provider.local.name
}
`
}

// requireLimitsStored checks the require_limits the control plane holds for the harness.
func requireLimitsStored(t *testing.T, f *controlPlaneFixture, want *bool) resource.TestCheckFunc {
	return func(*terraformState) error {
		p, err := f.store().GetSandboxProvider(t.Context(), "local")
		if err != nil {
			return err
		}
		if (p.RequireLimits == nil) != (want == nil) || (want != nil && *p.RequireLimits != *want) {
			return fmt.Errorf("stored require_limits %v, want %v", show(p.RequireLimits), show(want))
		}
		return nil
	}
}

func show(b *bool) any {
	if b == nil {
		return "unset"
	}
	return *b
}

// On a host without a writable cgroup (forced with the local backend's diagnostic
// override, so this runs as root too), require_limits = true fails the plan with the
// limits and the fix, false applies (with a warning, which terraform-plugin-testing
// cannot see: TestEnvironmentPlanSaysWhichLimitsAreNotEnforced checks it) and is stored
// for the harness, and unset means required when Terraform runs as root. Not parallel:
// t.Setenv.
func TestAccSandboxProvider_requireLimits(t *testing.T) {
	t.Setenv("TRUEFORGE_LOCAL_LIMITS", "rlimit")
	f := newFixture(t)
	refused := regexp.MustCompile(`(?s)Sandbox Limits Cannot Be Enforced.*limit\(s\) enforced.*cpu: no writable cgroup.*require_limits\s+=\s+false`)
	no := false
	steps := []resource.TestStep{
		{
			// Required: the plan fails before anything is built or stored.
			Config:      f.localWithLimits("true"),
			ExpectError: refused,
		},
		{
			PreConfig: func() { expectNoSandboxProvider(t, f, "local") },
			Config:    f.localWithLimits("false"),
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue(providerAddr, tfjsonpath.New("require_limits"), knownvalue.Bool(false)),
				statecheck.ExpectKnownValue(providerAddr, tfjsonpath.New("status"), knownvalue.StringExact("Ready")),
				statecheck.ExpectKnownValue("trueforge_environment.py", tfjsonpath.New("status"), knownvalue.StringExact("Ready")),
			},
			Check: requireLimitsStored(t, f, &no),
		},
		{
			ResourceName:            providerAddr,
			ImportState:             true,
			ImportStateId:           "local",
			ImportStateVerify:       true,
			ImportStateVerifyIgnore: []string{"timeouts"},
		},
		{
			// Turning it on is refused at plan, and the stored setting stays.
			Config:      f.localWithLimits("true"),
			ExpectError: refused,
		},
	}
	// Unset: required when Terraform runs as root.
	if os.Geteuid() == 0 {
		steps = append(steps, resource.TestStep{
			PreConfig: func() {
				if err := requireLimitsStored(t, f, &no)(nil); err != nil {
					t.Errorf("after the refused change: %v", err)
				}
			},
			Config:      f.localWithLimits(""),
			ExpectError: regexp.MustCompile(`(?s)Sandbox Limits Cannot Be Enforced.*require_limits\s+is\s+unset\s+and\s+Terraform\s+runs\s+as\s+root`),
		})
	} else {
		steps = append(steps, resource.TestStep{
			Config: f.localWithLimits(""),
			Check:  requireLimitsStored(t, f, nil),
		})
	}
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProviders,
		Steps:                    steps,
	})
}

// require_limits belongs to the local backend: set on another type, it is refused.
func TestAccSandboxProvider_requireLimitsLocalOnly(t *testing.T) {
	f := newFixture(t)
	resource.ParallelTest(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProviders,
		Steps: []resource.TestStep{{
			Config: f.providerBlock(f.owner) + `
resource "trueforge_sandbox_provider" "dt" {
  name           = "dt"
  type           = "daytona"
  api_key        = "dtn_x"
  require_limits = true
}
`,
			PlanOnly:    true,
			ExpectError: attrError("require_limits", `require_limits configures the backends that enforce sandbox limits on this host \(local\)`),
		}},
	})
}
