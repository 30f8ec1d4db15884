package main

import (
	"context"
	"reflect"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/provider"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
)

// frameworkOnly is the trueforge provider with every resource's own work taken out but
// the plugin framework's left in: the same schemas (attribute validators removed, since
// they are trueforge's checks; defaults and plan modifiers kept, since they shape the
// plan), resources whose Read keeps the state as it is and that have no ModifyPlan and
// no config validation. Planning the applied configuration through it measures what
// the framework costs on these schemas: the least a framework provider serving this
// contract pays, between the instant row (no framework) and trueforge.
type frameworkOnly struct{ provider.Provider }

func (p frameworkOnly) Resources(ctx context.Context) []func() resource.Resource {
	var out []func() resource.Resource
	for _, newResource := range p.Provider.Resources(ctx) {
		out = append(out, func() resource.Resource { return idleResource{newResource()} })
	}
	return out
}

func (frameworkOnly) DataSources(context.Context) []func() datasource.DataSource { return nil }

// idleResource has a real resource's name and schema, and does nothing.
type idleResource struct{ real resource.Resource }

func (r idleResource) Metadata(ctx context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	r.real.Metadata(ctx, req, resp)
}

func (r idleResource) Schema(ctx context.Context, req resource.SchemaRequest, resp *resource.SchemaResponse) {
	r.real.Schema(ctx, req, resp)
	resp.Schema.Attributes = withoutValidators(resp.Schema.Attributes)
}

// Read leaves the prior state in the response: nothing changed.
func (idleResource) Read(context.Context, resource.ReadRequest, *resource.ReadResponse) {}

func (idleResource) Create(_ context.Context, _ resource.CreateRequest, resp *resource.CreateResponse) {
	resp.Diagnostics.AddError("Benchmark Provider", "benchinstant's framework mode only plans; apply with the trueforge provider.")
}

func (idleResource) Update(_ context.Context, _ resource.UpdateRequest, resp *resource.UpdateResponse) {
	resp.Diagnostics.AddError("Benchmark Provider", "benchinstant's framework mode only plans; apply with the trueforge provider.")
}

func (idleResource) Delete(_ context.Context, _ resource.DeleteRequest, resp *resource.DeleteResponse) {
	resp.Diagnostics.AddError("Benchmark Provider", "benchinstant's framework mode only plans; apply with the trueforge provider.")
}

// withoutValidators copies attrs with every Validators field cleared, nested attributes
// included. The attribute types are the framework's structs, so this goes by field name.
func withoutValidators(attrs map[string]schema.Attribute) map[string]schema.Attribute {
	out := make(map[string]schema.Attribute, len(attrs))
	for name, a := range attrs {
		out[name] = stripValue(reflect.ValueOf(a)).Interface().(schema.Attribute)
	}
	return out
}

func stripValue(v reflect.Value) reflect.Value {
	c := reflect.New(v.Type()).Elem()
	c.Set(v)
	if f := c.FieldByName("Validators"); f.IsValid() {
		f.Set(reflect.Zero(f.Type()))
	}
	if f := c.FieldByName("Attributes"); f.IsValid() && f.Kind() == reflect.Map && !f.IsNil() {
		f.Set(reflect.ValueOf(withoutValidators(f.Interface().(map[string]schema.Attribute))))
	}
	if f := c.FieldByName("NestedObject"); f.IsValid() && f.Kind() == reflect.Struct {
		f.Set(stripValue(f))
	}
	return c
}
