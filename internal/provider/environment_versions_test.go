package provider

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// Build inputs set back to a kept version's: the plan names its snapshot, Ready, with
// a warning saying which and no "New Snapshot Will Be Baked"; with keep_versions = 0 the
// old snapshot is not kept, and the plan bakes it anew.
func TestEnvironmentRevertPlansTheKeptSnapshot(t *testing.T) {
	for _, keep := range []int64{3, 0} {
		t.Run(map[int64]string{3: "kept", 0: "not kept"}[keep], func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			cp := seededControlPlane(t, f, nil) // py on v1: the default inputs
			r := configured(t, &environmentResource{}, cp)
			s := resourceSchema(t, r)
			v1 := pyEnvironment(t, s, cp, false, nil)

			// py moves to v2 (build_script "echo v2").
			v2 := v1
			v2.BuildScript = types.StringValue("echo v2")
			spec, _ := v2.spec(t.Context())
			hash2 := spec.BuildHash()
			snap2 := sandbox.SnapshotID(hash2)
			f.exec(`INSERT INTO snapshots(id, provider, build_hash, spec, status, created_at, updated_at) VALUES (?, 'local', ?, '{}', 'Ready', 0, 0)`, snap2, hash2)
			env, err := cp.store.GetEnvironment(t.Context(), "py")
			if err != nil {
				t.Fatal(err)
			}
			env.BuildScript, env.BuildHash, env.SnapshotID = "echo v2", hash2, snap2
			env.Settings.KeepVersions = &keep
			if err := cp.store.UpdateEnvironment(t.Context(), env); err != nil {
				t.Fatal(err)
			}
			v2.BuildHash, v2.SnapshotID = types.StringValue(hash2), types.StringValue(snap2)

			plan := asPlanned(v1)
			diags, planned := modifyPlan(t, r, s, &v2, &plan)
			if diags.HasError() {
				t.Fatalf("ModifyPlan failed:\n%s", errorsOf(diags))
			}
			var got environmentModel
			if d := planned.Get(t.Context(), &got); d.HasError() {
				t.Fatal(d)
			}
			warnings := warningsOf(diags)
			if keep == 0 {
				if !got.SnapshotID.IsUnknown() || warnings["New Snapshot Will Be Baked"] == nil {
					t.Fatalf("v1 not kept: planned snapshot %s, warnings %v; want a build", got.SnapshotID, warningSummaries(diags))
				}
				return
			}
			if got.SnapshotID.ValueString() != v1.SnapshotID.ValueString() || got.Status.ValueString() != sandbox.StatusReady || !got.Versions.IsUnknown() {
				t.Fatalf("planned snapshot %s, status %s, versions %s; want v1's %s, Ready, versions unknown", got.SnapshotID, got.Status, got.Versions, v1.SnapshotID)
			}
			w := warnings["Kept Version Will Be Reused"]
			if w == nil || warnings["New Snapshot Will Be Baked"] != nil {
				t.Fatalf("warnings %v; want only Kept Version Will Be Reused", warningSummaries(diags))
			}
			for _, frag := range []string{`Environment "py"`, v1.SnapshotID.ValueString(), v1.BuildHash.ValueString(), "nothing is built"} {
				if !strings.Contains(w.Detail(), frag) {
					t.Errorf("warning detail %q lacks %q", w.Detail(), frag)
				}
			}
		})
	}
}

// A plan that moves py past keep_versions while an agent (another team's) pins a version
// keep_versions no longer keeps warns "Pinned Version Kept", naming the version, the
// agent and what lets it go; its snapshot is kept.
func TestEnvironmentPlanWarnsPinnedVersionKept(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	cp := seededControlPlane(t, f, nil) // py on v1
	r := configured(t, &environmentResource{}, cp)
	s := resourceSchema(t, r)
	v1 := pyEnvironment(t, s, cp, false, nil)
	ctx := t.Context()

	// bob's agent pins v1 by build hash; py moves to v2, keeping no previous version.
	spec := fmt.Sprintf(`{"name":"bobs","sandbox":{"enabled":true,"environment":"py","environment_version":%q}}`, v1.BuildHash.ValueString())
	if err := cp.store.CreateAgent(ctx, store.Agent{ID: "a-bob", Name: "bobs", Owner: "bob", Environment: "py", Spec: []byte(spec)}); err != nil {
		t.Fatal(err)
	}
	hash2 := sandbox.SnapshotSpec{Image: sandbox.PlatformImage, BuildScript: "echo v2", CPU: 1, MemoryGB: 1, DiskGB: 3}.BuildHash()
	snap2 := sandbox.SnapshotID(hash2)
	f.exec(`INSERT INTO snapshots(id, provider, build_hash, spec, status, created_at, updated_at) VALUES (?, 'local', ?, '{}', 'Ready', 0, 0)`, snap2, hash2)
	env, err := cp.store.GetEnvironment(ctx, "py")
	if err != nil {
		t.Fatal(err)
	}
	zero := int64(0)
	env.BuildScript, env.BuildHash, env.SnapshotID, env.Settings.KeepVersions = "echo v2", hash2, snap2, &zero
	if err := cp.store.UpdateEnvironment(ctx, env); err != nil {
		t.Fatal(err)
	}
	if unref, err := cp.store.UnreferencedSnapshots(ctx, "local"); err != nil || slices.Contains(unref, v1.SnapshotID.ValueString()) {
		t.Fatalf("collectable = %v, %v; v1 is pinned", unref, err)
	}
	state := v1
	state.BuildScript, state.BuildHash, state.SnapshotID, state.KeepVersions = types.StringValue("echo v2"), types.StringValue(hash2), types.StringValue(snap2), types.Int64Value(0)
	next := state
	next.BuildScript = types.StringValue("echo v3")
	next.BuildHash = types.StringUnknown()
	plan := asPlanned(state)
	diags, _ := modifyPlan(t, r, s, &next, &plan)
	if diags.HasError() {
		t.Fatalf("ModifyPlan failed:\n%s", errorsOf(diags))
	}
	w := warningsOf(diags)["Pinned Version Kept"]
	if w == nil {
		t.Fatalf("warnings %v; want Pinned Version Kept", warningSummaries(diags))
	}
	for _, frag := range []string{v1.SnapshotID.ValueString(), v1.BuildHash.ValueString(), `environment "py"`, "bobs", "keep_versions = 0", "remove environment_version"} {
		if !strings.Contains(w.Detail(), frag) {
			t.Errorf("warning detail %q lacks %q", w.Detail(), frag)
		}
	}
}
