package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// trueforge_sandbox_provider's identity is {name} (identity.go says why).
var _ resource.ResourceWithIdentity = (*sandboxProviderResource)(nil)

func (r *sandboxProviderResource) IdentitySchema(_ context.Context, _ resource.IdentitySchemaRequest, resp *resource.IdentitySchemaResponse) {
	resp.IdentitySchema = nameIdentitySchema("sandbox provider")
}

// identify records the identity of the sandbox provider whose id (its name) is id.
func (r *sandboxProviderResource) identify(ctx context.Context, id types.String, identity *tfsdk.ResourceIdentity, diags *diag.Diagnostics) {
	setNameIdentity(ctx, identity, id, diags)
}
