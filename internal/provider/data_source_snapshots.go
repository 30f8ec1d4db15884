package provider

import (
	"context"
	"fmt"
	"slices"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/trueforge/terraform-provider-trueforge/internal/manifest"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

type snapshotsDataSourceModel struct {
	AffectedBy      types.String `tfsdk:"affected_by"`
	IDs             types.List   `tfsdk:"ids"`
	Referenced      types.Bool   `tfsdk:"referenced"`
	SandboxProvider types.String `tfsdk:"sandbox_provider"`
	Snapshots       types.List   `tfsdk:"snapshots"`
}

var snapshotItemAttrTypes = nestedAttrTypes(snapshotsDataSourceSchema(), "snapshots")

// NewSnapshotsDataSource is the trueforge_snapshots data source.
func NewSnapshotsDataSource() datasource.DataSource {
	return &dataSource[snapshotsDataSourceModel]{typeName: "_snapshots", schema: snapshotsDataSourceSchema(), read: listSnapshots}
}

func snapshotsDataSourceSchema() schema.Schema {
	return schema.Schema{
		MarkdownDescription: "Lists the snapshots of this control plane (content-addressed builds, shared by every environment with the " +
			"same build inputs), ordered by sandbox provider and id, optionally filtered by sandbox provider, by whether anything still " +
			"references them, and by an advisory query (`affected_by`: the snapshots whose manifest holds a matching package version). " +
			"A filter that matches nothing gives an empty list. Snapshots and their manifests are shared, so every role (on PostgreSQL " +
			"too) lists them all; the sessions and artifacts an advisory reached are the harness's (`trueforge-harness snapshots affected`).",
		Attributes: map[string]schema.Attribute{
			"sandbox_provider": optionalFilter("Only snapshots of this sandbox provider.", validName()),
			"referenced": schema.BoolAttribute{
				MarkdownDescription: "Only snapshots something references (`true`: an environment's current snapshot or a kept version, " +
					"a version an agent pins, a sandbox provider's release snapshot, the base of another snapshot, or a build in " +
					"progress), or only those nothing does (`false`: what the next collection removes).",
				Optional: true,
			},
			"affected_by": schema.StringAttribute{
				MarkdownDescription: "Only snapshots whose manifest holds a version of a package in a range: `PACKAGE[@RANGE]`, with an " +
					"optional `ECOSYSTEM:` (`deb`, `apk`, `pypi`, `npm`), for example `pypi:requests@<2.32.0` or `openssl@>=3.0,<3.0.14`, " +
					"as `trueforge-harness snapshots affected` takes it. Snapshots without a manifest never match.",
				Optional: true,
			},
			"ids": computedStringList("The ids of the matching snapshots, in order."),
			"snapshots": schema.ListNestedAttribute{
				MarkdownDescription: "The matching snapshots, ordered by sandbox provider and id.",
				Computed:            true,
				NestedObject: schema.NestedAttributeObject{
					Attributes: map[string]schema.Attribute{
						"id":               computedString("The snapshot's id (derived from its build hash)."),
						"sandbox_provider": computedString("The sandbox provider it was built on."),
						"status":           computedString("`Building`, `Ready` or `Failed`, as the control plane recorded it."),
						"build_hash":       computedString("SHA-256 over its build inputs; empty for a release snapshot."),
						"referenced":       computedBool("Whether anything references it (see the `referenced` filter)."),
						"environments":     computedStringList("The environments whose current snapshot it is, ordered."),
						"manifest_digest":  computedString("The digest of its package manifest; null when none was recorded."),
						"updated_at":       computedString("When its row last changed (RFC 3339, UTC)."),
					},
				},
			},
		},
	}
}

// snapshotRow is a snapshot with what the list says of it.
type snapshotRow struct {
	s            store.Snapshot
	referenced   bool
	environments []string
	digest       string
}

// listSnapshots lists the snapshots that match the filters.
func listSnapshots(ctx context.Context, cp *controlPlane, m *snapshotsDataSourceModel, diags *diag.Diagnostics) {
	var affected map[string]bool
	if !m.AffectedBy.IsNull() {
		q, err := manifest.ParseQuery(m.AffectedBy.ValueString())
		if err != nil {
			diags.AddAttributeError(path.Root("affected_by"), "Invalid Advisory Query",
				fmt.Sprintf("affected_by %q is not PACKAGE[@RANGE]: %s. Write it as trueforge-harness snapshots affected takes it, "+
					"for example pypi:requests@<2.32.0.", m.AffectedBy.ValueString(), err))
			return
		}
		ids, err := cp.store.SnapshotsAffectedBy(ctx, q)
		if err != nil {
			listError(diags, "Snapshots", err)
			return
		}
		affected = map[string]bool{}
		for _, id := range ids {
			affected[id] = true
		}
	}
	snaps, err := cp.store.ListSnapshots(ctx)
	if err != nil {
		listError(diags, "Snapshots", err)
		return
	}
	digests, err := cp.store.SnapshotManifestDigests(ctx)
	if err != nil {
		listError(diags, "Snapshots", err)
		return
	}
	envs, err := cp.store.ListEnvironments(ctx)
	if err != nil {
		listError(diags, "Snapshots", err)
		return
	}
	usedBy := map[string][]string{}
	for _, e := range envs {
		usedBy[e.SnapshotID] = append(usedBy[e.SnapshotID], e.Name)
	}
	unreferenced := map[string]map[string]bool{} // by sandbox provider
	rows := []snapshotRow{}
	ids := []string{}
	for _, s := range snaps {
		if !matches(m.SandboxProvider, s.Provider) || affected != nil && !affected[s.ID] {
			continue
		}
		un, ok := unreferenced[s.Provider]
		if !ok {
			list, err := cp.store.UnreferencedSnapshots(ctx, s.Provider)
			if err != nil {
				listError(diags, "Snapshots", err)
				return
			}
			un = map[string]bool{}
			for _, id := range list {
				un[id] = true
			}
			unreferenced[s.Provider] = un
		}
		row := snapshotRow{s: s, referenced: !un[s.ID], environments: usedBy[s.ID], digest: digests[s.ID]}
		if !m.Referenced.IsNull() && row.referenced != m.Referenced.ValueBool() {
			continue
		}
		slices.Sort(row.environments)
		rows = append(rows, row)
		ids = append(ids, s.ID)
	}
	m.Snapshots = objectList(snapshotItemAttrTypes, rows, snapshotAttrs, diags)
	m.IDs = stringList(ids)
}

func snapshotAttrs(r snapshotRow) map[string]attr.Value {
	return map[string]attr.Value{
		"id":               types.StringValue(r.s.ID),
		"sandbox_provider": types.StringValue(r.s.Provider),
		"status":           types.StringValue(r.s.Status),
		"build_hash":       types.StringValue(r.s.BuildHash),
		"referenced":       types.BoolValue(r.referenced),
		"environments":     stringList(r.environments),
		"manifest_digest":  optionalString(r.digest),
		"updated_at":       timestamp(r.s.UpdatedAt),
	}
}
