package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/list"
	listschema "github.com/hashicorp/terraform-plugin-framework/list/schema"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

type agentListModel struct {
	Owner       types.String `tfsdk:"owner"`
	Environment types.String `tfsdk:"environment"`
}

// NewAgentListResource is the trueforge_agent list resource.
func NewAgentListResource() list.ListResource {
	return &listResource[agentListModel]{
		configuredResource: configuredResource{typeName: "_agent"},
		newResource:        NewAgentResource,
		find:               findAgents,
		schema: listschema.Schema{
			MarkdownDescription: listDescription("Finds the agents published to this control plane by owner and environment. Every team " +
				"finds every agent (on PostgreSQL too: agents are published configuration). An agent's skills are read from folders in " +
				"the configuration, so a generated `trueforge_agent` with skills names their paths as they were applied: the folders must " +
				"be there for the import to plan without changes."),
			Attributes: map[string]listschema.Attribute{
				"owner": listFilter("Only agents this owner published (on PostgreSQL, a database role).", stringvalidator.LengthAtLeast(1)),
				"environment": listFilter("Only agents whose sandbox runs in this environment (an agent whose sandbox is off has none).",
					validName()),
			},
		},
	}
}

// findAgents lists the agents that match m, by name.
func findAgents(ctx context.Context, cp *controlPlane, m *agentListModel, diags *diag.Diagnostics) []listed {
	names, err := cp.store.ListAgentNames(ctx)
	if err != nil {
		listError(diags, "Agents", err)
		return nil
	}
	var out []listed
	for _, name := range names {
		a, err := cp.store.GetAgent(ctx, name)
		if err != nil {
			listError(diags, "Agents", err)
			return nil
		}
		if matches(m.Owner, a.Owner) && matches(m.Environment, a.Environment) {
			out = append(out, namedListed(a.Name))
		}
	}
	return out
}
