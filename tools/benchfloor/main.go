// Command benchfloor is a trivial terraform-plugin-framework provider ("floor") that
// scripts/bench.sh plans beside trueforge: it is the cost of any framework provider over
// gRPC, the floor under trueforge's plan time, which a built-in resource like
// terraform_data does not pay. floor_item has three string attributes; floor_wide has the
// attribute shapes of trueforge_environment (strings, numbers, maps, a nested object,
// computed values) and does no I/O either, so a configuration of floor_wide and floor_item
// shows what a schema of that size costs Terraform and the framework by itself.
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
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/booldefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64default"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
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
	return []func() resource.Resource{
		func() resource.Resource { return &item{echo[model]{"item"}} },
		func() resource.Resource { return &wide{echo[wideModel]{"wide"}} },
	}
}
func (p) DataSources(context.Context) []func() datasource.DataSource { return nil }

// echo is what the floor's resources share, for the one called floor_<name> whose
// model is M: its type name, and a Read, Update and Delete whose state is what it
// planned or had, as a provider that keeps nothing elsewhere answers.
type echo[M any] struct{ name string }

func (e echo[M]) Metadata(_ context.Context, req resource.MetadataRequest, r *resource.MetadataResponse) {
	r.TypeName = req.ProviderTypeName + "_" + e.name
}

func (echo[M]) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var m M
	resp.Diagnostics.Append(req.State.Get(ctx, &m)...)
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}
func (echo[M]) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var m M
	resp.Diagnostics.Append(req.Plan.Get(ctx, &m)...)
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}
func (echo[M]) Delete(context.Context, resource.DeleteRequest, *resource.DeleteResponse) {}

type item struct{ echo[model] }
type model struct {
	ID    types.String `tfsdk:"id"`
	Name  types.String `tfsdk:"name"`
	Value types.String `tfsdk:"value"`
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

type wide struct{ echo[wideModel] }
type wideModel struct {
	ID           types.String `tfsdk:"id"`
	Name         types.String `tfsdk:"name"`
	Provider     types.String `tfsdk:"sandbox_provider"`
	Image        types.String `tfsdk:"image"`
	BuildScript  types.String `tfsdk:"build_script"`
	CPU          types.Int64  `tfsdk:"cpu"`
	Memory       types.Int64  `tfsdk:"memory"`
	Disk         types.Int64  `tfsdk:"disk"`
	Triggers     types.Map    `tfsdk:"triggers"`
	Env          types.Map    `tfsdk:"env"`
	Network      types.Object `tfsdk:"network"`
	WaitForReady types.Bool   `tfsdk:"wait_for_ready"`
	Timeouts     types.Object `tfsdk:"timeouts"`
	SnapshotID   types.String `tfsdk:"snapshot_id"`
	BuildHash    types.String `tfsdk:"build_hash"`
	Status       types.String `tfsdk:"status"`
	Owner        types.String `tfsdk:"owner"`
}

func (wide) Schema(_ context.Context, _ resource.SchemaRequest, r *resource.SchemaResponse) {
	computed := func() schema.StringAttribute {
		return schema.StringAttribute{Computed: true, PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()}}
	}
	r.Schema = schema.Schema{Attributes: map[string]schema.Attribute{
		"id":               computed(),
		"name":             schema.StringAttribute{Required: true},
		"sandbox_provider": schema.StringAttribute{Required: true},
		"image":            schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString("platform")},
		"build_script":     schema.StringAttribute{Optional: true},
		"cpu":              schema.Int64Attribute{Optional: true, Computed: true, Default: int64default.StaticInt64(1)},
		"memory":           schema.Int64Attribute{Optional: true, Computed: true, Default: int64default.StaticInt64(1)},
		"disk":             schema.Int64Attribute{Optional: true, Computed: true, Default: int64default.StaticInt64(3)},
		"triggers":         schema.MapAttribute{Optional: true, ElementType: types.StringType},
		"env":              schema.MapAttribute{Optional: true, ElementType: types.StringType},
		"network": schema.SingleNestedAttribute{Optional: true, Attributes: map[string]schema.Attribute{
			"block_all":     schema.BoolAttribute{Optional: true},
			"allow_domains": schema.ListAttribute{Optional: true, ElementType: types.StringType},
		}},
		"wait_for_ready": schema.BoolAttribute{Optional: true, Computed: true, Default: booldefault.StaticBool(true)},
		"timeouts": schema.SingleNestedAttribute{Optional: true, Attributes: map[string]schema.Attribute{
			"create": schema.StringAttribute{Optional: true},
			"update": schema.StringAttribute{Optional: true},
		}},
		"snapshot_id": computed(),
		"build_hash":  computed(),
		"status":      computed(),
		"owner":       computed(),
	}}
}
func (wide) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var m wideModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &m)...)
	m.ID = m.Name
	m.SnapshotID = types.StringValue("snap-0b1ca0b333eeed517af3")
	m.BuildHash = types.StringValue("0b1ca0b333eeed517af394950660bae25b652ed338ae16a43700542c0ab07543")
	m.Status = types.StringValue("Ready")
	m.Owner = types.StringValue("root")
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

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
