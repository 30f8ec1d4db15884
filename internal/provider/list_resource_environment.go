package provider

import (
	"context"
	"slices"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/list"
	listschema "github.com/hashicorp/terraform-plugin-framework/list/schema"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/trueforge/terraform-provider-trueforge/internal/builds"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

type environmentListModel struct {
	Owner           types.String `tfsdk:"owner"`
	SandboxProvider types.String `tfsdk:"sandbox_provider"`
	Status          types.String `tfsdk:"status"`
}

// NewEnvironmentListResource is the trueforge_environment list resource.
func NewEnvironmentListResource() list.ListResource {
	return &listResource[environmentListModel]{
		configuredResource: configuredResource{typeName: "_environment"},
		newResource:        NewEnvironmentResource,
		find:               findEnvironments,
		schema: listschema.Schema{
			MarkdownDescription: listDescription("Finds the environments of this control plane by owner, sandbox provider and status. " +
				"The reserved `default` environment is never listed: nobody imports it. Every team finds every environment (on " +
				"PostgreSQL too: environments are published configuration); `status` is refreshed from the sandbox backend first."),
			Attributes: map[string]listschema.Attribute{
				"owner":            listFilter("Only environments this owner created (on PostgreSQL, a database role).", stringvalidator.LengthAtLeast(1)),
				"sandbox_provider": listFilter("Only environments of this sandbox provider.", validName()),
				"status": listFilter("Only environments with this status: `Building`, `Ready` or `Failed` (`Failed`: the ones whose last build failed).",
					stringvalidator.OneOf(environmentStatuses...)),
			},
		},
	}
}

// findEnvironments lists the environments that match m, by name.
func findEnvironments(ctx context.Context, cp *controlPlane, m *environmentListModel, diags *diag.Diagnostics) []listed {
	all, err := cp.store.ListEnvironments(ctx)
	if err != nil {
		listError(diags, "Environments", err)
		return nil
	}
	slices.SortFunc(all, func(a, b store.Environment) int { return strings.Compare(a.Name, b.Name) })
	st := environmentStatus{cp: cp, coords: map[string]*builds.Coordinator{}}
	var out []listed
	for _, env := range all {
		if env.Reserved || !matches(m.Owner, env.Owner) || !matches(m.SandboxProvider, env.Provider) {
			continue
		}
		if !m.Status.IsNull() && st.of(ctx, env, diags) != m.Status.ValueString() {
			continue
		}
		out = append(out, namedListed(env.Name))
	}
	return out
}
