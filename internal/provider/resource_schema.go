package provider

import (
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64default"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
)

// defaultedInt64 is an optional number attribute documented by doc that plans def when
// the configuration leaves it out (so it is Computed too) and that valid checks: the
// sizes, limits and timers of environments and agents.
func defaultedInt64(doc string, def int64, valid validator.Int64) schema.Int64Attribute {
	return schema.Int64Attribute{
		MarkdownDescription: doc,
		Optional:            true,
		Computed:            true,
		Default:             int64default.StaticInt64(def),
		Validators:          []validator.Int64{valid},
	}
}

// keptString is a read-only string attribute documented by doc that a plan keeps as it
// is in state (UseStateForUnknown): what is set once, at create, such as an id, an owner
// or the backend's id of the object.
func keptString(doc string) schema.StringAttribute {
	return schema.StringAttribute{
		MarkdownDescription: doc,
		Computed:            true,
		PlanModifiers:       []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
	}
}

// replacingString is a required string attribute documented by doc, checked by valid,
// whose change replaces the object: a name, a type, or the object it belongs to.
func replacingString(doc string, valid ...validator.String) schema.StringAttribute {
	return schema.StringAttribute{
		MarkdownDescription: doc,
		Required:            true,
		PlanModifiers:       []planmodifier.String{stringplanmodifier.RequiresReplace()},
		Validators:          valid,
	}
}
