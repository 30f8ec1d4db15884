package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// trueforge_agent's identity is {name} (identity.go says why).
var _ resource.ResourceWithIdentity = (*agentResource)(nil)

func (r *agentResource) IdentitySchema(_ context.Context, _ resource.IdentitySchemaRequest, resp *resource.IdentitySchemaResponse) {
	resp.IdentitySchema = nameIdentitySchema("agent")
}

// identify records the identity of the agent whose id (its name) is id.
func (r *agentResource) identify(ctx context.Context, id types.String, identity *tfsdk.ResourceIdentity, diags *diag.Diagnostics) {
	setNameIdentity(ctx, identity, id, diags)
}
