package provider

import (
	"fmt"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
)

// Deletes that wait on the backend are bounded by timeouts.delete. On the Daytona
// emulator a snapshot delete answered with a 429 (Retry-After: 1 s) outlasts a 500 ms
// timeout: the environment's and then the sandbox provider's delete fail naming the
// timeout and what is left to do, and the next run converges. The default timeout lets
// the same cleanup finish.
func TestAccDaytona_deleteTimeouts(t *testing.T) {
	f := newDaytonaFixture(t)
	providerHCL := f.providerBlock(f.owner) + fmt.Sprintf(`
resource "trueforge_sandbox_provider" "daytona" {
  name     = "daytona"
  type     = "daytona"
  api_url  = %q
  api_key  = %q
  timeouts = { delete = "500ms" }
}
`, f.srv.URL(), f.key)
	py := daytonaEnvHCL("py", "echo py", "")
	slow := daytonaEnvHCL("slow", "echo slow", `  timeouts = { delete = "500ms" }`)
	slowDelete := func() { f.srv.InjectFaults("DELETE /snapshots/{id}", 1, 429) }
	resource.ParallelTest(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: f.providers,
		Steps: []resource.TestStep{
			{Config: providerHCL + py + slow},
			{
				PreConfig:   slowDelete,
				Config:      providerHCL + py,
				ExpectError: expectError(`Timed Out Deleting Environment.*"slow" was removed from the control plane.*timeouts.delete \(500ms\).*raise timeouts.delete`),
			},
			// The environment is gone: the refresh drops it from state, and nothing is left to do.
			{Config: providerHCL + py},
			{
				// The default timeout (20 minutes) waits the 429 out.
				PreConfig: func() { slowDelete(); f.srv.ResetCounts() },
				Config:    providerHCL,
				Check: func(*terraformState) error {
					if n := f.srv.Count("DELETE /snapshots/{id}"); n < 2 {
						return fmt.Errorf("DELETE /snapshots/{id}: %d requests, want the 429 and its retry at least", n)
					}
					return nil
				},
			},
			{
				PreConfig:   slowDelete,
				Config:      f.providerBlock(f.owner),
				ExpectError: expectError(`Timed Out Deleting Sandbox Provider.*"daytona" was removed from the control plane.*timeouts.delete \(500ms\).*delete the snapshots left behind \(.*snap`),
			},
		},
	})
}

// A secret's create and delete are bounded by its timeouts: a Daytona secret call
// answered with a 429 (Retry-After: 1 s) outlasts 500 ms and fails naming the timeout;
// without the fault the same configuration applies.
func TestAccDaytona_secretTimeouts(t *testing.T) {
	f := newDaytonaFixture(t)
	env := daytonaEnvHCL("py", "echo py", "")
	secret := `
resource "trueforge_secret" "gh" {
  environment = trueforge_environment.py.name
  env_name    = "GITHUB_TOKEN"
  hosts       = ["api.github.com"]
  value       = "ghp_timeouts"
  timeouts    = { create = "500ms", update = "500ms", delete = "500ms" }
}
`
	resource.ParallelTest(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: f.providers,
		Steps: []resource.TestStep{
			{
				PreConfig:   func() { f.srv.InjectFaults("POST /secret", 1, 429) },
				Config:      f.config(env + secret),
				ExpectError: expectError(`Timed Out Creating Secret.*timeouts.create \(500ms\).*Nothing was stored`),
			},
			{Config: f.config(env + secret)},
			{
				PreConfig:   func() { f.srv.InjectFaults("DELETE /secret/{id}", 1, 429) },
				Config:      f.config(env),
				ExpectError: expectError(`Timed Out Deleting Secret.*timeouts.delete \(500ms\).*Raise timeouts.delete`),
			},
			{Config: f.config(env)},
		},
	})
}
