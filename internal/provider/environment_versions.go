package provider

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	dsschema "github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// Versions of an environment (issue 28): every snapshot it used, the current one and
// keep_versions previous ones kept from collection, so that going back to one (or an
// agent pinned to one) needs no build.

const versionsDoc = "Every snapshot the environment has used, the current one first, then the others by when they were last current, latest first. " +
	"The current one and the `keep_versions` latest previous ones are kept (`kept`): reverting the build inputs to a kept version's plans no build, " +
	"and an agent may pin one with `sandbox.environment_version`. A version an agent pins (`pinned_by`) is kept too, past `keep_versions`, " +
	"for as long as an agent pins it, whichever team owns the agent. The others' snapshots are collected; they stay listed for the record."

// versionAttributes are one element of `versions`, as the data source declares them.
func versionAttributes() map[string]dsschema.Attribute {
	return map[string]dsschema.Attribute{
		"snapshot_id":     computedString("The version's snapshot."),
		"build_hash":      computedString("SHA-256 over the version's build inputs; with `snapshot_id`, what `sandbox.environment_version` of an agent may name."),
		"manifest_digest": computedString("Digest of the snapshot's package manifest (the `trueforge_snapshot_manifest` data source); empty until it is taken."),
		"current_since":   computedString("When the version last became the environment's snapshot (RFC 3339)."),
		"current_until":   computedString("When another version replaced it (RFC 3339); null while it is current."),
		"current":         computedBool("Whether new sessions use this version (agents that pin another aside)."),
		"kept": computedBool("Whether its snapshot is kept from collection: the current version, the `keep_versions` latest previous ones, " +
			"and any version an agent pins (`pinned_by`)."),
		"pinned_by": computedStringList("Names of the agents whose `sandbox.environment_version` pins this version, of every owner, sorted (empty when none). " +
			"While any does, the version is kept whatever `keep_versions` says: an environment's owner cannot collect the snapshot another team's pinned agent runs on. " +
			"Once those agents change their pin or are deleted, the next apply that updates an environment of the same sandbox provider collects it, if it is past `keep_versions`."),
	}
}

// versionAttrTypes are the attribute types of one version, the resource's and the data
// source's alike.
var versionAttrTypes = objectAttrTypes(versionAttributes())

// versionsDataAttribute is `versions` of the environment data source.
func versionsDataAttribute() dsschema.ListNestedAttribute {
	return dsschema.ListNestedAttribute{MarkdownDescription: versionsDoc, Computed: true,
		NestedObject: dsschema.NestedAttributeObject{Attributes: versionAttributes()}}
}

// versionsAttribute is `versions` of the resource: the data source's attributes, as
// resource attributes.
func versionsAttribute() schema.ListNestedAttribute {
	attrs := map[string]schema.Attribute{}
	for name, a := range versionAttributes() {
		switch a.(type) {
		case dsschema.BoolAttribute:
			attrs[name] = schema.BoolAttribute{MarkdownDescription: a.GetMarkdownDescription(), Computed: true}
		case dsschema.ListAttribute:
			attrs[name] = schema.ListAttribute{MarkdownDescription: a.GetMarkdownDescription(), Computed: true, ElementType: types.StringType}
		default:
			attrs[name] = schema.StringAttribute{MarkdownDescription: a.GetMarkdownDescription(), Computed: true}
		}
	}
	return schema.ListNestedAttribute{MarkdownDescription: versionsDoc + " Unknown in a plan that changes the snapshot or `keep_versions`.",
		Computed: true, NestedObject: schema.NestedAttributeObject{Attributes: attrs}}
}

// keepVersionsAttribute is `keep_versions` of the resource, a live setting.
func keepVersionsAttribute() schema.Int64Attribute {
	return defaultedInt64(fmt.Sprintf("How many previous versions keep their snapshot (0 to %d), so that reverting to one, or pinning an agent to one, "+
		"needs no build; older ones are collected. Each kept version holds its snapshot's disk on the backend. Defaults to %d. "+
		"Changing it is applied live: no rebuild, and the versions it no longer keeps are collected by that apply.", store.MaxKeepVersions, store.DefaultKeepVersions),
		store.DefaultKeepVersions, int64validator.Between(0, store.MaxKeepVersions))
}

// versionsList is vs as the value of `versions`.
func versionsList(vs []store.EnvironmentVersion) (types.List, diag.Diagnostics) {
	var diags diag.Diagnostics
	elems := make([]attr.Value, 0, len(vs))
	for _, v := range vs {
		until := types.StringNull()
		if !v.CurrentUntil.IsZero() {
			until = types.StringValue(v.CurrentUntil.UTC().Format(time.RFC3339Nano))
		}
		obj, d := types.ObjectValue(versionAttrTypes, map[string]attr.Value{
			"snapshot_id": types.StringValue(v.SnapshotID), "build_hash": types.StringValue(v.BuildHash),
			"manifest_digest": types.StringValue(v.ManifestDigest),
			"current_since":   types.StringValue(v.CurrentSince.UTC().Format(time.RFC3339Nano)), "current_until": until,
			"current": types.BoolValue(v.Current), "kept": types.BoolValue(v.Kept), "pinned_by": stringList(v.PinnedBy),
		})
		diags.Append(d...)
		elems = append(elems, obj)
	}
	list, d := types.ListValue(types.ObjectType{AttrTypes: versionAttrTypes}, elems)
	diags.Append(d...)
	return list, diags
}

// readVersions is the `versions` of environment name from the store.
func readVersions(ctx context.Context, st *store.Store, name string, diags *diag.Diagnostics) types.List {
	vs, err := st.EnvironmentVersions(ctx, name)
	if err != nil {
		addOperationError(diags, "Error Reading Environment Versions", fmt.Sprintf("environment %q", name), err)
		return types.ListNull(types.ObjectType{AttrTypes: versionAttrTypes})
	}
	list, d := versionsList(vs)
	diags.Append(d...)
	return list
}

// finishVersions reads the versions again once the build is waited for, since the
// manifest digest of a new snapshot is taken when it turns Ready, and saves them in the
// state when they changed.
func (r *environmentResource) finishVersions(ctx context.Context, plan *environmentModel, state *tfsdk.State, diags *diag.Diagnostics) {
	versions := readVersions(ctx, r.cp.store, plan.Name.ValueString(), diags)
	if versions.IsNull() || versions.Equal(plan.Versions) {
		return
	}
	plan.Versions = versions
	diags.Append(state.Set(ctx, plan)...)
}

// keepVersions is the plan's keep_versions for the settings document.
func (m *environmentModel) keepVersions() *int64 {
	if m.KeepVersions.IsNull() || m.KeepVersions.IsUnknown() {
		return nil
	}
	n := m.KeepVersions.ValueInt64()
	return &n
}

// keptVersion returns the kept version of environment env built from build hash hash
// whose snapshot is Ready: what a plan that reverts the build inputs to it reuses.
func (r *environmentResource) keptVersion(ctx context.Context, env, hash string) (store.EnvironmentVersion, bool) {
	v, err := r.cp.store.FindVersion(ctx, env, hash)
	if err != nil || !v.Kept || v.BuildHash != hash {
		return v, false
	}
	snap, err := r.cp.store.GetSnapshot(ctx, v.SnapshotID)
	return v, err == nil && snap.Status == sandbox.StatusReady && snap.BuildHash == hash
}

// planVersions sets the plan's snapshot, status and versions when the build inputs
// changed: back to a kept version's (revert), the kept snapshot is reused and the plan
// says which, with no build; otherwise a new snapshot is baked. It reports whether a
// build is planned.
func (r *environmentResource) planVersions(ctx context.Context, plan, state *environmentModel, rebuild bool, diags *diag.Diagnostics) bool {
	name := state.Name.ValueString()
	if rebuild && !plan.BuildHash.IsUnknown() {
		if v, ok := r.keptVersion(ctx, name, plan.BuildHash.ValueString()); ok && v.SnapshotID != state.SnapshotID.ValueString() {
			r.warnPinnedKept(ctx, name, v.SnapshotID, plan.KeepVersions, diags)
			plan.SnapshotID, plan.Status = types.StringValue(v.SnapshotID), types.StringValue(sandbox.StatusReady)
			plan.Versions = types.ListUnknown(types.ObjectType{AttrTypes: versionAttrTypes})
			diags.AddAttributeWarning(path.Root("snapshot_id"), "Kept Version Will Be Reused",
				fmt.Sprintf("Environment %q returns to its kept version %s (build hash %s, current until %s): nothing is built. "+
					"New sessions use it once applied; sandboxes that already exist keep theirs.",
					name, v.SnapshotID, v.BuildHash, v.CurrentUntil.UTC().Format(time.RFC3339)))
			return false
		}
	}
	if rebuild || !plan.KeepVersions.Equal(state.KeepVersions) {
		next := state.SnapshotID.ValueString() // keep_versions alone changed: no move
		if rebuild {
			next = "" // a new snapshot
		}
		r.warnPinnedKept(ctx, name, next, plan.KeepVersions, diags)
		plan.Versions = types.ListUnknown(types.ObjectType{AttrTypes: versionAttrTypes})
	} else {
		plan.Versions = state.Versions
	}
	return rebuild
}

// warnPinnedKept warns, for a plan that makes next environment env's current snapshot
// ("" for a new one) with keep_versions keep, about each version that keep_versions
// would no longer keep but that agents pin (store.VersionsPastKeep): its snapshot is
// kept, not collected, and the warning says which agents hold it and how to let it go.
func (r *environmentResource) warnPinnedKept(ctx context.Context, env, next string, keep types.Int64, diags *diag.Diagnostics) {
	if keep.IsUnknown() || keep.IsNull() {
		return
	}
	versions, err := r.cp.store.EnvironmentVersions(ctx, env)
	if err != nil {
		return // the apply reads them again and says so
	}
	for _, v := range store.VersionsPastKeep(versions, next, keep.ValueInt64()) {
		diags.AddAttributeWarning(path.Root("keep_versions"), "Pinned Version Kept", fmt.Sprintf(
			"Version %s of environment %q (build hash %s) is past keep_versions = %d after this plan, but agent(s) %s pin it with sandbox.environment_version "+
				"(agents of every owner count), so its snapshot is kept rather than collected. To let it be collected, remove environment_version from those agents "+
				"or change it to a newer version, and apply them; the next apply that updates an environment of the same sandbox provider then collects it.",
			v.SnapshotID, env, v.BuildHash, keep.ValueInt64(), strings.Join(v.PinnedBy, ", ")))
	}
}
