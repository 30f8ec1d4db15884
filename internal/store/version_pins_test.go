package store

import (
	"context"
	"fmt"
	"reflect"
	"testing"
)

// A version an agent pins (by snapshot id or build hash) is kept past keep_versions for
// as long as an agent pins it, whoever owns the agent; once the pin changes or the agent
// goes, collection lists it; with no pin, exactly keep_versions previous ones are kept.
func TestEnvironmentVersionsPinned(t *testing.T) {
	eachDB(t, func(t *testing.T, st *Store) {
		seed(t, st) // py at snap-1 (h1), alice's
		ctx := context.Background()
		must(t, st.SetSnapshotState(ctx, "snap-1", "Ready", "", ""))
		keep := int64(1)
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
		spec := func(name, pin string) []byte {
			return fmt.Appendf(nil, `{"name":%q,"sandbox":{"enabled":true,"environment":"py","environment_version":%q}}`, name, pin)
		}
		// Alice's agent pins v1 by build hash, bob's (another team's, on alice's
		// environment) v2 by snapshot id; a third pins v3 with its sandbox off: no pin.
		must(t, st.CreateAgent(ctx, Agent{ID: "a1", Name: "by-hash", Owner: "alice", Environment: "py", Spec: spec("by-hash", "h1")}))
		must(t, st.CreateAgent(ctx, Agent{ID: "a2", Name: "by-id", Owner: "bob", Environment: "py", Spec: spec("by-id", "snap-2")}))
		must(t, st.CreateAgent(ctx, Agent{ID: "a3", Name: "off", Owner: "alice",
			Spec: []byte(`{"name":"off","sandbox":{"enabled":false,"environment":"py","environment_version":"h3"}}`)}))
		for n := 2; n <= 5; n++ {
			moveTo(n)
		}
		expect := func(what string, wantKept []bool, wantPinned [][]string, wantCollectable []string) {
			t.Helper()
			for _, s := range []*Store{st, cachedStore(t, st)} {
				versions, err := s.EnvironmentVersions(ctx, "py")
				must(t, err)
				var ids []string
				var kept []bool
				var pinned [][]string
				for _, v := range versions {
					ids, kept, pinned = append(ids, v.SnapshotID), append(kept, v.Kept), append(pinned, v.PinnedBy)
				}
				if want := []string{"snap-5", "snap-4", "snap-3", "snap-2", "snap-1"}; !reflect.DeepEqual(ids, want) {
					t.Fatalf("%s: versions = %v, want %v", what, ids, want)
				}
				if !reflect.DeepEqual(kept, wantKept) || !reflect.DeepEqual(pinned, wantPinned) {
					t.Fatalf("%s: kept = %v, pinned by %q; want %v, %q", what, kept, pinned, wantKept, wantPinned)
				}
			}
			unref, err := st.UnreferencedSnapshots(ctx, "local")
			must(t, err)
			if !reflect.DeepEqual(unref, wantCollectable) {
				t.Fatalf("%s: collectable = %v, want %v", what, unref, wantCollectable)
			}
		}
		expect("pinned", []bool{true, true, false, true, true}, [][]string{nil, nil, nil, {"by-id"}, {"by-hash"}}, []string{"snap-3"})
		for _, id := range []string{"snap-1", "snap-2"} {
			if marked, err := st.MarkSnapshotCollecting(ctx, id); err != nil || marked {
				t.Fatalf("marking pinned %s for collection = %v, %v; want refused", id, marked, err)
			}
		}
		if v, err := st.FindVersion(ctx, "py", "h1"); err != nil || !v.Kept || v.SnapshotID != "snap-1" {
			t.Fatalf("the pinned version as the harness resolves it: %+v, %v", v, err)
		}

		// What a plan that moves py on to a new snapshot says: only the pins keep v1 and v2.
		versions, err := st.EnvironmentVersions(ctx, "py")
		must(t, err)
		var past []string
		for _, v := range VersionsPastKeep(versions, "", 1) {
			past = append(past, v.SnapshotID)
		}
		if want := []string{"snap-2", "snap-1"}; !reflect.DeepEqual(past, want) {
			t.Fatalf("VersionsPastKeep = %v, want %v", past, want)
		}
		if past := VersionsPastKeep(versions, "snap-2", 4); len(past) != 0 {
			t.Fatalf("VersionsPastKeep after a revert to snap-2 keeping 4 = %+v, want none", past)
		}

		// Bob's agent moves its pin to v5; alice's goes: v1 and v2 are collectable again,
		// and exactly keep_versions = 1 previous one is kept.
		must(t, st.UpdateAgent(ctx, Agent{Name: "by-id", Environment: "py", Spec: spec("by-id", "snap-5")}))
		must(t, st.DeleteAgent(ctx, "by-hash"))
		expect("unpinned", []bool{true, true, false, false, false}, [][]string{{"by-id"}, nil, nil, nil, nil}, []string{"snap-1", "snap-2", "snap-3"})
	})
}

// The migration copies the pin of agents saved before it from their specs.
func TestMigrationVersionPins(t *testing.T) {
	eachDialect(t, func(t *testing.T, d dialect) {
		st := upgraded(t, d, 23, `
INSERT INTO owners VALUES ('alice', 0);
INSERT INTO sandbox_providers(name, type, status, owner, created_at, updated_at) VALUES ('local', 'local', 'Ready', 'alice', 0, 0);
INSERT INTO snapshots(id, provider, build_hash, spec, status, created_at, updated_at) VALUES ('snap-1', 'local', 'h1', '{}', 'Ready', 0, 0), ('snap-2', 'local', 'h2', '{}', 'Ready', 0, 0);
INSERT INTO environments(name, id, provider, owner, reserved, image, cpu, memory, disk, build_hash, snapshot_id, created_at, updated_at)
	VALUES ('py', 'e1', 'local', 'alice', 0, 'platform', 1, 1, 3, 'h2', 'snap-2', 0, 0);
INSERT INTO environment_snapshots(environment, snapshot_id, created_at, build_hash, kept) VALUES ('py', 'snap-1', 1, 'h1', 0), ('py', 'snap-2', 2, 'h2', 1);
INSERT INTO agents(name, id, owner, environment, spec, created_at, updated_at) VALUES
	('pinned', 'a1', 'alice', 'py', '{"name":"pinned","sandbox":{"enabled":true,"environment":"py","environment_version":"h1"}}', 1, 2),
	('follower', 'a2', 'alice', 'py', '{"name":"follower","sandbox":{"enabled":true,"environment":"py"}}', 1, 2);
`)
		ctx := context.Background()
		unref, err := st.UnreferencedSnapshots(ctx, "local")
		must(t, err)
		if len(unref) != 0 {
			t.Fatalf("collectable after the migration = %v, want none (snap-1 is pinned)", unref)
		}
		v, err := st.FindVersion(ctx, "py", "h1")
		if err != nil || !v.Kept || !reflect.DeepEqual(v.PinnedBy, []string{"pinned"}) {
			t.Fatalf("v1 after the migration: %+v, %v", v, err)
		}
	})
}

// cachedStore is st reopened with the config cache on: what a plan reads.
func cachedStore(t *testing.T, st *Store) *Store {
	t.Helper()
	c := reopen(t, st)
	c.EnableConfigCache()
	return c
}
