package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/identityschema"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// Resource identity (Terraform 1.12 and later): every trueforge object is known by its
// name, which is also its string import id, so an identity is derived from the `id` in
// state and never changes for the life of the object (a rename replaces it). CLIs without
// identity (Terraform and OpenTofu before 1.12) keep importing by string id, which works
// on every CLI; the framework then drops what we set.

// nameIdentitySchema is the identity of the objects named by `name` alone.
func nameIdentitySchema(object string) identityschema.Schema {
	return identityschema.Schema{
		Attributes: map[string]identityschema.Attribute{
			"name": identityschema.StringAttribute{
				Description:       "Name of the " + object + ", unique in its control plane.",
				RequiredForImport: true,
			},
		},
	}
}

// setIdentity writes attrs (identity attribute -> value) into identity. It is a no-op
// when the CLI or RPC carries no identity (nil) or the id is not known yet.
func setIdentity(ctx context.Context, identity *tfsdk.ResourceIdentity, attrs map[string]string, diags *diag.Diagnostics) {
	if identity == nil {
		return
	}
	for name, value := range attrs {
		diags.Append(identity.SetAttribute(ctx, path.Root(name), types.StringValue(value))...)
	}
}

// setNameIdentity records {name} from the resource's `id` (its name).
func setNameIdentity(ctx context.Context, identity *tfsdk.ResourceIdentity, id types.String, diags *diag.Diagnostics) {
	if id.IsNull() || id.IsUnknown() || id.ValueString() == "" {
		return
	}
	setIdentity(ctx, identity, map[string]string{"name": id.ValueString()}, diags)
}

// importedName is the name an import names: the string id of `terraform import` or an
// import block's `id`, else the `name` of an import block's `identity`.
func importedName(ctx context.Context, req resource.ImportStateRequest, diags *diag.Diagnostics) string {
	if req.ID != "" || req.Identity == nil {
		return req.ID
	}
	var name types.String
	diags.Append(req.Identity.GetAttribute(ctx, path.Root("name"), &name)...)
	return name.ValueString()
}

// importByName imports an object named by its string id or its identity: `id` is the
// name in both cases, and the read that follows the import fills in the rest, identity
// included.
func importByName(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	name := importedName(ctx, req, &resp.Diagnostics)
	if resp.Diagnostics.HasError() {
		return
	}
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("id"), name)...)
}
