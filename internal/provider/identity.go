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

// setNamed records m, the model of a resource whose id (its name) is id, as its state
// and its identity: how Create, Read and Update end.
func setNamed(ctx context.Context, state *tfsdk.State, identity *tfsdk.ResourceIdentity, id types.String, m any, diags *diag.Diagnostics) {
	setNameIdentity(ctx, identity, id, diags)
	diags.Append(state.Set(ctx, m)...)
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

// namedResource is what a resource known by its name embeds: its identity is {name}
// (object says what the name names: "sandbox provider"), and an import names it by its
// string id or that identity. The secret, known by its environment and variable, has
// its own (below).
type namedResource struct {
	configuredResource
	object string
}

// named is the namedResource whose name names an object ("sandbox provider"): its type
// is the object's name in snake case after the provider's (trueforge_sandbox_provider).
func named(object string) namedResource {
	return namedResource{configuredResource{typeName: "_" + strings.ReplaceAll(object, " ", "_")}, object}
}

func (r *namedResource) IdentitySchema(_ context.Context, _ resource.IdentitySchemaRequest, resp *resource.IdentitySchemaResponse) {
	resp.IdentitySchema = nameIdentitySchema(r.object)
}

func (r *namedResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	importByName(ctx, req, resp)
}

// What the resources implement besides resource.Resource (their constructors check
// that), checked at compile time: a method whose signature drifted would otherwise
// never be called.
var (
	_ = []resource.ResourceWithIdentity{(*agentResource)(nil), (*environmentResource)(nil), (*registryResource)(nil),
		(*sandboxProviderResource)(nil), (*secretResource)(nil), (*volumeResource)(nil)}
	_ = []resource.ResourceWithImportState{(*agentResource)(nil), (*environmentResource)(nil), (*registryResource)(nil),
		(*sandboxProviderResource)(nil), (*secretResource)(nil), (*volumeResource)(nil)}
	_ = []resource.ResourceWithModifyPlan{(*agentResource)(nil), (*environmentResource)(nil), (*registryResource)(nil),
		(*sandboxProviderResource)(nil), (*secretResource)(nil), (*volumeResource)(nil)}
	_ = []resource.ResourceWithConfigure{(*agentResource)(nil), (*environmentResource)(nil), (*registryResource)(nil),
		(*sandboxProviderResource)(nil), (*secretResource)(nil), (*volumeResource)(nil)}
	_ = []resource.ResourceWithValidateConfig{(*agentResource)(nil), (*sandboxProviderResource)(nil)}
	_ = []resource.ResourceWithConfigValidators{(*registryResource)(nil), (*secretResource)(nil)}
)

// trueforge_secret's identity is {environment, env_name}: the two parts of its string id
// `<environment>/<env_name>`, kept apart so that neither needs quoting or parsing.
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
