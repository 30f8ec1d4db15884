package provider

import (
	"context"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/identityschema"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// trueforge_secret's identity is {environment, env_name}: the two parts of its string id
// `<environment>/<env_name>`, kept apart so that neither needs quoting or parsing.
var _ resource.ResourceWithIdentity = (*secretResource)(nil)

func (r *secretResource) IdentitySchema(_ context.Context, _ resource.IdentitySchemaRequest, resp *resource.IdentitySchemaResponse) {
	resp.IdentitySchema = identityschema.Schema{
		Attributes: map[string]identityschema.Attribute{
			"env_name": identityschema.StringAttribute{
				Description:       "The environment variable the secret is, for example `GITHUB_TOKEN`.",
				RequiredForImport: true,
			},
			"environment": identityschema.StringAttribute{
				Description:       "Name of the environment the secret belongs to.",
				RequiredForImport: true,
			},
		},
	}
}

// identify records the identity of the secret whose id is id (`<environment>/<env_name>`).
func (r *secretResource) identify(ctx context.Context, id types.String, identity *tfsdk.ResourceIdentity, diags *diag.Diagnostics) {
	env, name, ok := strings.Cut(id.ValueString(), "/")
	if id.IsNull() || id.IsUnknown() || !ok {
		return
	}
	setIdentity(ctx, identity, map[string]string{"environment": env, "env_name": name}, diags)
}

// importID is the string id an import names: given as such, or built from an import
// block's identity.
func (r *secretResource) importID(ctx context.Context, req resource.ImportStateRequest, diags *diag.Diagnostics) string {
	if req.ID != "" || req.Identity == nil {
		return req.ID
	}
	var env, name types.String
	diags.Append(req.Identity.GetAttribute(ctx, path.Root("environment"), &env)...)
	diags.Append(req.Identity.GetAttribute(ctx, path.Root("env_name"), &name)...)
	return store.SecretID(env.ValueString(), name.ValueString())
}
