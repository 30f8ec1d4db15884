package provider

import (
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64default"
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
