package provider

import (
	"context"
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/trueforge/terraform-provider-trueforge/internal/agentspec"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// spec returns the stored document of a fully known plan (agentspec's JSON type, which
// the harness runs), and its JSON.
func (m *agentModel) spec(ctx context.Context) (agentspec.Spec, []byte) {
	var mm modelSettingsModel
	m.Model.As(ctx, &mm, asObject)
	sb, _ := m.sandboxSettings(ctx)
	s := agentspec.Spec{
		Name:         m.Name.ValueString(),
		Description:  stringPtr(m.Description),
		Instructions: stringPtr(m.Instructions),
		Model: agentspec.Model{
			Provider: mm.Provider.ValueString(), Name: stringPtr(mm.Name), BaseURL: stringPtr(mm.BaseURL),
			APIKeyCredential: stringPtr(mm.APIKeyCredential), APIKeyEnv: stringPtr(mm.APIKeyEnv), Script: stringPtr(mm.Script),
		},
		CodeMode:       m.CodeMode.ValueBool(),
		CodeModeLimits: m.codeModeLimits(ctx),
		MaxTurns:       m.MaxTurns.ValueInt64(),
		TokenBudget:    m.TokenBudget.ValueInt64(),
		Sandbox: agentspec.Sandbox{
			Enabled: sb.Enabled.ValueBool(), ApproveCode: sb.ApproveCode.ValueBool(), Environment: sb.Environment.ValueString(), FileDownloads: sb.FileDownloads.ValueBool(),
			IdleStopMinutes: sb.IdleStopMinutes.ValueInt64(), ArchiveAfterMinutes: sb.ArchiveAfterMinutes.ValueInt64(), DeleteAfterMinutes: sb.DeleteAfterMinutes.ValueInt64(),
			ExtractLimits: sb.extractLimits(ctx), EnvironmentVersion: sb.EnvironmentVersion.ValueString(),
		},
	}
	if !m.MCPServers.IsNull() {
		s.MCPServers = []agentspec.MCPServer{}
		servers := knownObjects[mcpServerModel](ctx, m.MCPServers)
		for i := range len(m.MCPServers.Elements()) {
			v := servers[i]
			srv := agentspec.MCPServer{Name: v.Name.ValueString(), URL: v.URL.ValueString(), Credential: stringPtr(v.Credential), CredentialEnv: stringPtr(v.CredentialEnv)}
			if !v.AllowedTools.IsNull() {
				srv.AllowedTools = append([]string{}, listFrom(ctx, v.AllowedTools)...)
			}
			s.MCPServers = append(s.MCPServers, srv)
		}
	}
	if !m.Skills.IsNull() {
		s.Skills = []agentspec.Skill{}
		skills := knownObjects[skillModel](ctx, m.Skills)
		for i := range len(m.Skills.Elements()) {
			k := skills[i]
			s.Skills = append(s.Skills, agentspec.Skill{Name: k.Name.ValueString(), Path: k.Path.ValueString(), Description: k.Description.ValueString(), Digest: k.Digest.ValueString()})
		}
	}
	return s, s.Encode()
}

// fromStore sets every attribute from the stored agent, so an out-of-band change to the
// row shows as drift. The spec keeps null apart from empty, so what the configuration
// wrote (an omitted list or `[]`, an omitted string or "") reads back unchanged; what a
// spec leaves out reads as the default the harness runs with (agentspec.Decode).
func (m *agentModel) fromStore(ctx context.Context, a store.Agent) diag.Diagnostics { //nolint:unparam // the models' common shape; ctx is for logging
	var diags diag.Diagnostics
	s, err := agentspec.Decode(a.Spec)
	if err != nil {
		diags.AddError("Invalid Agent Spec",
			fmt.Sprintf("The stored spec of agent %q is not valid JSON, so the agent cannot be read. Apply the configuration again to rewrite it, or fix the row in the control-plane database.\n\nOriginal Error: %s", a.Name, err))
		return diags
	}
	m.ID = types.StringValue(a.Name)
	m.Name = types.StringValue(a.Name)
	m.Owner = types.StringValue(a.Owner)
	m.Description = ptrString(s.Description)
	m.Instructions = ptrString(s.Instructions)
	m.CodeMode = types.BoolValue(s.CodeMode)
	m.CodeModeLimits = codeModeLimitsObject(s.CodeLimits())
	m.MaxTurns = types.Int64Value(s.MaxTurns)
	m.TokenBudget = types.Int64Value(s.TokenBudget)

	var d diag.Diagnostics
	m.Model, d = types.ObjectValue(modelSettingsAttrTypes, map[string]attr.Value{
		"api_key_credential": ptrString(s.Model.APIKeyCredential),
		"api_key_env":        ptrString(s.Model.APIKeyEnv),
		"base_url":           ptrString(s.Model.BaseURL),
		"name":               ptrString(s.Model.Name),
		"provider":           types.StringValue(s.Model.Provider),
		"script":             ptrString(s.Model.Script),
	})
	diags.Append(d...)

	// The environment column, set while the sandbox is enabled, is the reference the
	// database enforces, so it wins over the copy in the spec. An agent whose sandbox is
	// off references none and keeps the name its configuration gave in the spec.
	sb := s.Sandbox
	if a.Environment != "" {
		sb.Environment = a.Environment
	}
	m.Sandbox = sandboxObject(sb)

	m.MCPServers = optionalObjectList(mcpServerAttrTypes, s.MCPServers, func(srv agentspec.MCPServer) map[string]attr.Value {
		tools := types.ListNull(types.StringType)
		if srv.AllowedTools != nil {
			tools = stringList(srv.AllowedTools)
		}
		return map[string]attr.Value{
			"allowed_tools":  tools,
			"credential":     ptrString(srv.Credential),
			"credential_env": ptrString(srv.CredentialEnv),
			"name":           types.StringValue(srv.Name),
			"url":            types.StringValue(srv.URL),
		}
	}, &diags)
	// A spec stored before skills were published has no description or digest: null,
	// so the next plan reads the folder and publishes it.
	m.Skills = optionalObjectList(skillAttrTypes, s.Skills, func(sk agentspec.Skill) map[string]attr.Value {
		return map[string]attr.Value{
			"description": optionalString(sk.Description),
			"digest":      optionalString(sk.Digest),
			"name":        types.StringValue(sk.Name),
			"path":        types.StringValue(sk.Path),
		}
	}, &diags)
	return diags
}

// stringPtr maps a null string to nil, keeping "" apart from an omitted attribute.
func stringPtr(v types.String) *string {
	if v.IsNull() || v.IsUnknown() {
		return nil
	}
	s := v.ValueString()
	return &s
}

func ptrString(s *string) types.String {
	if s == nil {
		return types.StringNull()
	}
	return types.StringValue(*s)
}

// sandboxObject is the sandbox attribute of sb.
func sandboxObject(sb agentspec.Sandbox) types.Object {
	return types.ObjectValueMust(agentSandboxAttrTypes, map[string]attr.Value{
		"approve_code":          types.BoolValue(sb.ApproveCode),
		"archive_after_minutes": types.Int64Value(sb.ArchiveAfterMinutes),
		"delete_after_minutes":  types.Int64Value(sb.DeleteAfterMinutes),
		"enabled":               types.BoolValue(sb.Enabled),
		"environment":           types.StringValue(sb.Environment),
		"environment_version":   optionalString(sb.EnvironmentVersion),
		"extract_limits":        extractLimitsObject(sb.Extract()),
		"file_downloads":        types.BoolValue(sb.FileDownloads),
		"idle_stop_minutes":     types.Int64Value(sb.IdleStopMinutes),
	})
}
