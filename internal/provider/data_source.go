package provider

import (
	"context"
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// dataSource is a data source made of what sets it apart: its type name, its schema
// and how it fills its model M in. Every data source reads the same way (decode the
// configuration into M, read, save M), so that way is written once, here, and each
// data source's file says only what it reads.
type dataSource[M any] struct {
	configuredDataSource
	typeName string // after the provider's: "_agent"
	schema   schema.Schema
	// read fills m, decoded from the configuration, in from the control plane; an
	// error in diags leaves the state unset.
	read func(ctx context.Context, cp *controlPlane, m *M, diags *diag.Diagnostics)
}

var _ datasource.DataSourceWithConfigure = (*dataSource[struct{}])(nil)

func (d *dataSource[M]) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + d.typeName
}

func (d *dataSource[M]) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	resp.Schema = d.schema
}

func (d *dataSource[M]) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	m, ok := decode[M](ctx, d.cp, req.Config.Get, &resp.Diagnostics)
	if !ok {
		return
	}
	d.read(ctx, d.cp, &m, &resp.Diagnostics)
	if resp.Diagnostics.HasError() {
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

// byName is the read of a data source that shows the row of kind (Title Case) that its
// model's name (nameOf) names: fetched with get, or "<kind> Not Found" with notFound (a
// format of the name) as the detail, then filled into the model with fill.
func byName[M, T any](kind string, nameOf func(*M) types.String, get func(*store.Store, context.Context, string) (T, error), notFound string,
	fill func(ctx context.Context, cp *controlPlane, m *M, row T, diags *diag.Diagnostics)) func(context.Context, *controlPlane, *M, *diag.Diagnostics) {
	return func(ctx context.Context, cp *controlPlane, m *M, diags *diag.Diagnostics) {
		name := nameOf(m).ValueString()
		getRow := func(ctx context.Context, name string) (T, error) { return get(cp.store, ctx, name) }
		if row, ok := lookupNamed(ctx, kind, path.Root("name"), name, getRow, fmt.Sprintf(notFound, name), diags); ok {
			fill(ctx, cp, m, row, diags)
		}
	}
}
