package store

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"
)

// An environment's versions: each snapshot it used once, the current first; exactly
// keep_versions previous ones are kept, and collection lists only the others; a revert
// makes a kept version current again without a new version.
func TestEnvironmentVersionsKeep(t *testing.T) {
	eachDB(t, func(t *testing.T, st *Store) {
		seed(t, st) // py at snap-1
		ctx := context.Background()
		must(t, st.SetSnapshotState(ctx, "snap-1", "Ready", "", ""))
		keep := int64(2)
		e, err := st.GetEnvironment(ctx, "py")
		must(t, err)
		e.Settings.KeepVersions = &keep
		moveTo := func(n int) {
			t.Helper()
			id, hash := fmt.Sprintf("snap-%d", n), fmt.Sprintf("h%d", n)
			if _, _, err := st.ClaimSnapshot(ctx, Snapshot{ID: id, Provider: "local", BuildHash: hash, Spec: "{}"}, "Building", "Failed"); err != nil {
				t.Fatal(err)
			}
			must(t, st.SetSnapshotState(ctx, id, "Ready", "", ""))
			e.SnapshotID, e.BuildHash = id, hash
			must(t, st.UpdateEnvironment(ctx, e))
		}
		for n := 2; n <= 5; n++ {
			moveTo(n)
		}
		versions, err := st.EnvironmentVersions(ctx, "py")
		must(t, err)
		var ids []string
		var kept []bool
		for _, v := range versions {
			ids = append(ids, v.SnapshotID)
			kept = append(kept, v.Kept)
		}
		if want := []string{"snap-5", "snap-4", "snap-3", "snap-2", "snap-1"}; !reflect.DeepEqual(ids, want) {
			t.Fatalf("versions = %v, want %v", ids, want)
		}
		if want := []bool{true, true, true, false, false}; !reflect.DeepEqual(kept, want) {
			t.Fatalf("kept = %v, want %v (the current one and keep_versions = 2 previous)", kept, want)
		}
		if !versions[0].Current || !versions[0].CurrentUntil.IsZero() || versions[1].CurrentUntil != versions[0].CurrentSince || versions[1].BuildHash != "h4" {
			t.Fatalf("versions[0] = %+v, versions[1] = %+v", versions[0], versions[1])
		}
		unref, err := st.UnreferencedSnapshots(ctx, "local")
		must(t, err)
		if want := []string{"snap-1", "snap-2"}; !reflect.DeepEqual(unref, want) {
			t.Fatalf("collectable = %v, want %v", unref, want)
		}
		if marked, err := st.MarkSnapshotCollecting(ctx, "snap-3"); err != nil || marked {
			t.Fatalf("marking kept snap-3 for collection = %v, %v; want refused", marked, err)
		}

		// Revert to snap-3: one version for it, current again; snap-5 and snap-4 stay kept.
		moveTo(3)
		versions, err = st.EnvironmentVersions(ctx, "py")
		must(t, err)
		if len(versions) != 5 || versions[0].SnapshotID != "snap-3" || !versions[0].Current || versions[1].SnapshotID != "snap-5" || !versions[1].Kept || !versions[2].Kept {
			t.Fatalf("after the revert: %+v", versions)
		}
		v, err := st.FindVersion(ctx, "py", "h5")
		if err != nil || v.SnapshotID != "snap-5" {
			t.Fatalf("FindVersion(h5) = %+v, %v", v, err)
		}
		if _, err := st.FindVersion(ctx, "py", "h9"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("FindVersion(h9) = %v, want ErrNotFound", err)
		}

		// A plan reads them from the config cache, loaded in the environments' statement: the same versions.
		cached := reopen(t, st)
		cached.EnableConfigCache()
		fromCache, err := cached.EnvironmentVersions(ctx, "py")
		must(t, err)
		if !reflect.DeepEqual(fromCache, versions) || cached.ConfigLoads() != 1 {
			t.Fatalf("versions from the config cache (%d loads) = %+v, want %+v", cached.ConfigLoads(), fromCache, versions)
		}

		// keep_versions = 0 keeps the current one only.
		zero := int64(0)
		e.Settings.KeepVersions = &zero
		must(t, st.UpdateEnvironment(ctx, e))
		unref, err = st.UnreferencedSnapshots(ctx, "local")
		must(t, err)
		if want := []string{"snap-1", "snap-2", "snap-4", "snap-5"}; !reflect.DeepEqual(unref, want) {
			t.Fatalf("collectable with keep_versions = 0: %v, want %v", unref, want)
		}
	})
}
