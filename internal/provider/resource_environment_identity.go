package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// trueforge_environment's identity is {name} (identity.go says why).
var _ resource.ResourceWithIdentity = (*environmentResource)(nil)

func (r *environmentResource) IdentitySchema(_ context.Context, _ resource.IdentitySchemaRequest, resp *resource.IdentitySchemaResponse) {
	resp.IdentitySchema = nameIdentitySchema("environment")
}

// identify records the identity of the environment whose id (its name) is id.
func (r *environmentResource) identify(ctx context.Context, id types.String, identity *tfsdk.ResourceIdentity, diags *diag.Diagnostics) {
	setNameIdentity(ctx, identity, id, diags)
}
