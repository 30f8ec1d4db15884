package builds

import (
	"context"
	"testing"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// onMachine is a builder whose snapshots are files on one machine (as the local
// backend's): it sees only the builds it made.
type onMachine struct {
	*remote
	place sandbox.Place
}

func (m onMachine) SnapshotPlace() sandbox.Place { return m.place }

// A build claimed by a builder whose snapshots are files on a machine records that
// place; a builder elsewhere, which cannot see those files, leaves the snapshot Ready on
// refresh and does not rebuild it, while the builder of that place still marks a
// snapshot whose files it lost Failed.
func TestBuildsRecordWhereTheirFilesAre(t *testing.T) {
	planes(t, func(t *testing.T, open func() *store.Store) {
		ctx := context.Background()
		st := open()
		addProvider(t, st, "local", "bob")
		here := sandbox.Place{Host: "build-a", Machine: "aaaa", Dir: "/var/lib/trueforge/local-backend"}
		a := onMachine{newRemote(), here}
		close(a.release)
		coordA := &Coordinator{Store: st, Builder: a, Provider: "local"}
		spec := sandbox.SnapshotSpec{Image: "platform", BuildScript: "make", CPU: 1, MemoryGB: 1, DiskGB: 3}
		id := sandbox.SnapshotID(spec.BuildHash())
		if _, err := coordA.Ensure(ctx, sandbox.BuildRequest{Spec: spec, Base: "snap-release"}); err != nil {
			t.Fatal(err)
		}
		recorded, err := st.SnapshotHost(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if p, ok := sandbox.ParsePlace(recorded); !ok || p != here {
			t.Fatalf("recorded %q; want the claiming builder's place %+v", recorded, here)
		}
		a.states[id] = sandbox.BuildState{Status: sandbox.StatusReady}
		if snap, err := coordA.Refresh(ctx, id); err != nil || snap.Status != sandbox.StatusReady {
			t.Fatalf("A's refresh: %+v, %v", snap, err)
		}

		b := onMachine{newRemote(), sandbox.Place{Host: "build-b", Machine: "bbbb", Dir: here.Dir}}
		coordB := &Coordinator{Store: st, Builder: b, Provider: "local"}
		if snap, err := coordB.Refresh(ctx, id); err != nil || snap.Status != sandbox.StatusReady {
			t.Fatalf("B's refresh of A's snapshot: %+v, %v; want it left Ready", snap, err)
		}
		n, _ := st.CountBuilds(ctx)
		if snap, err := coordB.Ensure(ctx, sandbox.BuildRequest{Spec: spec, Base: "snap-release"}); err != nil || snap.Status != sandbox.StatusReady {
			t.Fatalf("B's ensure: %+v, %v", snap, err)
		}
		if after, _ := st.CountBuilds(ctx); after != n {
			t.Fatalf("B rebuilt A's snapshot: %d builds, was %d", after, n)
		}

		delete(a.states, id) // A's files are removed out of band
		if snap, err := coordA.Refresh(ctx, id); err != nil || snap.Status != sandbox.StatusFailed {
			t.Fatalf("A's refresh after its files went: %+v, %v; want Failed", snap, err)
		}
	})
}
