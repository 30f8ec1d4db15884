package provider

import (
	"regexp"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
)

// A shared configuration plans every team's resources: planning another owner's
// environment and secret is fine while nothing changes; changing either is refused.
func TestAccOwnership_othersMayPlanButNotChange(t *testing.T) {
	f := newFixture(t)
	secret := func(hosts string) string {
		return `
resource "trueforge_secret" "tok" {
  environment = trueforge_environment.py.name
  env_name    = "TOKEN"
  value       = "v1"
  hosts       = [` + hosts + `]
}
`
	}
	body := envHCL("", `  env = { A = "1" }
  network = { allow_domains = ["api.example.com"] }`) + secret(`"api.example.com"`)
	asBob := func(body string) string { return f.providerBlock("bob") + localProviderHCL + body }
	accTest(t,
		resource.TestStep{Config: f.config(body)},
		resource.TestStep{
			// bob plans alice's unchanged resources: an empty plan (PlanOnly fails on
			// any change), no error.
			Config:   asBob(body),
			PlanOnly: true,
		},
		resource.TestStep{
			// Changing the secret is changing alice's environment.
			Config: asBob(envHCL("", `  env = { A = "1" }
  network = { allow_domains = ["api.example.com"] }`) + secret(`"api.example.com", "uploads.example.com"`)),
			ExpectError: regexp.MustCompile(`(?s)Environment Owned By Another User.*owned by "alice".*cannot be changed \(its secrets are\s+part of it\)\s+by "bob"`),
		},
		resource.TestStep{
			PreConfig: func() {
				sec, err := f.store().GetSecret(t.Context(), "py/TOKEN")
				if err != nil || len(sec.Hosts) != 1 {
					t.Errorf("bob changed alice's secret: %+v, %v", sec, err)
				}
			},
			Config:   f.config(body),
			PlanOnly: true,
		},
	)
}

// The reserved default environment is owned by whoever created the sandbox provider, like
// any other: another owner cannot add secrets to it (they would reach every agent that
// runs on default).
func TestAccOwnership_defaultEnvironmentSecrets(t *testing.T) {
	f := newFixture(t)
	secret := `
resource "trueforge_secret" "tok" {
  environment = trueforge_sandbox_provider.local.default_environment
  env_name    = "TOKEN"
  value       = "bobs-token"
  hosts       = ["api.example.com"]
}
`
	accTest(t,
		resource.TestStep{Config: f.config("")},
		resource.TestStep{
			Config:      f.providerBlock("bob") + localProviderHCL + secret,
			ExpectError: regexp.MustCompile(`(?s)Environment Owned By Another User.*"default" is owned by "alice".*by\s+"bob"`),
		},
		resource.TestStep{
			PreConfig: func() {
				if secs, err := f.store().ListSecrets(t.Context(), "default"); err != nil || len(secs) != 0 {
					t.Errorf("bob added a secret to default: %v, %v", secs, err)
				}
			},
			// Its owner can.
			Config: f.config(secret),
		},
	)
}
