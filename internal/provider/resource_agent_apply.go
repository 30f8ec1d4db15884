package provider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

func (r *agentResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	if r.cp == nil {
		notConfigured(&resp.Diagnostics)
		return
	}
	var plan agentModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	plan.validate(ctx, true, &resp.Diagnostics)
	if resp.Diagnostics.HasError() {
		return
	}
	spec, raw := plan.spec(ctx)
	if !r.checkEnvironment(ctx, spec.Name, spec.Sandbox.Environment, &resp.Diagnostics) {
		return
	}
	err := r.cp.store.CreateAgent(ctx, store.Agent{
		ID: newID("agent"), Name: spec.Name, Owner: r.cp.owner, Environment: spec.Sandbox.Environment, Spec: raw,
	})
	switch {
	case errors.Is(err, store.ErrAlreadyExists):
		resp.Diagnostics.AddAttributeError(path.Root("name"), "Agent Already Exists",
			fmt.Sprintf("Agent %q already exists in this control plane. Import it with `terraform import <address> %s`, or choose another name.", spec.Name, spec.Name))
		return
	case errors.Is(err, store.ErrNotFound):
		// The environment went away between the check and the insert.
		addEnvironmentNotFound(&resp.Diagnostics, spec.Name, spec.Sandbox.Environment)
		return
	case err != nil:
		resp.Diagnostics.AddError("Error Creating Agent", fmt.Sprintf("Agent %q could not be stored.\n\nOriginal Error: %s", spec.Name, err))
		return
	}
	plan.ID = types.StringValue(spec.Name)
	plan.Owner = types.StringValue(r.cp.owner)
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
}

func (r *agentResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	if r.cp == nil {
		notConfigured(&resp.Diagnostics)
		return
	}
	var state agentModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	a, err := r.cp.store.GetAgent(ctx, state.ID.ValueString())
	if errors.Is(err, store.ErrNotFound) {
		resp.State.RemoveResource(ctx)
		return
	}
	if err != nil {
		resp.Diagnostics.AddError("Error Reading Agent", fmt.Sprintf("Agent %q could not be read.\n\nOriginal Error: %s", state.ID.ValueString(), err))
		return
	}
	resp.Diagnostics.Append(state.fromStore(ctx, a)...)
	if resp.Diagnostics.HasError() {
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &state)...)
}

func (r *agentResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	if r.cp == nil {
		notConfigured(&resp.Diagnostics)
		return
	}
	var plan, state agentModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	plan.validate(ctx, true, &resp.Diagnostics)
	if resp.Diagnostics.HasError() {
		return
	}
	spec, raw := plan.spec(ctx)
	if selectsEnvironment(ctx, &state, spec.Sandbox.Environment) && !r.checkEnvironment(ctx, spec.Name, spec.Sandbox.Environment, &resp.Diagnostics) {
		return
	}
	err := r.cp.store.UpdateAgent(ctx, store.Agent{Name: spec.Name, Environment: spec.Sandbox.Environment, Spec: raw})
	if err != nil {
		if _, gerr := r.cp.store.GetEnvironment(ctx, spec.Sandbox.Environment); errors.Is(gerr, store.ErrNotFound) {
			addEnvironmentNotFound(&resp.Diagnostics, spec.Name, spec.Sandbox.Environment)
			return
		}
		resp.Diagnostics.AddError("Error Updating Agent",
			fmt.Sprintf("Agent %q could not be updated. If it was deleted outside Terraform, run terraform apply again to recreate it.\n\nOriginal Error: %s", spec.Name, err))
		return
	}
	plan.ID, plan.Owner = state.ID, state.Owner
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
}

func (r *agentResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	if r.cp == nil {
		notConfigured(&resp.Diagnostics)
		return
	}
	var state agentModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	err := r.cp.store.DeleteAgent(ctx, state.ID.ValueString())
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		resp.Diagnostics.AddError("Error Deleting Agent", fmt.Sprintf("Agent %q could not be deleted.\n\nOriginal Error: %s", state.ID.ValueString(), err))
	}
}

func (r *agentResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	resource.ImportStatePassthroughID(ctx, path.Root("id"), req, resp)
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
		CodeMode: m.CodeMode.ValueBool(),
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
