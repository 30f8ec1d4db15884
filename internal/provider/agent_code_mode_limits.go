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

// codeModeLimitsModel is the agent's code_mode_limits: what one Code Mode script may do.
type codeModeLimitsModel struct {
	CallTimeoutSeconds types.Int64 `tfsdk:"call_timeout_seconds"`
	MaxCalls           types.Int64 `tfsdk:"max_calls"`
	MaxResultBytes     types.Int64 `tfsdk:"max_result_bytes"`
	RunTimeoutSeconds  types.Int64 `tfsdk:"run_timeout_seconds"`
}

var codeModeLimitsAttrTypes = objectAttrTypes(codeModeLimitsDataSchema().Attributes)

func codeModeLimitsObject(l agentspec.CodeModeLimits) types.Object {
	return types.ObjectValueMust(codeModeLimitsAttrTypes, map[string]attr.Value{
		"call_timeout_seconds": types.Int64Value(l.CallTimeoutSeconds),
		"max_calls":            types.Int64Value(l.MaxCalls),
		"max_result_bytes":     types.Int64Value(l.MaxResultBytes),
		"run_timeout_seconds":  types.Int64Value(l.RunTimeoutSeconds),
	})
}

// codeModeLimits is the plan's limits as the spec stores them (every value known: the
// schema's defaults fill what the configuration leaves out).
func (m *agentModel) codeModeLimits(ctx context.Context) *agentspec.CodeModeLimits {
	if m.CodeModeLimits.IsNull() || m.CodeModeLimits.IsUnknown() {
		l := agentspec.DefaultCodeModeLimits()
		return &l
	}
	var v codeModeLimitsModel
	m.CodeModeLimits.As(ctx, &v, asObject)
	l := agentspec.DefaultCodeModeLimits()
	for _, f := range []struct {
		v   types.Int64
		dst *int64
	}{{v.CallTimeoutSeconds, &l.CallTimeoutSeconds}, {v.MaxCalls, &l.MaxCalls}, {v.MaxResultBytes, &l.MaxResultBytes}, {v.RunTimeoutSeconds, &l.RunTimeoutSeconds}} {
		if !f.v.IsNull() && !f.v.IsUnknown() {
			*f.dst = f.v.ValueInt64()
		}
	}
	return &l
}

var codeModeLimitsDescription = "What one Code Mode script (one `run_code` call) may do. A script past a limit is stopped, or for " +
	"`call_timeout_seconds` gets an error from that call, and the model is told which limit and which attribute raises it; the session goes on. " +
	"Applies whenever `code_mode` is on."

func codeModeLimitsSchema(inPlace string) schema.SingleNestedAttribute {
	d := agentspec.DefaultCodeModeLimits()
	limit := func(desc string, def int64, field string) schema.Int64Attribute {
		lo, hi := agentBound("code_mode_limits." + field)
		return defaultedInt64(fmt.Sprintf("%s %d to %d, defaults to %d.", desc, lo, hi, def),
			def, int64validator.Between(lo, hi))
	}
	return schema.SingleNestedAttribute{
		MarkdownDescription: codeModeLimitsDescription + inPlace,
		Optional:            true,
		Computed:            true,
		Default:             objectdefault.StaticValue(codeModeLimitsObject(d)),
		Attributes: map[string]schema.Attribute{
			"call_timeout_seconds": limit("Seconds one MCP call of a script may take; past it the call raises an error in the script "+
				"(the server may still carry it out: the call is recorded as unknown).", d.CallTimeoutSeconds, "call_timeout_seconds"),
			"max_calls": limit("MCP calls one script may make; the call past it stops the script.", d.MaxCalls, "max_calls"),
			"max_result_bytes": limit("Bytes of MCP results (JSON, after minimizing to the declared fields) one script may receive, all calls together; "+
				"the result that passes it is withheld and the script stopped.", d.MaxResultBytes, "max_result_bytes"),
			"run_timeout_seconds": limit("Seconds a script may run, its calls included.", d.RunTimeoutSeconds, "run_timeout_seconds"),
		},
	}
}

func codeModeLimitsDataSchema() dschema.SingleNestedAttribute {
	return dschema.SingleNestedAttribute{
		MarkdownDescription: codeModeLimitsDescription,
		Computed:            true,
		Attributes: map[string]dschema.Attribute{
			"call_timeout_seconds": dschema.Int64Attribute{MarkdownDescription: "Seconds one MCP call of a script may take.", Computed: true},
			"max_calls":            dschema.Int64Attribute{MarkdownDescription: "MCP calls one script may make.", Computed: true},
			"max_result_bytes":     dschema.Int64Attribute{MarkdownDescription: "Bytes of MCP results one script may receive.", Computed: true},
			"run_timeout_seconds":  dschema.Int64Attribute{MarkdownDescription: "Seconds a script may run, its calls included.", Computed: true},
		},
	}
}
