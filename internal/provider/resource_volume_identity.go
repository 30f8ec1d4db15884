package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/resource"
)

// trueforge_volume's identity is {name} (identity.go says why).
var _ resource.ResourceWithIdentity = (*volumeResource)(nil)

func (r *volumeResource) IdentitySchema(_ context.Context, _ resource.IdentitySchemaRequest, resp *resource.IdentitySchemaResponse) {
	resp.IdentitySchema = nameIdentitySchema("volume")
}
