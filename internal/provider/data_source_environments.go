package provider

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/trueforge/terraform-provider-trueforge/internal/builds"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

type environmentsDataSourceModel struct {
	Environments    types.List   `tfsdk:"environments"`
	Names           types.List   `tfsdk:"names"`
	Owner           types.String `tfsdk:"owner"`
	SandboxProvider types.String `tfsdk:"sandbox_provider"`
	Status          types.String `tfsdk:"status"`
}

// environmentItemAttrTypes is one element of `environments`.
var environmentItemAttrTypes = nestedAttrTypes(environmentsDataSourceSchema(), "environments")

// environmentStatuses are the values of an environment's status.
var environmentStatuses = []string{sandbox.StatusBuilding, sandbox.StatusReady, sandbox.StatusFailed}

// NewEnvironmentsDataSource is the trueforge_environments data source.
func NewEnvironmentsDataSource() datasource.DataSource {
	return &dataSource[environmentsDataSourceModel]{typeName: "_environments", schema: environmentsDataSourceSchema(), read: listEnvironments}
}

func environmentsDataSourceSchema() schema.Schema {
	return schema.Schema{
		MarkdownDescription: "Lists the environments of this control plane, ordered by name, optionally filtered by owner, sandbox provider " +
			"and status; every filter left out matches all. The reserved `default` environment is listed too (`reserved = true`). " +
			"A filter that matches nothing gives an empty list, not an error. Every team can list every environment (on PostgreSQL " +
			"too); secrets are never listed. `status` is refreshed from the sandbox backend, as the `trueforge_environment` data source does.",
		Attributes: map[string]schema.Attribute{
			"environments": schema.ListNestedAttribute{
				MarkdownDescription: "The matching environments, ordered by name.",
				Computed:            true,
				NestedObject: schema.NestedAttributeObject{
					Attributes: withSharingAttributes(map[string]schema.Attribute{
						"build_hash": computedString("SHA-256 over the build inputs: the snapshot's content address."),
						"cpu":        computedInt64("CPUs for each sandbox."),
						"disk":       computedInt64("Disk in GB for each sandbox."),
						"env":        computedStringMap("Environment variables of every sandbox process (empty when none)."),
						"image":      computedString("Base image; `platform` is the release snapshot."),
						"memory":     computedInt64("Memory in GB for each sandbox."),
						"name":       computedString("Name of the environment."),
						"network": schema.SingleNestedAttribute{
							MarkdownDescription: "Outbound network policy.",
							Computed:            true,
							Attributes:          dataNetworkAttributes(),
						},
						"labels":           computedStringMap("Labels set on every sandbox of the environment (empty when none)."),
						"owner":            computedString("Who created the environment."),
						"reserved":         computedBool("Whether this is the sandbox provider's reserved `default` environment."),
						"sandbox_provider": computedString("Name of the sandbox provider the environment belongs to."),
						"snapshot_id":      computedString("The snapshot new sandboxes are cloned from."),
						"status":           computedString("`Building`, `Ready` or `Failed`. Only Ready environments can be selected on an agent."),
						"keep_versions":    computedInt64("How many previous versions keep their snapshot from collection."),
						"versions":         versionsDataAttribute(), // environment_versions.go
						"warm_pool":        warmPoolDataAttribute(), // environment_warm_pool.go
						"rollout":          rolloutDataAttribute(),  // environment_rollout.go
					}),
				},
			},
			"names":            computedStringList("The names of the matching environments, ordered: handy for `for_each` (`toset(...)`)."),
			"owner":            optionalFilter("Only environments this owner created (on PostgreSQL, a database role).", stringvalidator.LengthAtLeast(1)),
			"sandbox_provider": optionalFilter("Only environments of this sandbox provider.", validName()),
			"status":           optionalFilter("Only environments with this status: `Building`, `Ready` or `Failed` (for example `Ready`: the ones an agent can select).", stringvalidator.OneOf(environmentStatuses...)),
		},
	}
}

// listEnvironments lists the environments that match the filters, by name.
func listEnvironments(ctx context.Context, cp *controlPlane, m *environmentsDataSourceModel, diags *diag.Diagnostics) {
	all, err := cp.store.ListEnvironments(ctx)
	if err != nil {
		addOperationError(diags, "Error Listing Environments", "the environments of this control plane", err)
		return
	}
	// Ordered by name whatever the store's order, so that the list (and every plan
	// over it) is deterministic.
	slices.SortFunc(all, func(a, b store.Environment) int { return strings.Compare(a.Name, b.Name) })
	st := environmentStatus{cp: cp, coords: map[string]*builds.Coordinator{}}
	items := []attr.Value{}
	names := []string{}
	for _, env := range all {
		if !m.Owner.IsNull() && env.Owner != m.Owner.ValueString() ||
			!m.SandboxProvider.IsNull() && env.Provider != m.SandboxProvider.ValueString() {
			continue
		}
		status := st.of(ctx, env, diags)
		if !m.Status.IsNull() && status != m.Status.ValueString() {
			continue
		}
		item, d := environmentItem(env, status, readVersions(ctx, cp.store, env.Name, diags))
		diags.Append(d...)
		items = append(items, item)
		names = append(names, env.Name)
	}
	if diags.HasError() {
		return
	}
	tflog.Debug(ctx, "data source: environments listed", map[string]any{
		"owner": m.Owner.ValueString(), "sandbox_provider": m.SandboxProvider.ValueString(), "status": m.Status.ValueString(),
		"matched": len(items), "of": len(all),
	})
	var d diag.Diagnostics
	m.Environments, d = types.ListValue(types.ObjectType{AttrTypes: environmentItemAttrTypes}, items)
	diags.Append(d...)
	m.Names = stringList(names)
}

// environmentStatus refreshes environments' snapshot status from their backends, one
// coordinator per sandbox provider (both environment data sources read status so).
type environmentStatus struct {
	cp     *controlPlane
	coords map[string]*builds.Coordinator
	failed map[string]error // providers whose backend could not be opened
}

// of is env's status, Failed (with a warning) when its backend cannot tell.
func (s *environmentStatus) of(ctx context.Context, env store.Environment, diags *diag.Diagnostics) string {
	coord, ok := s.coords[env.Provider]
	if !ok {
		var err error
		if coord, _, err = s.cp.coordinator(ctx, env.Provider); err != nil {
			if s.failed == nil {
				s.failed = map[string]error{}
			}
			if _, warned := s.failed[env.Provider]; !warned {
				diags.AddWarning("Environment Status Unknown",
					fmt.Sprintf("The backend of sandbox provider %q could not be opened, so its environments' status reads Failed.\n\nOriginal Error: %s", env.Provider, err))
			}
			s.failed[env.Provider] = err
			return sandbox.StatusFailed
		}
		s.coords[env.Provider] = coord
	}
	snap, err := coord.Refresh(ctx, env.SnapshotID)
	if err != nil {
		diags.AddWarning("Environment Status Unknown",
			fmt.Sprintf("The snapshot status of environment %q could not be refreshed from its sandbox provider %q, so status reads Failed.\n\nOriginal Error: %s", env.Name, env.Provider, err))
		return sandbox.StatusFailed
	}
	return snap.Status
}

// environmentItem is env as an element of `environments`.
func environmentItem(env store.Environment, status string, versions types.List) (attr.Value, diag.Diagnostics) {
	network, diags := networkObject(env)
	item, d := types.ObjectValue(environmentItemAttrTypes, map[string]attr.Value{
		"build_hash":       types.StringValue(env.BuildHash),
		"cpu":              types.Int64Value(env.CPU),
		"disk":             types.Int64Value(env.DiskGB),
		"env":              knownStringMap(env.Env),
		"image":            types.StringValue(env.Image),
		"memory":           types.Int64Value(env.MemoryGB),
		"name":             types.StringValue(env.Name),
		"network":          network,
		"labels":           knownStringMap(env.Settings.Labels),
		"owner":            types.StringValue(env.Owner),
		"shared_with":      stringSet(env.SharedWith),
		"has_secrets":      types.BoolValue(env.HasSecrets),
		"reserved":         types.BoolValue(env.Reserved),
		"sandbox_provider": types.StringValue(env.Provider),
		"snapshot_id":      types.StringValue(env.SnapshotID),
		"status":           types.StringValue(status),
		"keep_versions":    types.Int64Value(env.Settings.Keep()),
		"versions":         versions,
		"warm_pool":        warmPoolData(env),
		"rollout":          rolloutData(env),
	})
	diags.Append(d...)
	return item, diags
}
