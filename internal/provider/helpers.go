package provider

import (
	"context"
	"crypto/rand"
	"encoding/hex"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// newID returns a random identifier with a kind prefix, for rows the user never names.
func newID(kind string) string {
	b := make([]byte, 8)
	rand.Read(b)
	return kind + "-" + hex.EncodeToString(b)
}

func stringList(items []string) types.List {
	vals := make([]attr.Value, 0, len(items))
	for _, s := range items {
		vals = append(vals, types.StringValue(s))
	}
	return types.ListValueMust(types.StringType, vals)
}

// objectList is items as a known list of objects of attrTypes (empty when items is),
// the attributes of each element from attrs: the list attributes of nested objects
// that Read and the data sources fill from the store.
func objectList[T any](attrTypes map[string]attr.Type, items []T, attrs func(T) map[string]attr.Value, diags *diag.Diagnostics) types.List {
	vals := make([]attr.Value, 0, len(items))
	for _, it := range items {
		obj, d := types.ObjectValue(attrTypes, attrs(it))
		diags.Append(d...)
		vals = append(vals, obj)
	}
	l, d := types.ListValue(types.ObjectType{AttrTypes: attrTypes}, vals)
	diags.Append(d...)
	return l
}

// optionalObjectList is objectList, but null when items is nil: an optional attribute
// the configuration left out reads back null, not [].
func optionalObjectList[T any](attrTypes map[string]attr.Type, items []T, attrs func(T) map[string]attr.Value, diags *diag.Diagnostics) types.List {
	if items == nil {
		return types.ListNull(types.ObjectType{AttrTypes: attrTypes})
	}
	return objectList(attrTypes, items, attrs, diags)
}

// optionalString maps the store's empty string back to null, which is what an omitted
// optional attribute is in configuration, so Read does not invent a diff.
func optionalString(s string) types.String {
	if s == "" {
		return types.StringNull()
	}
	return types.StringValue(s)
}

func stringMap(m map[string]string) types.Map {
	if len(m) == 0 {
		return types.MapNull(types.StringType)
	}
	vals := make(map[string]attr.Value, len(m))
	for k, v := range m {
		vals[k] = types.StringValue(v)
	}
	return types.MapValueMust(types.StringType, vals)
}

func mapFrom(ctx context.Context, m types.Map) map[string]string {
	out := map[string]string{}
	if m.IsNull() || m.IsUnknown() {
		return out
	}
	m.ElementsAs(ctx, &out, false)
	return out
}

func listFrom(ctx context.Context, l types.List) []string {
	var out []string
	if l.IsNull() || l.IsUnknown() {
		return out
	}
	l.ElementsAs(ctx, &out, false)
	return out
}

// boolPointer maps an optional bool attribute to the store's setting (nil when unset).
func boolPointer(v types.Bool) *bool {
	if v.IsNull() || v.IsUnknown() {
		return nil
	}
	b := v.ValueBool()
	return &b
}

func optionalBool(b *bool) types.Bool {
	if b == nil {
		return types.BoolNull()
	}
	return types.BoolValue(*b)
}
