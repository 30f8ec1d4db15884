package provider

import (
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// A data source reads every attribute but its lookup keys: these are the read-only
// (Computed) attributes its schemas are made of, one per kind of value, so that a
// schema lists what it reads and how it is documented, not the same three lines for
// each.

// computedString is a read-only string attribute documented by doc.
func computedString(doc string) schema.StringAttribute {
	return schema.StringAttribute{MarkdownDescription: doc, Computed: true}
}

// computedInt64 is a read-only number attribute documented by doc.
func computedInt64(doc string) schema.Int64Attribute {
	return schema.Int64Attribute{MarkdownDescription: doc, Computed: true}
}

// computedBool is a read-only bool attribute documented by doc.
func computedBool(doc string) schema.BoolAttribute {
	return schema.BoolAttribute{MarkdownDescription: doc, Computed: true}
}

// computedStringMap is a read-only map of strings documented by doc.
func computedStringMap(doc string) schema.MapAttribute {
	return schema.MapAttribute{MarkdownDescription: doc, Computed: true, ElementType: types.StringType}
}

// computedStringList is a read-only list of strings documented by doc.
func computedStringList(doc string) schema.ListAttribute {
	return schema.ListAttribute{MarkdownDescription: doc, Computed: true, ElementType: types.StringType}
}

// optionalFilter is an optional lookup key of a list data source documented by doc
// ("Only agents ..."), checked by valid: left out, it matches all.
func optionalFilter(doc string, valid validator.String) schema.StringAttribute {
	return schema.StringAttribute{MarkdownDescription: doc, Optional: true, Validators: []validator.String{valid}}
}

// objectAttrTypes is the attribute types of an object whose attributes are attrs (a
// data source's or a resource's): what its values must be made of, read off the schema
// that documents them rather than listed a second time.
func objectAttrTypes[A interface{ GetType() attr.Type }](attrs map[string]A) map[string]attr.Type {
	types := make(map[string]attr.Type, len(attrs))
	for name, a := range attrs {
		types[name] = a.GetType()
	}
	return types
}

// nestedAttrTypes is objectAttrTypes of the objects of the nested attribute name of s: a
// single object, or the elements of a list.
func nestedAttrTypes(s schema.Schema, name string) map[string]attr.Type {
	switch a := s.Attributes[name].(type) {
	case schema.SingleNestedAttribute:
		return objectAttrTypes(a.Attributes)
	case schema.ListNestedAttribute:
		return objectAttrTypes(a.NestedObject.Attributes)
	}
	panic("nestedAttrTypes: " + name + " is not a nested attribute")
}
