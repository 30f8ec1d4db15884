package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/list"
	listschema "github.com/hashicorp/terraform-plugin-framework/list/schema"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

type volumeListModel struct {
	Owner           types.String `tfsdk:"owner"`
	SandboxProvider types.String `tfsdk:"sandbox_provider"`
}

// NewVolumeListResource is the trueforge_volume list resource.
func NewVolumeListResource() list.ListResource {
	return &listResource[volumeListModel]{
		configuredResource: configuredResource{typeName: "_volume"},
		newResource:        NewVolumeResource,
		find:               findVolumes,
		schema: listschema.Schema{
			MarkdownDescription: listDescription("Finds the volumes of this control plane by owner and sandbox provider. Every team finds " +
				"every volume (on PostgreSQL too); whether an environment may mount one is `shared_with`'s to say."),
			Attributes: map[string]listschema.Attribute{
				"owner":            listFilter("Only volumes this owner created (on PostgreSQL, a database role).", stringvalidator.LengthAtLeast(1)),
				"sandbox_provider": listFilter("Only volumes of this sandbox provider.", validName()),
			},
		},
	}
}

// findVolumes lists the volumes that match m, by name.
func findVolumes(ctx context.Context, cp *controlPlane, m *volumeListModel, diags *diag.Diagnostics) []listed {
	vols, err := cp.store.ListVolumes(ctx)
	if err != nil {
		listError(diags, "Volumes", err)
		return nil
	}
	var out []listed
	for _, v := range vols {
		if matches(m.Owner, v.Owner) && matches(m.SandboxProvider, v.Provider) {
			out = append(out, namedListed(v.Name))
		}
	}
	return out
}
