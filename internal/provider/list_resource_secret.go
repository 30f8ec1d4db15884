package provider

import (
	"context"
	"slices"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/list"
	listschema "github.com/hashicorp/terraform-plugin-framework/list/schema"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

type secretListModel struct {
	Environment types.String `tfsdk:"environment"`
}

// NewSecretListResource is the trueforge_secret list resource.
func NewSecretListResource() list.ListResource {
	return &listResource[secretListModel]{
		configuredResource: configuredResource{typeName: "_secret"},
		newResource:        NewSecretResource,
		find:               findSecrets,
		schema: listschema.Schema{
			MarkdownDescription: listDescription("Finds secrets by environment: their names (`<environment>/<env_name>`) and hosts, never " +
				"their values. A value is never listed, imported or written by `-generate-config-out` (the generated `value` is `null`): " +
				"give each generated secret its value (`value_wo` and `value_wo_version`, or `value`) before applying, which re-seals " +
				"it. On PostgreSQL a team role finds only the secrets of its own environments (row-level security), as it reads only those."),
			Attributes: map[string]listschema.Attribute{
				"environment": listFilter("Only the secrets of this environment.", validName()),
			},
		},
	}
}

// findSecrets lists the secrets (that this role may read) of the environments that
// match m, by environment, then variable.
func findSecrets(ctx context.Context, cp *controlPlane, m *secretListModel, diags *diag.Diagnostics) []listed {
	envs, err := cp.store.ListEnvironments(ctx)
	if err != nil {
		listError(diags, "Secrets", err)
		return nil
	}
	slices.SortFunc(envs, func(a, b store.Environment) int { return strings.Compare(a.Name, b.Name) })
	var out []listed
	for _, env := range envs {
		if !matches(m.Environment, env.Name) {
			continue
		}
		secrets, err := cp.store.ListSecrets(ctx, env.Name)
		if err != nil {
			listError(diags, "Secrets", err)
			return nil
		}
		for _, sec := range secrets {
			out = append(out, listed{id: sec.ID, identity: map[string]string{"environment": sec.Environment, "env_name": sec.EnvName}, display: sec.ID})
		}
	}
	return out
}
