package provider

import (
	"context"
	"fmt"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/list"
	listschema "github.com/hashicorp/terraform-plugin-framework/list/schema"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/provider"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
)

// List resources (Terraform 1.14 and later: `list` blocks in .tfquery.hcl files, run by
// `terraform query`): each lists the objects of one managed resource type that match its
// filters, as identities, and with `include_resource = true` (or
// `-generate-config-out`) as the state the managed resource's own Read gives after an
// import, so that the configuration Terraform generates from it plans as an import with
// no changes.
//
// A list resource needs a managed resource of the same type: the framework refuses one
// without ("ListResource Type Defined without a Matching Managed Resource Type",
// terraform-plugin-framework v1.19.0 internal/fwserver/server_listresources.go:100-108,
// unless raw schemas of a resource served elsewhere are given), and so does Terraform,
// which decodes every result with the managed resource type's schema and identity
// schema and fails the query when it has none ("Identity schema not found for resource
// type", terraform v1.16.4 internal/plugin6/grpc_provider.go:1341-1344). What the
// harness creates (sandboxes, sessions) has no managed resource, so it gets none here.

func (p *trueforgeProvider) ListResources(context.Context) []func() list.ListResource {
	return []func() list.ListResource{
		NewEnvironmentListResource,
		NewAgentListResource,
		NewSecretListResource,
		NewVolumeListResource,
	}
}

var (
	_ provider.ProviderWithListResources = (*trueforgeProvider)(nil)
	_ list.ListResourceWithConfigure     = (*listResource[struct{}])(nil)
)

// listed is one object a list resource found: the `id` of its managed resource (what an
// import sets), its identity and the name shown for it.
type listed struct {
	id       string
	identity map[string]string
	display  string
}

// listResource is a list resource made of what sets it apart, as dataSource is: its type
// name (its managed resource's), the schema of its `config` block (the filters, decoded
// into M), the managed resource whose Read fills each result's resource object, and how
// it finds the objects that match.
type listResource[M any] struct {
	configuredResource
	schema      listschema.Schema
	newResource func() resource.Resource
	// find lists the objects that match m's filters, in the order they are shown.
	find func(ctx context.Context, cp *controlPlane, m *M, diags *diag.Diagnostics) []listed
}

func (l *listResource[M]) ListResourceConfigSchema(_ context.Context, _ list.ListResourceSchemaRequest, resp *list.ListResourceSchemaResponse) {
	resp.Schema = l.schema
}

func (l *listResource[M]) List(ctx context.Context, req list.ListRequest, stream *list.ListResultsStream) {
	var diags diag.Diagnostics
	m, ok := decode[M](ctx, l.cp, req.Config.Get, &diags)
	if !ok {
		stream.Results = list.ListResultsStreamDiagnostics(diags)
		return
	}
	found := l.find(ctx, l.cp, &m, &diags)
	if diags.HasError() {
		stream.Results = list.ListResultsStreamDiagnostics(diags)
		return
	}
	var r resource.Resource
	if req.IncludeResource {
		r = l.newResource()
		if c, ok := r.(resource.ResourceWithConfigure); ok {
			c.Configure(ctx, resource.ConfigureRequest{ProviderData: l.cp}, &resource.ConfigureResponse{})
		}
	}
	stream.Results = func(push func(list.ListResult) bool) {
		if len(diags) > 0 && !push(list.ListResult{Diagnostics: diags}) { // warnings of the search (a status that could not be read)
			return
		}
		for i, o := range found {
			if req.Limit > 0 && int64(i) >= req.Limit {
				return
			}
			res := req.NewListResult(ctx)
			res.DisplayName = o.display
			setIdentity(ctx, res.Identity, o.identity, &res.Diagnostics)
			if r != nil && !l.read(ctx, r, req, o, &res) {
				continue // gone since it was listed
			}
			if !push(res) {
				return
			}
		}
	}
}

// read fills res.Resource in with what r's Read gives for o after an import: a state
// whose only known attribute is `id`, read as the plan after an import reads it. False
// when the object went away between the listing and the read.
func (l *listResource[M]) read(ctx context.Context, r resource.Resource, req list.ListRequest, o listed, res *list.ListResult) bool {
	state := tfsdk.State{Schema: req.ResourceSchema, Raw: tftypes.NewValue(req.ResourceSchema.Type().TerraformType(ctx), nil)}
	res.Diagnostics.Append(state.SetAttribute(ctx, path.Root("id"), types.StringValue(o.id))...)
	if res.Diagnostics.HasError() {
		return true
	}
	identity := &tfsdk.ResourceIdentity{Schema: req.ResourceIdentitySchema, Raw: res.Identity.Raw.Copy()}
	resp := resource.ReadResponse{State: state, Identity: identity}
	r.Read(ctx, resource.ReadRequest{State: state, Identity: res.Identity}, &resp)
	res.Diagnostics.Append(resp.Diagnostics...)
	if resp.State.Raw.IsNull() && !res.Diagnostics.HasError() {
		return false
	}
	res.Resource = &tfsdk.Resource{Schema: req.ResourceSchema, Raw: resp.State.Raw}
	res.Identity = resp.Identity
	return true
}

// listFilter is an optional filter of a list resource's `config` block.
func listFilter(doc string, valid ...validator.String) listschema.StringAttribute {
	return listschema.StringAttribute{MarkdownDescription: doc, Optional: true, Validators: valid}
}

// listDescription is a list resource's description: what it lists, then what every one
// of them shares.
func listDescription(what string) string {
	return what + " Filters left out match everything; a filter that matches nothing lists nothing, not an error. Results are ordered " +
		"by name and carry each object's resource identity, so `terraform query -generate-config-out=FILE` writes `import` blocks and " +
		"configuration that plan as imports with no changes. Terraform stops at the `list` block's `limit` (default 100). " +
		"Needs Terraform 1.14 or later (OpenTofu has no `query`)."
}

// matches reports whether a filter (null: match all) admits value.
func matches(filter types.String, value string) bool {
	return filter.IsNull() || filter.ValueString() == value
}

// namedListed is an object known by its name (its id and identity).
func namedListed(name string) listed {
	return listed{id: name, identity: map[string]string{"name": name}, display: name}
}

// listError is the error of a list resource that could not read what it lists (kinds:
// "Environments").
func listError(diags *diag.Diagnostics, kinds string, err error) {
	addOperationError(diags, "Error Listing "+kinds, fmt.Sprintf("listing the %s of this control plane", strings.ToLower(kinds)), err)
}
