package provider

import (
	"context"
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	dsschema "github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/agents"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

var rolloutAttrTypes = map[string]attr.Type{"percent": types.Int64Type}

// rolloutDoc is what rollout means, the resource's and the data sources' alike.
const rolloutDoc = "A gradual rollout of the current version: only `percent` of the environment's new sessions get sandboxes from the current " +
	"version, the others from the latest previous kept version (see `versions`). Which a session gets is chosen from its id, so every sandbox " +
	"of a session (one re-provisioned after a loss or an idle delete too) uses the same version, and the session's `sandbox_provisioned` events " +
	"record it (`version`: `current` or `previous`, and `rollout_percent`). While the environment has no previous kept version, or that " +
	"version's snapshot is not Ready, every session uses the current one. A session on the previous version never claims a `warm_pool` " +
	"member (members are made from the current version): its sandbox is created. An agent that pins a version with `sandbox.environment_version` ignores it."

// rolloutPercentDoc describes rollout's percent.
var rolloutPercentDoc = fmt.Sprintf("The share of new sessions, %d to %d, that use the current version; `100` sends them all to it.",
	agents.MinRolloutPercent, agents.MaxRolloutPercent)

// rolloutAttribute is trueforge_environment's rollout.
func rolloutAttribute() schema.SingleNestedAttribute {
	return schema.SingleNestedAttribute{
		MarkdownDescription: rolloutDoc + " Unset sends every new session to the current version. " +
			"Changing it is applied live: no rebuild; sandboxes provisioned afterwards follow it, running ones keep their version.",
		Optional: true,
		Attributes: map[string]schema.Attribute{
			"percent": schema.Int64Attribute{
				MarkdownDescription: rolloutPercentDoc,
				Required:            true,
				Validators:          []validator.Int64{int64validator.Between(agents.MinRolloutPercent, agents.MaxRolloutPercent)},
			},
		},
	}
}

// rolloutDataAttribute is rollout of the environment data sources: the resource's
// setting, read back (rolloutValue converts it, as the resource's read does).
func rolloutDataAttribute() dsschema.SingleNestedAttribute {
	return dsschema.SingleNestedAttribute{
		MarkdownDescription: rolloutDoc + " Null when every new session uses the current version (its `rollout` is unset).",
		Computed:            true,
		Attributes: map[string]dsschema.Attribute{
			"percent": dsschema.Int64Attribute{MarkdownDescription: rolloutPercentDoc, Computed: true},
		},
	}
}

// rolloutData is env's rollout as the data sources read it: null when unset.
func rolloutData(env store.Environment) types.Object {
	return rolloutValue(env.Settings.Rollout)
}

type rolloutModel struct {
	Percent types.Int64 `tfsdk:"percent"`
}

// rollout is the configured rollout for the settings document (nil when unset).
func (m *environmentModel) rollout(ctx context.Context) *store.Rollout {
	if m.Rollout.IsNull() || m.Rollout.IsUnknown() {
		return nil
	}
	var r rolloutModel
	m.Rollout.As(ctx, &r, struct{ UnhandledNullAsEmpty, UnhandledUnknownAsEmpty bool }{true, true})
	return &store.Rollout{Percent: r.Percent.ValueInt64()}
}

// rolloutValue is rollout as stored.
func rolloutValue(r *store.Rollout) types.Object {
	if r == nil {
		return types.ObjectNull(rolloutAttrTypes)
	}
	return types.ObjectValueMust(rolloutAttrTypes, map[string]attr.Value{"percent": types.Int64Value(r.Percent)})
}
