package provider

import (
	"fmt"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/trueforge/terraform-provider-trueforge/internal/agentspec"
)

// Apply checks the spec it stores with the harness's own bounds check
// (agentspec.Spec.CheckBounds), and the schema's validators take their ranges from the
// same table: what the provider accepts, the harness runs.
func TestAgentBoundsAreTheHarnesss(t *testing.T) {
	null := types.StringNull()
	m := agentModel{
		Name: types.StringValue("a"), CodeMode: types.BoolValue(false),
		Model: types.ObjectValueMust(modelSettingsAttrTypes, map[string]attr.Value{
			"api_key_credential": null, "api_key_env": null, "base_url": null, "name": types.StringValue("gpt-4.1"), "provider": types.StringValue("openai"), "script": null,
		}),
		MCPServers: types.ListNull(types.ObjectType{AttrTypes: mcpServerAttrTypes}), Skills: types.ListNull(types.ObjectType{AttrTypes: skillAttrTypes}),
		Sandbox: types.ObjectValueMust(agentSandboxAttrTypes, map[string]attr.Value{
			"archive_after_minutes": types.Int64Value(1440), "delete_after_minutes": types.Int64Value(10080), "enabled": types.BoolValue(false),
			"environment": types.StringValue("default"), "file_downloads": types.BoolValue(true), "idle_stop_minutes": types.Int64Value(15), "approve_code": types.BoolValue(false),
			"environment_version": types.StringNull(),
			"extract_limits":      extractLimitsObject(agentspec.ExtractLimits{MaxEntries: agentspec.MaxExtractMaxEntries, MaxBytes: 1, MaxRatio: agentspec.MaxExtractMaxRatio}),
		}),
		MaxTurns: types.Int64Value(agentspec.MaxMaxTurns), TokenBudget: types.Int64Value(agentspec.MinTokenBudget),
	}
	var diags diag.Diagnostics
	m.validate(t.Context(), true, &diags)
	if diags.HasError() {
		t.Fatalf("at the bounds: %v", diags)
	}
	m.MaxTurns = types.Int64Value(5000)
	m.validate(t.Context(), true, &diags)
	if !diags.HasError() || !strings.Contains(diags.Errors()[0].Detail(), "max_turns is 5000, outside the 1 to 1000") {
		t.Fatalf("max_turns 5000 at apply: %v", diags)
	}
	var sr resource.SchemaResponse
	(&agentResource{}).Schema(t.Context(), resource.SchemaRequest{}, &sr)
	checked := 0
	for _, b := range agentspec.Bounds() {
		attrs, name := sr.Schema.Attributes, b.Field
		for group, rest, nested := strings.Cut(name, "."); nested; group, rest, nested = strings.Cut(name, ".") {
			attrs, name = attrs[group].(schema.SingleNestedAttribute).Attributes, rest
		}
		a, ok := attrs[name].(schema.Int64Attribute)
		if !ok {
			continue // counted, not a number attribute (skills)
		}
		checked++
		want := fmt.Sprintf("between %d and %d", b.Min, b.Max)
		if len(a.Validators) == 0 || !strings.Contains(a.Validators[0].Description(t.Context()), want) {
			t.Errorf("%s: the schema's validator does not check %s", b.Field, want)
		}
	}
	if checked != len(agentspec.Bounds())-1 {
		t.Errorf("checked %d of the %d numeric bounds against the schema", checked, len(agentspec.Bounds())-1)
	}
}
