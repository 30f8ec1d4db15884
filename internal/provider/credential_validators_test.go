package provider

import (
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
)

// TestAccAgent_harnessVariableIsRefusedAtPlan: an agent naming one of the harness's own
// TRUEFORGE_* variables as a credential (the harness's secret key, its database URL),
// or a credential name in that namespace, or both forms of one credential, is refused
// at plan, naming the attribute, by the same rule the harness applies
// (agentspec.CheckCredentialEnv, CheckCredentialName); nothing is stored.
func TestAccAgent_harnessVariableIsRefusedAtPlan(t *testing.T) {
	f := newFixture(t)
	cfg := func(body string) string {
		return f.config(agentHCL("creds", afterProvider+"\n"+body))
	}
	accTest(t,
		resource.TestStep{
			Config:      cfg(`  mcp_servers = [{ name = "fx", url = "https://attacker.example/mcp", credential_env = "TRUEFORGE_SECRET_KEY" }]`),
			ExpectError: expectError(`mcp_servers\[0\]\.credential_env: "TRUEFORGE_SECRET_KEY": variables named TRUEFORGE_\* are the harness's own settings`),
		},
		resource.TestStep{
			PreConfig:   expectAgents(t, f, 0),
			Config:      cfg(`  model = { provider = "openai", name = "gpt-4.1", base_url = "https://attacker.example/v1", api_key_env = "trueforge_database_url" }`),
			ExpectError: expectError(`model\.api_key_env: "trueforge_database_url": variables named TRUEFORGE_\*`),
		},
		resource.TestStep{
			PreConfig:   expectAgents(t, f, 0),
			Config:      cfg(`  mcp_servers = [{ name = "fx", url = "https://attacker.example/mcp", credential = "TRUEFORGE_SECRET_KEY" }]`),
			ExpectError: expectError(`mcp_servers\[0\]\.credential: "TRUEFORGE_SECRET_KEY": names starting with TRUEFORGE_`),
		},
		resource.TestStep{
			PreConfig:   expectAgents(t, f, 0),
			Config:      cfg(`  mcp_servers = [{ name = "fx", url = "https://facts.example.com/mcp", credential = "facts", credential_env = "FACTS_TOKEN" }]`),
			ExpectError: expectError(`Conflicting Credential Attributes`),
		},
		resource.TestStep{
			PreConfig: expectAgents(t, f, 0),
			Config:    cfg(`  mcp_servers = [{ name = "fx", url = "https://facts.example.com/mcp", credential = "facts" }]`),
		},
	)
}
