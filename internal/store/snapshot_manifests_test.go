package store

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/manifest"
)

// A manifest is stored with its snapshot, goes with it, and the advisory query finds the
// snapshot, the environment on it, the session whose sandbox came from it and the
// artifacts: one from the snapshot, one whose session installed the package itself.
func TestSnapshotManifestAndAffectedQuery(t *testing.T) {
	eachDB(t, func(t *testing.T, st *Store) {
		ctx := context.Background()
		seed(t, st)
		if _, err := st.GetSnapshotManifest(ctx, "snap-1"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("manifest before any was stored: %v", err)
		}
		m, _ := manifest.Parse([]byte(`{"v":1,"sources":[],"packages":[
			{"ecosystem":"deb","name":"libc6","version":"2.36-9+deb12u4","arch":"amd64"},
			{"ecosystem":"deb","name":"libc6","version":"2.36-9+deb12u4","arch":"i386"},
			{"ecosystem":"pypi","name":"requests","version":"2.31.0"}]}`))
		must(t, st.PutSnapshotManifest(ctx, "snap-1", m, 12*time.Millisecond))
		// Stored again (a second process saw the build turn Ready): replaced, not doubled.
		must(t, st.PutSnapshotManifest(ctx, "snap-1", m, 15*time.Millisecond))
		got, err := st.GetSnapshotManifest(ctx, "snap-1")
		if err != nil {
			t.Fatal(err)
		}
		if got.Digest != m.Digest() || got.Packages != 3 || got.Bytes != int64(len(m.JSON())) || got.Extract != 15*time.Millisecond || got.Manifest.Digest() != m.Digest() {
			t.Fatalf("stored manifest = %+v", got)
		}

		for _, id := range []string{"s1", "s2", "s3"} {
			must(t, st.CreateSession(ctx, Session{ID: id, Agent: "a", Owner: "bob"}))
		}
		must(t, st.PutSessionSandbox(ctx, SessionSandbox{SessionID: "s1", Provider: "local", ProviderType: "local", SandboxID: "sb1", Environment: "py", SnapshotID: "snap-1", State: "running", Generation: 1}))
		now := time.Now()
		for _, a := range []Artifact{
			{ID: "a1", SessionID: "s1", Path: "out.txt", SHA256: "x", SnapshotID: "snap-1", ManifestDigest: m.Digest(), Content: []byte("x"), CreatedAt: now, ExpiresAt: now},
			{ID: "a2", SessionID: "s2", Path: "r.txt", SHA256: "y", SnapshotID: "snap-other", Content: []byte("y"), CreatedAt: now, ExpiresAt: now,
				SessionInstalls: []manifest.Package{{Ecosystem: manifest.PyPI, Name: "requests", Version: "2.30.0"}}},
			{ID: "a3", SessionID: "s3", Path: "safe.txt", SHA256: "z", SnapshotID: "snap-other", Content: []byte("z"), CreatedAt: now, ExpiresAt: now,
				SessionInstalls: []manifest.Package{{Ecosystem: manifest.PyPI, Name: "requests", Version: "2.32.3"}}},
		} {
			must(t, st.PutArtifact(ctx, a))
		}
		arts, err := st.ListArtifacts(ctx, "s2")
		if err != nil || len(arts) != 1 || len(arts[0].SessionInstalls) != 1 || arts[0].SessionInstalls[0].Version != "2.30.0" {
			t.Fatalf("artifact lineage read back = %+v, %v", arts, err)
		}

		q, _ := manifest.ParseQuery("pypi:Requests@<2.32")
		aff, err := st.AffectedBy(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		if len(aff.Snapshots) != 1 || aff.Snapshots[0].ID != "snap-1" {
			t.Errorf("snapshots = %+v", aff.Snapshots)
		}
		if len(aff.Environments) != 1 || aff.Environments[0].Name != "py" || !aff.Environments[0].Current {
			t.Errorf("environments = %+v", aff.Environments)
		}
		if len(aff.Sessions) != 2 || aff.Sessions[0].ID != "s1" || aff.Sessions[0].Via != "snapshot" || aff.Sessions[1].ID != "s2" || aff.Sessions[1].Via != "session install" {
			t.Errorf("sessions = %+v", aff.Sessions)
		}
		if len(aff.Artifacts) != 2 || aff.Artifacts[0].ID != "a1" || aff.Artifacts[0].Via != "snapshot" || aff.Artifacts[1].ID != "a2" || aff.Artifacts[1].Via != "session install" {
			t.Errorf("artifacts = %+v", aff.Artifacts)
		}
		// A range that holds no stored version finds nothing.
		q, _ = manifest.ParseQuery("requests@>=3")
		if aff, err = st.AffectedBy(ctx, q); err != nil || len(aff.Snapshots)+len(aff.Artifacts)+len(aff.Sessions)+len(aff.Environments) != 0 {
			t.Errorf("requests@>=3 found %+v, %v", aff, err)
		}
		q, _ = manifest.ParseQuery("deb:libc6@<2.36-9+deb12u10")
		if aff, err = st.AffectedBy(ctx, q); err != nil || len(aff.Snapshots) != 1 || len(aff.Snapshots[0].Packages) != 1 {
			t.Errorf("libc6 query = %+v, %v", aff, err)
		}
	})
}
