package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/resource"
)

// trueforge_registry's identity is {name} (identity.go says why).
var _ resource.ResourceWithIdentity = (*registryResource)(nil)

func (r *registryResource) IdentitySchema(_ context.Context, _ resource.IdentitySchemaRequest, resp *resource.IdentitySchemaResponse) {
	resp.IdentitySchema = nameIdentitySchema("registry")
}
