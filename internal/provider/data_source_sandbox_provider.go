package provider

import (
	"context"
	"errors"
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// sandboxProviderDataSourceModel is the resource's model without its credential and
// timeouts, plus the owner, which the resource keeps in the store only.
type sandboxProviderDataSourceModel struct {
	APIURL             types.String `tfsdk:"api_url"`
	DefaultEnvironment types.String `tfsdk:"default_environment"`
	ID                 types.String `tfsdk:"id"`
	Name               types.String `tfsdk:"name"`
	Owner              types.String `tfsdk:"owner"`
	ReleaseSnapshot    types.String `tfsdk:"release_snapshot"`
	RequireLimits      types.Bool   `tfsdk:"require_limits"`
	Scopes             types.List   `tfsdk:"scopes"`
	Status             types.String `tfsdk:"status"`
	Target             types.String `tfsdk:"target"`
	Type               types.String `tfsdk:"type"`
}

// NewSandboxProviderDataSource is the trueforge_sandbox_provider data source.
func NewSandboxProviderDataSource() datasource.DataSource {
	return &dataSource[sandboxProviderDataSourceModel]{typeName: "_sandbox_provider", schema: sandboxProviderDataSourceSchema(), read: readSandboxProvider}
}

func sandboxProviderDataSourceSchema() schema.Schema {
	return schema.Schema{
		MarkdownDescription: "Reads the sandbox provider of this control plane, for modules that create environments on a provider " +
			"another configuration manages. A control plane has exactly one, so `name` may be left out. The API key is never " +
			"exposed: it stays sealed in the control plane.",
		Attributes: map[string]schema.Attribute{
			"api_url":             computedString("API endpoint of the backend; null when the catalog's URL for the type is used (and for `local`)."),
			"default_environment": computedString("Name of the reserved environment created with the provider: always `default`."),
			"id":                  computedString("The provider's name."),
			"name": schema.StringAttribute{
				MarkdownDescription: "Name of the sandbox provider. Left out, the control plane's only provider is read.",
				Optional:            true,
				Computed:            true,
				Validators:          []validator.String{validName()},
			},
			"owner":            computedString("Who created the provider (on PostgreSQL, a database role); they own the `default` environment too."),
			"release_snapshot": computedString("The release snapshot every environment snapshot starts from."),
			"require_limits":   computedBool("`local` only: whether sandboxes whose limits the host cannot enforce are refused; null when unset (decided by who runs)."),
			"scopes":           computedStringList("Scopes the credentials grant, as reported by the backend."),
			"status":           computedString("`Ready`, `Building` while it is being created, or `Degraded` when the `default` environment (or, on Daytona, its snapshot) is gone."),
			"target":           computedString("Backend target (Daytona region); null when unset."),
			"type":             computedString("Backend type: `local` or `daytona`."),
		},
	}
}

// readSandboxProvider reads the provider named, or the only one when no name is given.
func readSandboxProvider(ctx context.Context, cp *controlPlane, m *sandboxProviderDataSourceModel, diags *diag.Diagnostics) {
	var p store.SandboxProvider
	var err error
	if name := m.Name.ValueString(); name != "" {
		p, err = cp.store.GetSandboxProvider(ctx, name)
	} else {
		p, err = cp.store.OnlySandboxProvider(ctx)
	}
	if errors.Is(err, store.ErrNotFound) {
		what := "No sandbox provider is configured in this control plane."
		if !m.Name.IsNull() {
			what = fmt.Sprintf("No sandbox provider %q exists in this control plane.", m.Name.ValueString())
		}
		diags.AddAttributeError(path.Root("name"), "Sandbox Provider Not Found",
			what+" Check database_url and the name; a provider created in the same configuration should be referenced through its "+
				"trueforge_sandbox_provider resource, so Terraform creates it first.")
		return
	}
	if err != nil {
		addOperationError(diags, "Error Reading Sandbox Provider", fmt.Sprintf("sandbox provider %q", m.Name.ValueString()), err)
		return
	}
	// The status as the resource's refresh computes it: a provider whose default
	// environment (or its remote snapshot) is gone is Degraded until the next apply.
	status := p.Status
	if def, err := cp.store.GetEnvironment(ctx, defaultEnvironmentName); errors.Is(err, store.ErrNotFound) {
		status = statusDegraded
	} else if err == nil && cp.remoteSnapshots(p) && (&sandboxProviderResource{namedResource{configuredResource: configuredResource{cp: cp}}}).defaultSnapshotFailed(ctx, p, def, diags) {
		status = statusDegraded
	}
	if diags.HasError() {
		return
	}
	tflog.Debug(ctx, "data source: sandbox provider read", map[string]any{"name": p.Name, "type": p.Type, "status": status})
	m.APIURL = optionalString(p.APIURL)
	m.DefaultEnvironment = types.StringValue(defaultEnvironmentName)
	m.ID = types.StringValue(p.Name)
	m.Name = types.StringValue(p.Name)
	m.Owner = types.StringValue(p.Owner)
	m.ReleaseSnapshot = types.StringValue(p.ReleaseSnapshot)
	m.RequireLimits = optionalBool(p.RequireLimits)
	m.Scopes = stringList(p.Scopes)
	m.Status = types.StringValue(status)
	m.Target = optionalString(p.Target)
	m.Type = types.StringValue(p.Type)
}
