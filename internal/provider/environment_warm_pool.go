package provider

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	dsschema "github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/lifecycle"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// Limits of warm_pool, named in its description: members cost while they wait, so the
// size is bounded to catch a typo, and max_age to between a minute (a shorter one makes
// members only to delete them) and a day.
const (
	maxWarmPoolSize   = 16
	minWarmPoolMaxAge = time.Minute
	maxWarmPoolMaxAge = 24 * time.Hour
)

var warmPoolAttrTypes = map[string]attr.Type{"size": types.Int64Type, "max_age": types.StringType}

// warmPoolDoc is what warm_pool means, the resource's and the data sources' alike.
const warmPoolDoc = "Sandboxes that `trueforge-harness serve` keeps ready for the environment's sessions, so that a session's first sandbox call " +
	"claims one instead of waiting for a create. Members are made from the current snapshot with the environment's `env`, `network`, secrets, " +
	"`volumes` and `labels`, and replaced when any of them changes (a secret's rotation reaches them as it reaches running sandboxes). " +
	"A member is claimed by one session at most, relabelled with that session's labels, and never returns to the pool. " +
	"On the `local` backend without `block_all`, a member's egress proxy is prepared (its CA and the secrets' placeholders) but serves nobody " +
	"until a session claims the member; that session's proxy then lends the secrets with its own agent's consent."

// warmPoolSizeDoc and warmPoolMaxAgeDoc describe warm_pool's attributes.
var (
	warmPoolSizeDoc   = fmt.Sprintf("How many ready sandboxes to keep, 0 to %d. 0 drains the pool.", maxWarmPoolSize)
	warmPoolMaxAgeDoc = fmt.Sprintf("How long a member may wait unclaimed before it is deleted and replaced, as a duration (`30m`, `2h`), "+
		"from %s to %s. Defaults to `%s`.", fmtAge(minWarmPoolMaxAge), fmtAge(maxWarmPoolMaxAge), fmtAge(lifecycle.DefaultPoolMaxAge))
)

// warmPoolAttribute is trueforge_environment's warm_pool.
func warmPoolAttribute() schema.SingleNestedAttribute {
	return schema.SingleNestedAttribute{
		MarkdownDescription: warmPoolDoc + " Unset keeps none. " +
			"Changing it is applied live: no rebuild; `serve` resizes the pool and replaces its members at its next pass (`--pool-interval`, 5 s by default).",
		Optional: true,
		Attributes: map[string]schema.Attribute{
			"size": schema.Int64Attribute{
				MarkdownDescription: warmPoolSizeDoc,
				Required:            true,
				Validators:          []validator.Int64{int64validator.Between(0, maxWarmPoolSize)},
			},
			"max_age": schema.StringAttribute{
				MarkdownDescription: warmPoolMaxAgeDoc,
				Optional:            true,
				Computed:            true,
				Default:             stringdefault.StaticString(fmtAge(lifecycle.DefaultPoolMaxAge)),
				Validators:          []validator.String{stringCheck{"a duration from 1m to 24h", checkPoolMaxAge}},
			},
		},
	}
}

// warmPoolDataAttribute is warm_pool of the environment data sources: the resource's
// setting, read back (warmPoolValue converts it, as the resource's read does).
func warmPoolDataAttribute() dsschema.SingleNestedAttribute {
	return dsschema.SingleNestedAttribute{
		MarkdownDescription: warmPoolDoc + " Null when the environment keeps no pool (its `warm_pool` is unset).",
		Computed:            true,
		Attributes: map[string]dsschema.Attribute{
			"size":    dsschema.Int64Attribute{MarkdownDescription: warmPoolSizeDoc, Computed: true},
			"max_age": dsschema.StringAttribute{MarkdownDescription: warmPoolMaxAgeDoc, Computed: true},
		},
	}
}

// warmPoolData is env's warm_pool as the data sources read it: null when it keeps none,
// max_age spelled in its largest whole unit.
func warmPoolData(env store.Environment) types.Object {
	return warmPoolValue(types.ObjectNull(warmPoolAttrTypes), env.Settings.WarmPool)
}

func checkPoolMaxAge(s string) string {
	d, err := time.ParseDuration(s)
	switch {
	case err != nil:
		return fmt.Sprintf("%q is not a duration: write a number and a unit, for example 30m or 2h", s)
	case d < minWarmPoolMaxAge || d > maxWarmPoolMaxAge || d%time.Second != 0:
		return fmt.Sprintf("%s is outside %s to %s (whole seconds): a member replaced sooner is made for nothing, and one kept longer runs an old snapshot's view of the world", s, fmtAge(minWarmPoolMaxAge), fmtAge(maxWarmPoolMaxAge))
	}
	return ""
}

// fmtAge writes d as its largest whole unit (1h, 90m, 45s), as a configuration would.
func fmtAge(d time.Duration) string {
	switch {
	case d%time.Hour == 0:
		return fmt.Sprintf("%dh", d/time.Hour)
	case d%time.Minute == 0:
		return fmt.Sprintf("%dm", d/time.Minute)
	}
	return fmt.Sprintf("%ds", d/time.Second)
}

type warmPoolModel struct {
	Size   types.Int64  `tfsdk:"size"`
	MaxAge types.String `tfsdk:"max_age"`
}

// warmPool is the configured warm_pool for the settings document (nil when unset).
func (m *environmentModel) warmPool(ctx context.Context) *store.WarmPool {
	if m.WarmPool.IsNull() || m.WarmPool.IsUnknown() {
		return nil
	}
	var wp warmPoolModel
	m.WarmPool.As(ctx, &wp, struct{ UnhandledNullAsEmpty, UnhandledUnknownAsEmpty bool }{true, true})
	age, err := time.ParseDuration(wp.MaxAge.ValueString())
	if err != nil {
		age = lifecycle.DefaultPoolMaxAge // the validator said why at plan
	}
	return &store.WarmPool{Size: wp.Size.ValueInt64(), MaxAgeSeconds: int64(age / time.Second)}
}

// warmPoolValue is warm_pool as stored, keeping prior's spelling of an equal max_age
// (90m stays 90m, not 1h30m).
func warmPoolValue(prior types.Object, wp *store.WarmPool) types.Object {
	if wp == nil {
		return types.ObjectNull(warmPoolAttrTypes)
	}
	age := time.Duration(wp.MaxAgeSeconds) * time.Second
	spelled := fmtAge(age)
	if !prior.IsNull() && !prior.IsUnknown() {
		if s, ok := prior.Attributes()["max_age"].(types.String); ok && !s.IsNull() && !s.IsUnknown() {
			if d, err := time.ParseDuration(s.ValueString()); err == nil && d == age {
				spelled = s.ValueString()
			}
		}
	}
	return types.ObjectValueMust(warmPoolAttrTypes, map[string]attr.Value{"size": types.Int64Value(wp.Size), "max_age": types.StringValue(spelled)})
}
