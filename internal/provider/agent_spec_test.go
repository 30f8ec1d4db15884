package provider

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/trueforge/terraform-provider-trueforge/internal/agentspec"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/agents"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/harnesstest"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// TestAgentSpecRoundTrip: what the provider stores for an agent (spec, and the row's
// environment reference) is what trueforge-harness runs, field by field, and Read gives
// back the model it was written from. The acceptance tests do the same through
// Terraform, where the schema's defaults apply (TestAccAgent_basic).
func TestAgentSpecRoundTrip(t *testing.T) {
	str, null := types.StringValue, types.StringNull()
	model := func(provider, name, baseURL, keyEnv, script types.String) types.Object {
		return types.ObjectValueMust(modelSettingsAttrTypes, map[string]attr.Value{
			"api_key_credential": null, "api_key_env": keyEnv, "base_url": baseURL, "name": name, "provider": provider, "script": script,
		})
	}
	server := func(name, url string, credEnv types.String, tools types.List) attr.Value {
		return types.ObjectValueMust(mcpServerAttrTypes, map[string]attr.Value{"allowed_tools": tools, "credential": null, "credential_env": credEnv, "name": str(name), "url": str(url)})
	}
	// fullServer sets every attribute, both forms of the credential included (which
	// validate refuses together; the spec carries whatever it is given).
	fullServer := func(name, url, cred, credEnv string, tools types.List) attr.Value {
		return types.ObjectValueMust(mcpServerAttrTypes, map[string]attr.Value{"allowed_tools": tools, "credential": str(cred),
			"credential_env": str(credEnv), "name": str(name), "url": str(url)})
	}
	servers := func(v ...attr.Value) types.List {
		return types.ListValueMust(types.ObjectType{AttrTypes: mcpServerAttrTypes}, v)
	}
	skills := func(v ...attr.Value) types.List {
		return types.ListValueMust(types.ObjectType{AttrTypes: skillAttrTypes}, v)
	}
	agent := func(name string) agentModel {
		return agentModel{ID: str(name), Name: str(name), Owner: str(harnesstest.Owner), CodeMode: types.BoolValue(false),
			Description: null, Instructions: null, MaxTurns: types.Int64Value(50), TokenBudget: types.Int64Value(1_000_000),
			MCPServers: types.ListNull(types.ObjectType{AttrTypes: mcpServerAttrTypes}), Skills: types.ListNull(types.ObjectType{AttrTypes: skillAttrTypes}),
			Model: model(str("scripted"), null, null, null, str("[]")), Sandbox: defaultAgentSandbox(),
			CodeModeLimits: codeModeLimitsObject(agentspec.DefaultCodeModeLimits())}
	}

	// Every attribute set, none to its default (the script too, which only a scripted
	// model uses: the spec carries it regardless).
	full := agent("full")
	full.Description, full.Instructions = str("Answers questions"), str("Be brief.")
	full.Model = types.ObjectValueMust(modelSettingsAttrTypes, map[string]attr.Value{
		"api_key_credential": str("openai"), "api_key_env": str("OPENAI_API_KEY"), "base_url": str("https://llm.example.com/v1"),
		"name": str("gpt-4.1"), "provider": str("openai"), "script": str(`{"turns":[]}`),
	})
	full.MCPServers = servers(fullServer("github", "https://api.githubcopilot.com/mcp/", "github", "GITHUB_MCP_TOKEN", stringList([]string{"get_issue"})))
	full.Skills = skills(types.ObjectValueMust(skillAttrTypes, map[string]attr.Value{"name": str("pdf"), "path": str("./skills/pdf"),
		"description": str("Reads PDFs."), "digest": str("sha256:0123")}))
	full.CodeMode, full.MaxTurns, full.TokenBudget = types.BoolValue(true), types.Int64Value(12), types.Int64Value(200000)
	fullExtract := &agentspec.ExtractLimits{MaxEntries: 500, MaxBytes: 1 << 20, MaxRatio: 20}
	full.Sandbox = sandboxObject(agentspec.Sandbox{Enabled: true, ApproveCode: true, Environment: "py", FileDownloads: true, IdleStopMinutes: 30, ArchiveAfterMinutes: 60, DeleteAfterMinutes: 120,
		ExtractLimits: fullExtract, EnvironmentVersion: "snap-py"})
	fullLimits := agentspec.CodeModeLimits{CallTimeoutSeconds: 7, RunTimeoutSeconds: 70, MaxCalls: 17, MaxResultBytes: 7000}
	full.CodeModeLimits = codeModeLimitsObject(fullLimits)
	fullRun := agents.Spec{
		CodeLimits: fullLimits,
		Name:       "full", Description: "Answers questions", Instructions: "Be brief.",
		Model: agents.ModelSpec{Provider: "openai", Name: "gpt-4.1", BaseURL: "https://llm.example.com/v1", APIKeyCredential: "openai", APIKeyEnv: "OPENAI_API_KEY",
			Script: `{"turns":[]}`},
		MCPServers: []agents.MCPServer{{Name: "github", URL: "https://api.githubcopilot.com/mcp/", Credential: "github", CredentialEnv: "GITHUB_MCP_TOKEN",
			AllowedTools: []string{"get_issue"}}},
		Skills: []agents.Skill{{Name: "pdf", Path: "./skills/pdf", Description: "Reads PDFs.", Digest: "sha256:0123"}}, CodeMode: true,
		Sandbox: agents.SandboxSpec{Enabled: true, ApproveCode: true, Environment: "py", FileDownloads: true, IdleStopMinutes: 30, ArchiveAfterMinutes: 60, DeleteAfterMinutes: 120,
			ExtractLimits: fullExtract, EnvironmentVersion: "snap-py"},
		MaxTurns: 12, TokenBudget: 200000,
	}

	// Empty values kept apart from omitted ones, and a sandbox that is off naming an
	// environment that does not exist.
	empty := agent("empty")
	empty.Description = str("")
	empty.MCPServers = servers(server("docs", "http://docs.internal:8080/mcp", null, stringList([]string{})))
	empty.Skills = skills()
	empty.Sandbox = sandboxObject(agentspec.Sandbox{Environment: "ghost", IdleStopMinutes: 1, ArchiveAfterMinutes: 1, DeleteAfterMinutes: 1})
	defaultExtract := agentspec.DefaultExtractLimits() // written whole, as apply writes every limit
	emptyRun := agents.Spec{
		Name: "empty", Model: agents.ModelSpec{Provider: "scripted", Script: "[]"},
		// allowed_tools = [] is every tool, as an omitted list is.
		MCPServers: []agents.MCPServer{{Name: "docs", URL: "http://docs.internal:8080/mcp"}}, Skills: []agents.Skill{},
		Sandbox: agents.SandboxSpec{Environment: "ghost", IdleStopMinutes: 1, ArchiveAfterMinutes: 1, DeleteAfterMinutes: 1,
			ExtractLimits: &defaultExtract},
		MaxTurns: 50, TokenBudget: 1_000_000, CodeLimits: agentspec.DefaultCodeModeLimits(),
	}

	st := harnesstest.NewStore(t)
	harnesstest.AddEnvironment(t, st, "py", "Ready")
	ctx := t.Context()
	for _, c := range []struct {
		m      agentModel
		run    agents.Spec
		env    string // the environment the row references
		allSet bool
	}{{full, fullRun, "py", true}, {empty, emptyRun, "", false}} {
		name := c.m.Name.ValueString()
		spec, raw := c.m.spec(ctx)
		if c.allSet {
			// A field the model does not reach (added to the spec, not to spec()) is zero.
			if zero := zeroFields(reflect.ValueOf(spec), "spec"); len(zero) > 0 {
				t.Errorf("%s: spec fields left unset: %v", name, zero)
			}
		}
		if ref := spec.EnvironmentRef(); ref != c.env {
			t.Errorf("%s: references environment %q; want %q", name, ref, c.env)
		}
		if err := st.CreateAgent(ctx, store.Agent{ID: "agent-" + name, Name: name, Owner: harnesstest.Owner, Environment: spec.EnvironmentRef(), Spec: raw}); err != nil {
			t.Fatal(err)
		}
		a, err := agents.Load(ctx, st, name)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !reflect.DeepEqual(a.Spec, c.run) {
			t.Errorf("%s: the harness runs\n%+v\nwant\n%+v", name, a.Spec, c.run)
		}
		if c.allSet {
			// A field the harness does not read (added to the spec, not to agents.SpecOf)
			// is zero.
			if zero := zeroFields(reflect.ValueOf(a.Spec), "agents.Spec"); len(zero) > 0 {
				t.Errorf("%s: harness fields left unset: %v", name, zero)
			}
		}
		if a.Environment.Name != c.env {
			t.Errorf("%s: the harness loaded environment %q; want %q", name, a.Environment.Name, c.env)
		}
		row, err := st.GetAgent(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		var back agentModel
		if diags := back.fromStore(ctx, row); diags.HasError() {
			t.Fatalf("%s: %v", name, diags)
		}
		if diff := modelDiff(back, c.m); len(diff) > 0 {
			t.Errorf("%s: Read gives %v; want the model it was written from\n%+v", name, diff, c.m)
		}
	}
}

// modelDiff lists the attributes whose values differ between a and b.
func modelDiff(a, b agentModel) []string {
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	var out []string
	for i := range va.NumField() {
		if x, y := va.Field(i).Interface().(attr.Value), vb.Field(i).Interface().(attr.Value); !x.Equal(y) {
			out = append(out, fmt.Sprintf("%s %s (not %s)", va.Type().Field(i).Tag.Get("tfsdk"), x, y))
		}
	}
	return out
}

// zeroFields lists the zero values in v (nil or empty slices and pointers included), by
// path.
func zeroFields(v reflect.Value, path string) []string {
	switch v.Kind() {
	case reflect.Struct:
		var out []string
		for i := range v.NumField() {
			out = append(out, zeroFields(v.Field(i), path+"."+v.Type().Field(i).Name)...)
		}
		return out
	case reflect.Pointer:
		if !v.IsNil() {
			return zeroFields(v.Elem(), path)
		}
	case reflect.Slice:
		var out []string
		for i := range v.Len() {
			out = append(out, zeroFields(v.Index(i), fmt.Sprintf("%s[%d]", path, i))...)
		}
		if v.Len() > 0 {
			return out
		}
	default:
		if !v.IsZero() {
			return nil
		}
	}
	return []string{path}
}
