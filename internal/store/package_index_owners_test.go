package store

import (
	"context"
	"testing"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/manifest"
)

// TestRLSPackageIndexOwners (migration 16): a team cannot delete, change or replace the
// manifest and package index of a snapshot another team recorded, by the store or by
// hand-written SQL, so the advisory query still finds that team's snapshot; the recorder
// still replaces its own.
func TestRLSPackageIndexOwners(t *testing.T) {
	p := newRLSPlane(t)
	ctx := context.Background()
	// bob's environment on a snapshot of his, whose manifest his apply recorded.
	if _, _, err := p.asBob.ClaimSnapshot(ctx, Snapshot{ID: "snap-b", Provider: "local", BuildHash: "hb", Spec: "{}"}, "Building", "Failed"); err != nil {
		t.Fatal(err)
	}
	must(t, p.asBob.CreateEnvironment(ctx, Environment{ID: "eb", Name: "bobs", Provider: "local", Owner: p.bob, Image: "platform", CPU: 1, MemoryGB: 1, DiskGB: 3, BuildHash: "hb", SnapshotID: "snap-b"}))
	m, err := manifest.Parse([]byte(`{"v":1,"sources":[],"packages":[{"ecosystem":"pypi","name":"requests","version":"2.31.0"},{"ecosystem":"deb","name":"openssl","version":"3.0.11-1"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	must(t, p.asBob.PutSnapshotManifest(ctx, "snap-b", m, time.Millisecond))
	// alice records and replaces her own snapshot's manifest.
	must(t, p.asAlice.PutSnapshotManifest(ctx, "snap-1", m, time.Millisecond))
	must(t, p.asAlice.PutSnapshotManifest(ctx, "snap-1", m, 2*time.Millisecond))

	raw := p.asAlice.DB()
	// Everything: alice's own rows (snap-1) may go, bob's must stay (AffectedBy below).
	if _, err := raw.Exec(`DELETE FROM snapshot_packages`); err != nil {
		t.Logf("alice's DELETE of every package row: %v", err)
	}
	changeNone(t, raw, "alice's", "bob's",
		`DELETE FROM snapshot_packages WHERE snapshot_id = 'snap-b'`,
		`UPDATE snapshot_packages SET version = '0' WHERE snapshot_id = 'snap-b'`,
		`UPDATE snapshot_packages SET snapshot_id = 'snap-1' WHERE snapshot_id = 'snap-b'`,
		`DELETE FROM snapshot_manifests WHERE snapshot_id = 'snap-b'`,
		`UPDATE snapshot_manifests SET content = '{}', recorded_by = current_user WHERE snapshot_id = 'snap-b'`,
	)
	refused(t, raw, "alice's",
		`INSERT INTO snapshot_packages(snapshot_id, ecosystem, name, version) VALUES ('snap-b', 'pypi', 'decoy', '1')`,
		`INSERT INTO snapshot_manifests(snapshot_id, digest, content, packages, bytes, extract_ms, created_at, recorded_by) VALUES ('snap-x', 'd', '{}', 0, 2, 0, 0, 'someone_else')`,
	)
	// Replacing it through the store, as a second apply that saw the build would.
	empty, _ := manifest.Parse([]byte(`{"v":1,"sources":[],"packages":[]}`))
	if err := p.asAlice.PutSnapshotManifest(ctx, "snap-b", empty, time.Millisecond); err == nil {
		t.Error("alice replaced the manifest bob recorded")
	}

	got, err := p.asHarness.GetSnapshotManifest(ctx, "snap-b")
	if err != nil || got.Digest != m.Digest() || got.Packages != 2 {
		t.Fatalf("bob's manifest after alice's attempts: %+v, %v", got, err)
	}
	for _, st := range []*Store{p.asHarness} { // the advisory query is the harness's (it reads sessions)
		q, _ := manifest.ParseQuery("requests@2.31.0")
		aff, err := st.AffectedBy(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, s := range aff.Snapshots {
			found = found || s.ID == "snap-b"
		}
		if !found {
			t.Errorf("AffectedBy as %s misses bob's snapshot: %+v", st.Role(), aff.Snapshots)
		}
	}
	// bob still replaces his own.
	must(t, p.asBob.PutSnapshotManifest(ctx, "snap-b", m, 3*time.Millisecond))
}
