package provider

import (
	"context"
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	dschema "github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/objectdefault"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/trueforge/terraform-provider-trueforge/internal/agentspec"
)

// extractLimitsModel is the agent's sandbox.extract_limits: what one archive that
// extract_archive unpacks may hold.
type extractLimitsModel struct {
	MaxBytes   types.Int64 `tfsdk:"max_bytes"`
	MaxEntries types.Int64 `tfsdk:"max_entries"`
	MaxRatio   types.Int64 `tfsdk:"max_ratio"`
}

var extractLimitsAttrTypes = objectAttrTypes(extractLimitsDataSchema().Attributes)

func extractLimitsObject(l agentspec.ExtractLimits) types.Object {
	return types.ObjectValueMust(extractLimitsAttrTypes, map[string]attr.Value{
		"max_bytes":   types.Int64Value(l.MaxBytes),
		"max_entries": types.Int64Value(l.MaxEntries),
		"max_ratio":   types.Int64Value(l.MaxRatio),
	})
}

// extractLimits is the plan's limits as the spec stores them, each one the plan does
// not know at its default (the schema's defaults fill what the configuration leaves out).
func (s agentSandboxModel) extractLimits(ctx context.Context) *agentspec.ExtractLimits {
	l := agentspec.DefaultExtractLimits()
	if s.ExtractLimits.IsNull() || s.ExtractLimits.IsUnknown() {
		return &l
	}
	var v extractLimitsModel
	s.ExtractLimits.As(ctx, &v, asObject)
	for _, f := range []struct {
		v   types.Int64
		dst *int64
	}{{v.MaxBytes, &l.MaxBytes}, {v.MaxEntries, &l.MaxEntries}, {v.MaxRatio, &l.MaxRatio}} {
		if !f.v.IsNull() && !f.v.IsUnknown() {
			*f.dst = f.v.ValueInt64()
		}
	}
	return &l
}

var extractLimitsDescription = "What one archive that the `extract_archive` tool unpacks may hold. The tool reads the archive in the harness, " +
	"never with a program in the sandbox, and stops as soon as a limit is passed (counting what decompression yields, not what the archive's " +
	"headers claim), telling the model which limit and which entry; what was extracted before stays. Besides these limits, entries that would " +
	"leave the destination folder, devices, FIFOs and names with control characters are always skipped, and set-user-ID bits dropped."

func extractLimitsSchema() schema.SingleNestedAttribute {
	d := agentspec.DefaultExtractLimits()
	limit := func(desc string, def int64, field string) schema.Int64Attribute {
		lo, hi := agentBound("sandbox.extract_limits." + field)
		return defaultedInt64(fmt.Sprintf("%s %d to %d, defaults to %d.", desc, lo, hi, def), def, int64validator.Between(lo, hi))
	}
	return schema.SingleNestedAttribute{
		MarkdownDescription: extractLimitsDescription,
		Optional:            true,
		Computed:            true,
		Default:             objectdefault.StaticValue(extractLimitsObject(d)),
		Attributes: map[string]schema.Attribute{
			"max_bytes": limit("Bytes one archive may unpack to in all (its entries' content, and the headers and skipped entries "+
				"decompression goes through).", d.MaxBytes, "max_bytes"),
			"max_entries": limit("Entries of one archive that are looked at, skipped ones included; the rest are not read.", d.MaxEntries, "max_entries"),
			"max_ratio": limit("How many times its compressed size an archive may unpack to (a zip entry over its own compressed size, a "+
				"compressed tar over the whole stream), checked once 1 MiB has unpacked: past it the archive is taken for a decompression bomb.",
				d.MaxRatio, "max_ratio"),
		},
	}
}

func extractLimitsDataSchema() dschema.SingleNestedAttribute {
	return dschema.SingleNestedAttribute{
		MarkdownDescription: extractLimitsDescription,
		Computed:            true,
		Attributes: map[string]dschema.Attribute{
			"max_bytes":   computedInt64("Bytes one archive may unpack to in all."),
			"max_entries": computedInt64("Entries of one archive that are looked at."),
			"max_ratio":   computedInt64("How many times its compressed size an archive may unpack to."),
		},
	}
}
