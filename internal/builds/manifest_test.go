package builds

import (
	"context"
	"errors"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/trueforge/terraform-provider-trueforge/internal/manifest"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
	"github.com/trueforge/terraform-provider-trueforge/internal/store/storetest"
)

// manifestBuilder is a fakeBuilder that can say what its snapshots contain.
type manifestBuilder struct {
	*fakeBuilder
	calls atomic.Int32
	err   error
}

func (b *manifestBuilder) Manifest(_ context.Context, id string) (manifest.Manifest, error) {
	b.calls.Add(1)
	if b.err != nil {
		return manifest.Manifest{}, b.err
	}
	return manifest.Parse([]byte(`{"v":1,"sources":["var/lib/dpkg/status"],"packages":[{"ecosystem":"deb","name":"` + id + `","version":"1.0"}]}`))
}

// buildReady builds script's snapshot through c and waits for it, failing with what
// unless it turns Ready.
func buildReady(t *testing.T, c *Coordinator, script, what string) store.Snapshot {
	t.Helper()
	ctx := context.Background()
	snap, err := c.Ensure(ctx, sandbox.BuildRequest{Spec: sandbox.SnapshotSpec{Image: "platform", BuildScript: script}, Base: "snap-release"})
	if err != nil {
		t.Fatal(err)
	}
	if snap, err = c.Wait(ctx, snap.ID); err != nil || snap.Status != sandbox.StatusReady {
		t.Fatalf("%s: %+v %v", what, snap, err)
	}
	return snap
}

// A build that turns Ready has its manifest recorded once; later refreshes read the
// stored one instead of taking it again. A builder that cannot take it leaves the
// snapshot Ready all the same.
func TestReadyBuildRecordsItsManifestOnce(t *testing.T) {
	ctx := context.Background()
	st := storetest.Open(t, filepath.Join(t.TempDir(), "cp.db"))
	addProvider(t, st, "p", "alice")
	b := &manifestBuilder{fakeBuilder: newFakeBuilder()}
	c := &Coordinator{Store: st, Builder: b, Provider: "p"}
	snap := buildReady(t, c, "echo 1", "wait")
	sm, err := st.GetSnapshotManifest(ctx, snap.ID)
	if err != nil || sm.Packages != 1 || sm.Manifest.Packages[0].Name != snap.ID {
		t.Fatalf("stored manifest = %+v, %v", sm, err)
	}
	for range 3 {
		if _, err := c.Refresh(ctx, snap.ID); err != nil {
			t.Fatal(err)
		}
	}
	if n := b.calls.Load(); n != 1 {
		t.Errorf("manifest taken %d times, want once", n)
	}

	failing := &manifestBuilder{fakeBuilder: newFakeBuilder(), err: errors.New("reader failed")}
	c2 := &Coordinator{Store: st, Builder: failing, Provider: "p"}
	snap2 := buildReady(t, c2, "echo 2", "a failed manifest changed the build's outcome")
	if _, err := c2.Refresh(ctx, snap2.ID); err != nil {
		t.Fatal(err)
	}
	if n := failing.calls.Load(); n != 1 {
		t.Errorf("a failing manifest was tried %d times in one process, want once", n)
	}
	if _, err := st.GetSnapshotManifest(ctx, snap2.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("manifest of the failed extraction: %v", err)
	}

	// A snapshot that turned Ready under a builder that took no manifest (built before
	// manifests existed) gets one when it is asked for.
	plain := newFakeBuilder()
	c3 := &Coordinator{Store: st, Builder: plain, Provider: "p"}
	snap3 := buildReady(t, c3, "echo 3", "wait")
	later := &manifestBuilder{fakeBuilder: plain}
	c4 := &Coordinator{Store: st, Builder: later, Provider: "p"}
	if _, err := c4.Refresh(ctx, snap3.ID); err != nil || later.calls.Load() != 0 {
		t.Fatalf("a refresh of a snapshot that stays Ready took its manifest (%d calls, %v): plans would pay for it", later.calls.Load(), err)
	}
	sm3, err := c4.Manifest(ctx, snap3.ID)
	if err != nil || sm3.Manifest.Packages[0].Name != snap3.ID || later.calls.Load() != 1 {
		t.Fatalf("Manifest of a snapshot without one = %+v, %v (%d calls)", sm3, err, later.calls.Load())
	}
}
