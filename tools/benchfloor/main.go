// Command benchfloor is a trivial terraform-plugin-framework provider ("floor", one
// resource floor_item with three string attributes and no I/O) that scripts/bench.sh plans
// beside trueforge: it is the cost of any framework provider over gRPC, the floor under
// trueforge's plan time, which a built-in resource like terraform_data does not pay.
package main

import (
	"context"
	"os"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/provider"
	pschema "github.com/hashicorp/terraform-plugin-framework/provider/schema"
	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

type p struct{}

func (p) Metadata(_ context.Context, _ provider.MetadataRequest, r *provider.MetadataResponse) {
	r.TypeName = "floor"
}
func (p) Schema(_ context.Context, _ provider.SchemaRequest, r *provider.SchemaResponse) {
	r.Schema = pschema.Schema{}
}
func (p) Configure(context.Context, provider.ConfigureRequest, *provider.ConfigureResponse) {}
func (p) Resources(context.Context) []func() resource.Resource {
	return []func() resource.Resource{func() resource.Resource { return &item{} }}
}
func (p) DataSources(context.Context) []func() datasource.DataSource { return nil }

type item struct{}
type model struct {
	ID    types.String `tfsdk:"id"`
	Name  types.String `tfsdk:"name"`
	Value types.String `tfsdk:"value"`
}

func (item) Metadata(_ context.Context, req resource.MetadataRequest, r *resource.MetadataResponse) {
	r.TypeName = req.ProviderTypeName + "_item"
}
func (item) Schema(_ context.Context, _ resource.SchemaRequest, r *resource.SchemaResponse) {
	r.Schema = schema.Schema{Attributes: map[string]schema.Attribute{
		"id":    schema.StringAttribute{Computed: true, PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()}},
		"name":  schema.StringAttribute{Required: true},
		"value": schema.StringAttribute{Optional: true},
	}}
}
func (item) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var m model
	resp.Diagnostics.Append(req.Plan.Get(ctx, &m)...)
	m.ID = m.Name
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}
func (item) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var m model
	resp.Diagnostics.Append(req.State.Get(ctx, &m)...)
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}
func (item) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var m model
	resp.Diagnostics.Append(req.Plan.Get(ctx, &m)...)
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}
func (item) Delete(context.Context, resource.DeleteRequest, *resource.DeleteResponse) {}

func main() {
	// The floor is the least a framework provider costs, so it does not pay for the SDK's
	// trace logs either when nobody asked for logs (Terraform would discard them).
	if os.Getenv("TF_LOG") == "" && os.Getenv("TF_LOG_PROVIDER") == "" {
		for _, v := range []string{"TF_LOG_SDK", "TF_LOG_SDK_PROTO", "TF_LOG_SDK_FRAMEWORK"} {
			if os.Getenv(v) == "" {
				os.Setenv(v, "OFF")
			}
		}
	}
	err := providerserver.Serve(context.Background(), func() provider.Provider { return p{} }, providerserver.ServeOpts{Address: "registry.terraform.io/floor/floor"})
	if err != nil {
		panic(err)
	}
}
