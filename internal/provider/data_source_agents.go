package provider

import (
	"context"
	"fmt"
	"slices"

	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/trueforge/terraform-provider-trueforge/internal/agentspec"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

type agentsDataSourceModel struct {
	Agents          types.List   `tfsdk:"agents"`
	CodeMode        types.Bool   `tfsdk:"code_mode"`
	Environment     types.String `tfsdk:"environment"`
	Names           types.List   `tfsdk:"names"`
	Owner           types.String `tfsdk:"owner"`
	SandboxProvider types.String `tfsdk:"sandbox_provider"`
}

// agentItemAttrTypes is one element of `agents`: a summary; the trueforge_agent data
// source reads the whole agent.
var agentItemAttrTypes = nestedAttrTypes(agentsDataSourceSchema(), "agents")

// NewAgentsDataSource is the trueforge_agents data source.
func NewAgentsDataSource() datasource.DataSource {
	return &dataSource[agentsDataSourceModel]{typeName: "_agents", schema: agentsDataSourceSchema(), read: listAgents}
}

func agentsDataSourceSchema() schema.Schema {
	return schema.Schema{
		MarkdownDescription: "Lists the published agents of this control plane, ordered by name, optionally filtered by owner, " +
			"environment, sandbox provider and Code Mode; every filter left out matches all, and a filter that matches nothing " +
			"gives an empty list. Agents have no status of their own (an agent is ready when its environment is: filter " +
			"`trueforge_environments` by `status` for that). Each element is a summary; read one agent in full with the " +
			"`trueforge_agent` data source. Only names of credential variables exist in an agent, never credentials.",
		Attributes: map[string]schema.Attribute{
			"agents": schema.ListNestedAttribute{
				MarkdownDescription: "The matching agents, ordered by name.",
				Computed:            true,
				NestedObject: schema.NestedAttributeObject{
					Attributes: map[string]schema.Attribute{
						"code_mode":        computedBool("Whether Code Mode is on."),
						"description":      computedString("What the agent is for; null when not given."),
						"environment":      computedString("The environment its sandboxes are cloned from; null when its sandbox is off."),
						"mcp_servers":      computedStringList("Names of the MCP servers the agent may call."),
						"model_name":       computedString("The model's name; null for a `scripted` model."),
						"model_provider":   computedString("`openai`, `anthropic` or `scripted`."),
						"name":             computedString("Name of the agent."),
						"owner":            computedString("Who published the agent."),
						"sandbox_enabled":  computedBool("Whether the agent has a sandbox."),
						"sandbox_provider": computedString("The sandbox provider of its environment; null when its sandbox is off."),
						"skills":           computedStringList("Names of the skills the agent can load."),
					},
				},
			},
			"code_mode": schema.BoolAttribute{
				MarkdownDescription: "Only agents with Code Mode on (`true`) or off (`false`).",
				Optional:            true,
			},
			"environment":      optionalFilter("Only agents whose sandbox is cloned from this environment (agents with their sandbox off use none).", validName()),
			"names":            computedStringList("The names of the matching agents, ordered."),
			"owner":            optionalFilter("Only agents this owner published (on PostgreSQL, a database role).", stringvalidator.LengthAtLeast(1)),
			"sandbox_provider": optionalFilter("Only agents whose environment belongs to this sandbox provider (agents with their sandbox off have none).", validName()),
		},
	}
}

// listAgents lists the agents that match the filters, by name.
func listAgents(ctx context.Context, cp *controlPlane, m *agentsDataSourceModel, diags *diag.Diagnostics) {
	names, err := cp.store.ListAgentNames(ctx)
	if err != nil {
		addOperationError(diags, "Error Listing Agents", "the agents of this control plane", err)
		return
	}
	envs, err := cp.store.ListEnvironments(ctx)
	if err != nil {
		addOperationError(diags, "Error Listing Agents", "the environments of this control plane", err)
		return
	}
	providerOf := make(map[string]string, len(envs))
	for _, e := range envs {
		providerOf[e.Name] = e.Provider
	}
	slices.Sort(names) // deterministic whatever the store's order
	items := []agentItem{}
	matched := []string{}
	for _, name := range names {
		a, err := cp.store.GetAgent(ctx, name)
		if err != nil {
			if ignoreNotFound(err) == nil {
				continue // deleted since it was listed
			}
			addOperationError(diags, "Error Listing Agents", fmt.Sprintf("agent %q", name), err)
			return
		}
		s, err := agentspec.Decode(a.Spec)
		if err != nil {
			diags.AddError("Invalid Agent Spec",
				fmt.Sprintf("The stored spec of agent %q is not valid JSON, so the agents cannot be listed. Apply its configuration again to rewrite it.\n\nOriginal Error: %s", a.Name, err))
			return
		}
		item := agentSummary(a, s, providerOf)
		if !m.matches(item) {
			continue
		}
		items = append(items, item)
		matched = append(matched, a.Name)
	}
	tflog.Debug(ctx, "data source: agents listed", map[string]any{
		"owner": m.Owner.ValueString(), "environment": m.Environment.ValueString(), "sandbox_provider": m.SandboxProvider.ValueString(),
		"matched": len(items), "of": len(names),
	})
	m.Agents = objectList(agentItemAttrTypes, items, agentItem.attrs, diags)
	m.Names = stringList(matched)
}

// agentItem is what `agents` says of one agent.
type agentItem struct {
	name, owner, environment, provider string // environment and provider "" when the sandbox is off
	spec                               agentspec.Spec
}

func agentSummary(a store.Agent, s agentspec.Spec, providerOf map[string]string) agentItem {
	it := agentItem{name: a.Name, owner: a.Owner, spec: s}
	if s.Sandbox.Enabled {
		// The environment column is the reference the database enforces (as in
		// agentModel.fromStore); the spec's copy stands in for rows written without it.
		it.environment = a.Environment
		if it.environment == "" {
			it.environment = s.Sandbox.Environment
		}
		it.provider = providerOf[it.environment]
	}
	return it
}

// matches applies the filters: each one set must hold.
func (m agentsDataSourceModel) matches(it agentItem) bool {
	return (m.Owner.IsNull() || it.owner == m.Owner.ValueString()) &&
		(m.Environment.IsNull() || it.environment == m.Environment.ValueString()) &&
		(m.SandboxProvider.IsNull() || it.provider == m.SandboxProvider.ValueString()) &&
		(m.CodeMode.IsNull() || it.spec.CodeMode == m.CodeMode.ValueBool())
}

// attrs is the element of `agents` that it is.
func (it agentItem) attrs() map[string]attr.Value {
	servers := make([]string, 0, len(it.spec.MCPServers))
	for _, s := range it.spec.MCPServers {
		servers = append(servers, s.Name)
	}
	skills := make([]string, 0, len(it.spec.Skills))
	for _, s := range it.spec.Skills {
		skills = append(skills, s.Name)
	}
	return map[string]attr.Value{
		"code_mode":        types.BoolValue(it.spec.CodeMode),
		"description":      ptrString(it.spec.Description),
		"environment":      optionalString(it.environment),
		"mcp_servers":      stringList(servers),
		"model_name":       ptrString(it.spec.Model.Name),
		"model_provider":   types.StringValue(it.spec.Model.Provider),
		"name":             types.StringValue(it.name),
		"owner":            types.StringValue(it.owner),
		"sandbox_enabled":  types.BoolValue(it.spec.Sandbox.Enabled),
		"sandbox_provider": optionalString(it.provider),
		"skills":           stringList(skills),
	}
}
