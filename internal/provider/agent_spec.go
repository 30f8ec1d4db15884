package provider

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// agentSpec is the JSON document stored in agents.spec, which the harness runs. Its field
// names mirror the HCL attributes. Optional strings are pointers and lists keep nil apart
// from empty, so Read reproduces exactly what the configuration said; the harness may
// decode into plain strings and slices, where an absent or null value reads as empty.
type agentSpec struct {
	Name         string               `json:"name"`
	Description  *string              `json:"description,omitempty"`
	Instructions *string              `json:"instructions,omitempty"`
	Model        agentSpecModel       `json:"model"`
	MCPServers   []agentSpecMCPServer `json:"mcp_servers"`
	Skills       []agentSpecSkill     `json:"skills"`
	CodeMode     bool                 `json:"code_mode"`
	Sandbox      agentSpecSandbox     `json:"sandbox"`
	MaxTurns     int64                `json:"max_turns"`
	TokenBudget  int64                `json:"token_budget"`
}

type agentSpecModel struct {
	Provider  string  `json:"provider"`
	Name      *string `json:"name,omitempty"`
	BaseURL   *string `json:"base_url,omitempty"`
	APIKeyEnv *string `json:"api_key_env,omitempty"`
	Script    *string `json:"script,omitempty"`
}

type agentSpecMCPServer struct {
	Name          string   `json:"name"`
	URL           string   `json:"url"`
	CredentialEnv *string  `json:"credential_env,omitempty"`
	AllowedTools  []string `json:"allowed_tools"`
}

type agentSpecSkill struct {
	Name string `json:"name"`
	Path string `json:"path"`
}

type agentSpecSandbox struct {
	Enabled             bool   `json:"enabled"`
	Environment         string `json:"environment"`
	FileDownloads       bool   `json:"file_downloads"`
	IdleStopMinutes     int64  `json:"idle_stop_minutes"`
	ArchiveAfterMinutes int64  `json:"archive_after_minutes"`
	DeleteAfterMinutes  int64  `json:"delete_after_minutes"`
}

// spec returns the stored document of a fully known plan, and its JSON.
func (m *agentModel) spec(ctx context.Context) (agentSpec, []byte) {
	var mm modelSettingsModel
	m.Model.As(ctx, &mm, asObject)
	sb, _ := m.sandboxSettings(ctx)
	s := agentSpec{
		Name:         m.Name.ValueString(),
		Description:  stringPtr(m.Description),
		Instructions: stringPtr(m.Instructions),
		Model: agentSpecModel{
			Provider: mm.Provider.ValueString(), Name: stringPtr(mm.Name), BaseURL: stringPtr(mm.BaseURL),
			APIKeyEnv: stringPtr(mm.APIKeyEnv), Script: stringPtr(mm.Script),
		},
		CodeMode:    m.CodeMode.ValueBool(),
		MaxTurns:    m.MaxTurns.ValueInt64(),
		TokenBudget: m.TokenBudget.ValueInt64(),
		Sandbox: agentSpecSandbox{
			Enabled: sb.Enabled.ValueBool(), Environment: sb.Environment.ValueString(), FileDownloads: sb.FileDownloads.ValueBool(),
			IdleStopMinutes: sb.IdleStopMinutes.ValueInt64(), ArchiveAfterMinutes: sb.ArchiveAfterMinutes.ValueInt64(), DeleteAfterMinutes: sb.DeleteAfterMinutes.ValueInt64(),
		},
	}
	if !m.MCPServers.IsNull() {
		s.MCPServers = []agentSpecMCPServer{}
		servers := knownObjects[mcpServerModel](ctx, m.MCPServers)
		for i := range len(m.MCPServers.Elements()) {
			v := servers[i]
			srv := agentSpecMCPServer{Name: v.Name.ValueString(), URL: v.URL.ValueString(), CredentialEnv: stringPtr(v.CredentialEnv)}
			if !v.AllowedTools.IsNull() {
				srv.AllowedTools = append([]string{}, listFrom(ctx, v.AllowedTools)...)
			}
			s.MCPServers = append(s.MCPServers, srv)
		}
	}
	if !m.Skills.IsNull() {
		s.Skills = []agentSpecSkill{}
		skills := knownObjects[skillModel](ctx, m.Skills)
		for i := range len(m.Skills.Elements()) {
			s.Skills = append(s.Skills, agentSpecSkill{Name: skills[i].Name.ValueString(), Path: skills[i].Path.ValueString()})
		}
	}
	raw, _ := json.Marshal(s)
	return s, raw
}

// fromStore sets every attribute from the stored agent, so an out-of-band change to the
// row shows as drift. The spec keeps null apart from empty, so what the configuration
// wrote (an omitted list or `[]`, an omitted string or "") reads back unchanged.
func (m *agentModel) fromStore(ctx context.Context, a store.Agent) diag.Diagnostics {
	var diags diag.Diagnostics
	var s agentSpec
	if err := json.Unmarshal(a.Spec, &s); err != nil {
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
	// Specs written before these limits existed read as the defaults they ran with.
	m.MaxTurns = types.Int64Value(orDefault(s.MaxTurns, defaultMaxTurns))
	m.TokenBudget = types.Int64Value(orDefault(s.TokenBudget, defaultTokenBudget))

	var d diag.Diagnostics
	m.Model, d = types.ObjectValue(modelSettingsAttrTypes, map[string]attr.Value{
		"api_key_env": ptrString(s.Model.APIKeyEnv),
		"base_url":    ptrString(s.Model.BaseURL),
		"name":        ptrString(s.Model.Name),
		"provider":    types.StringValue(s.Model.Provider),
		"script":      ptrString(s.Model.Script),
	})
	diags.Append(d...)

	// The environment column is the reference the database enforces, so it wins over a
	// copy in the spec.
	m.Sandbox, d = types.ObjectValue(agentSandboxAttrTypes, map[string]attr.Value{
		"archive_after_minutes": types.Int64Value(s.Sandbox.ArchiveAfterMinutes),
		"delete_after_minutes":  types.Int64Value(s.Sandbox.DeleteAfterMinutes),
		"enabled":               types.BoolValue(s.Sandbox.Enabled),
		"environment":           types.StringValue(a.Environment),
		"file_downloads":        types.BoolValue(s.Sandbox.FileDownloads),
		"idle_stop_minutes":     types.Int64Value(s.Sandbox.IdleStopMinutes),
	})
	diags.Append(d...)

	serverType := types.ObjectType{AttrTypes: mcpServerAttrTypes}
	if s.MCPServers == nil {
		m.MCPServers = types.ListNull(serverType)
	} else {
		vals := make([]attr.Value, 0, len(s.MCPServers))
		for _, srv := range s.MCPServers {
			tools := types.ListNull(types.StringType)
			if srv.AllowedTools != nil {
				tools = stringList(srv.AllowedTools)
			}
			obj, d := types.ObjectValue(mcpServerAttrTypes, map[string]attr.Value{
				"allowed_tools":  tools,
				"credential_env": ptrString(srv.CredentialEnv),
				"name":           types.StringValue(srv.Name),
				"url":            types.StringValue(srv.URL),
			})
			diags.Append(d...)
			vals = append(vals, obj)
		}
		m.MCPServers, d = types.ListValue(serverType, vals)
		diags.Append(d...)
	}

	skillType := types.ObjectType{AttrTypes: skillAttrTypes}
	if s.Skills == nil {
		m.Skills = types.ListNull(skillType)
	} else {
		vals := make([]attr.Value, 0, len(s.Skills))
		for _, sk := range s.Skills {
			obj, d := types.ObjectValue(skillAttrTypes, map[string]attr.Value{
				"name": types.StringValue(sk.Name),
				"path": types.StringValue(sk.Path),
			})
			diags.Append(d...)
			vals = append(vals, obj)
		}
		m.Skills, d = types.ListValue(skillType, vals)
		diags.Append(d...)
	}
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

func orDefault(v, def int64) int64 {
	if v == 0 {
		return def
	}
	return v
}
