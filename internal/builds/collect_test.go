package builds

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/pgtest"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
	"github.com/trueforge/terraform-provider-trueforge/internal/store/storetest"
)

// Garbage collection against applies that run at the same moment, on SQLite and on
// PostgreSQL: a snapshot that one apply claims for reuse while another collects it is
// either kept (the reference came first) or claimed again and rebuilt (the collection
// came first); an environment never ends up on a snapshot whose files are gone.

// fakeBuilder is a backend whose builds finish at once: a set of snapshot ids.
type fakeBuilder struct {
	mu     sync.Mutex
	have   map[string]bool
	starts map[string]int
}

func newFakeBuilder() *fakeBuilder {
	return &fakeBuilder{have: map[string]bool{}, starts: map[string]int{}}
}

func (b *fakeBuilder) PrepareRelease(context.Context) (string, error) { return "snap-release", nil }

func (b *fakeBuilder) StartBuild(_ context.Context, req sandbox.BuildRequest) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.have[req.ID] = true
	b.starts[req.ID]++
	return nil
}

func (b *fakeBuilder) BuildState(_ context.Context, id string) (sandbox.BuildState, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.have[id] {
		return sandbox.BuildState{}, fmt.Errorf("snapshot %s: %w", id, sandbox.ErrNotFound)
	}
	return sandbox.BuildState{Status: sandbox.StatusReady}, nil
}

func (b *fakeBuilder) DeleteSnapshot(_ context.Context, id string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.have, id)
	return nil
}

// builds is how many builds of id were started.
func (b *fakeBuilder) builds(id string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.starts[id]
}

func (b *fakeBuilder) has(id string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.have[id]
}

// planes runs fn against a fresh control plane on each database: open returns another
// connection to it (a second apply's process).
func planes(t *testing.T, fn func(t *testing.T, open func() *store.Store)) {
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(t.TempDir(), "trueforge.db")
		fn(t, func() *store.Store { return storetest.Open(t, path) })
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		url := pgtest.Get(t).Database(t)
		fn(t, func() *store.Store { return storetest.Open(t, url) })
	})
}

// setup creates the sandbox provider "local" and returns a coordinator on st.
func setup(t *testing.T, st *store.Store, b *fakeBuilder) *Coordinator {
	t.Helper()
	addProvider(t, st, "local", "alice")
	return &Coordinator{Store: st, Builder: b, Provider: "local", Poll: time.Millisecond}
}

// addProvider creates the ready local sandbox provider name of owner in st, unless
// another connection to the same database created it first.
func addProvider(t *testing.T, st *store.Store, name, owner string) {
	t.Helper()
	p := store.SandboxProvider{Name: name, Type: "local", Status: "Ready", Owner: owner}
	if err := st.CreateSandboxProvider(context.Background(), p); err != nil && !errors.Is(err, store.ErrAlreadyExists) {
		t.Fatal(err)
	}
}

func spec(script string) sandbox.SnapshotSpec {
	return sandbox.SnapshotSpec{Image: "platform", BuildScript: script, CPU: 1, MemoryGB: 1, DiskGB: 3}
}

// env is environment name on snapshot snap.
// These tests are about snapshots nothing refers to once an environment moves on, so
// their environments keep no previous version (keep_versions = 0).
func env(name string, snap store.Snapshot) store.Environment {
	var keepNone int64
	return store.Environment{ID: "env-" + name, Name: name, Provider: "local", Owner: "alice", Image: "platform",
		CPU: 1, MemoryGB: 1, DiskGB: 3, BuildHash: snap.BuildHash, SnapshotID: snap.ID,
		Settings: store.EnvironmentSettings{KeepVersions: &keepNone}}
}

// collecting builds sp's snapshot for an environment "a", removes the environment and
// marks the snapshot Collecting through c: a collection that has begun.
func collecting(t *testing.T, ctx context.Context, c *Coordinator, sp sandbox.SnapshotSpec) store.Snapshot {
	t.Helper()
	s, err := create(ctx, c, "a", sp)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Store.DeleteEnvironment(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if ok, err := c.Store.MarkSnapshotCollecting(ctx, s.ID); !ok || err != nil {
		t.Fatalf("marking: %t, %v", ok, err)
	}
	return s
}

// create stores environment name on spec's snapshot through c.Use and waits for the build.
func create(ctx context.Context, c *Coordinator, name string, sp sandbox.SnapshotSpec) (store.Snapshot, error) {
	snap, saveErr, err := c.Use(ctx, sandbox.BuildRequest{Spec: sp}, func(s store.Snapshot) error { return c.Store.CreateEnvironment(ctx, env(name, s)) })
	if err = errors.Join(err, saveErr); err != nil {
		return snap, err
	}
	return c.Wait(ctx, snap.ID)
}

// move points environment name at spec's snapshot through c.Use, waits for the build and
// collects what is left unreferenced, as an apply's update does.
func move(ctx context.Context, c *Coordinator, name string, sp sandbox.SnapshotSpec) (store.Snapshot, error) {
	snap, saveErr, err := c.Use(ctx, sandbox.BuildRequest{Spec: sp}, func(s store.Snapshot) error { return c.Store.UpdateEnvironment(ctx, env(name, s)) })
	if err = errors.Join(err, saveErr); err != nil {
		return snap, err
	}
	if snap, err = c.Wait(ctx, snap.ID); err != nil {
		return snap, err
	}
	_, err = c.Collect(ctx)
	return snap, err
}

// The collection comes between the claim and the save: the save is refused, and the
// snapshot is claimed again and rebuilt, so the environment never points at a removed one.
func TestUseClaimsAgainWhenCollectedBeforeTheSave(t *testing.T) {
	planes(t, func(t *testing.T, open func() *store.Store) {
		ctx := context.Background()
		b := newFakeBuilder()
		a, bb := setup(t, open(), b), setup(t, open(), b)
		old, next := spec("echo old"), spec("echo new")
		s, err := create(ctx, a, "a", old)
		if err != nil {
			t.Fatal(err)
		}
		saves := 0
		snap, saveErr, err := bb.Use(ctx, sandbox.BuildRequest{Spec: old}, func(claimed store.Snapshot) error {
			saves++
			if saves == 1 {
				// b found the snapshot Ready; before b saves, a moves on from it and
				// collects it.
				if claimed.ID != s.ID || claimed.Status != sandbox.StatusReady {
					t.Fatalf("b's claim = %+v; want the Ready snapshot %s", claimed, s.ID)
				}
				if _, err := move(ctx, a, "a", next); err != nil {
					t.Fatal(err)
				}
				if b.has(s.ID) {
					t.Fatalf("a's apply did not collect %s, so this test does not test the race", s.ID)
				}
			}
			return bb.Store.CreateEnvironment(ctx, env("b", claimed))
		})
		if err != nil || saveErr != nil {
			t.Fatalf("Use: %v, save: %v", err, saveErr)
		}
		if saves != 2 {
			t.Fatalf("saved %d times; want 2 (refused once as collected, then saved)", saves)
		}
		if _, err := bb.Wait(ctx, snap.ID); err != nil {
			t.Fatal(err)
		}
		got, err := bb.Store.GetEnvironment(ctx, "b")
		if err != nil {
			t.Fatal(err)
		}
		if got.SnapshotID != s.ID || !b.has(s.ID) || b.builds(s.ID) != 2 {
			t.Fatalf("b is on %s (backend has it: %t, built %d times); want %s, rebuilt once", got.SnapshotID, b.has(s.ID), b.builds(s.ID), s.ID)
		}
	})
}

// A claim that finds the snapshot Collecting waits until its collector removed it, then
// builds it anew.
func TestEnsureWaitsForACollectionInProgress(t *testing.T) {
	planes(t, func(t *testing.T, open func() *store.Store) {
		ctx := context.Background()
		b := newFakeBuilder()
		a, bb := setup(t, open(), b), setup(t, open(), b)
		sp := spec("echo collected")
		// a's collection has marked the snapshot and is removing its files.
		s := collecting(t, ctx, a, sp)
		if ok, _ := bb.Store.MarkSnapshotCollecting(ctx, s.ID); ok {
			t.Fatal("a snapshot was marked for collection twice")
		}
		if err := bb.Store.CreateEnvironment(ctx, env("b", s)); !errors.Is(err, store.ErrSnapshotCollected) {
			t.Fatalf("saving an environment on a Collecting snapshot: %v; want ErrSnapshotCollected", err)
		}
		done := make(chan error, 1)
		var got store.Snapshot
		go func() {
			var err error
			got, err = bb.Ensure(ctx, sandbox.BuildRequest{Spec: sp})
			done <- err
		}()
		select {
		case err := <-done:
			t.Fatalf("Ensure returned (%v) while the collection was in progress", err)
		case <-time.After(100 * time.Millisecond):
		}
		if err := b.DeleteSnapshot(ctx, s.ID); err != nil {
			t.Fatal(err)
		}
		if err := a.Store.DeleteCollectedSnapshot(ctx, s.ID); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("Ensure did not return after the collection finished")
		}
		if got.Status != sandbox.StatusBuilding || !b.has(s.ID) || b.builds(s.ID) != 2 {
			t.Fatalf("after the collection Ensure returned %+v (backend has it: %t, builds %d); want a new build", got, b.has(s.ID), b.builds(s.ID))
		}
	})
}

// A collection that never finished (its apply died between marking and removing) is
// taken over after startGrace: the snapshot is rebuilt.
func TestEnsureTakesOverAStaleCollection(t *testing.T) {
	planes(t, func(t *testing.T, open func() *store.Store) {
		ctx := context.Background()
		b := newFakeBuilder()
		c := setup(t, open(), b)
		sp := spec("echo abandoned")
		s := collecting(t, ctx, c, sp)
		stale := time.Now().Add(-startGrace - time.Second).UnixMilli()
		if _, err := c.Store.Exec(ctx, `UPDATE snapshots SET updated_at = ? WHERE id = ?`, stale, s.ID); err != nil {
			t.Fatal(err)
		}
		got, err := c.Ensure(ctx, sandbox.BuildRequest{Spec: sp})
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != sandbox.StatusBuilding || b.builds(s.ID) != 2 {
			t.Fatalf("Ensure on a stale collection returned %+v after %d builds; want a new build", got, b.builds(s.ID))
		}
	})
}

// collectRaceRounds is how many times TestConcurrentUseAndCollect lets the two applies
// race.
const collectRaceRounds = 100

// Two applies at once, many times: a's environment moves to new inputs each round and
// collects the ones it left, while b's moves to exactly those. Neither fails, and after
// every round both environments are on snapshots whose rows are Ready and whose files
// the backend has.
func TestConcurrentUseAndCollect(t *testing.T) {
	planes(t, func(t *testing.T, open func() *store.Store) {
		ctx := context.Background()
		b := newFakeBuilder()
		a, bb := setup(t, open(), b), setup(t, open(), b)
		if _, err := create(ctx, a, "a", spec("lead 0")); err != nil {
			t.Fatal(err)
		}
		if _, err := create(ctx, bb, "b", spec("lead -1")); err != nil {
			t.Fatal(err)
		}
		rebuilt := 0
		for r := 1; r <= collectRaceRounds; r++ {
			var wg sync.WaitGroup
			var errA, errB error
			wg.Add(2)
			go func() { defer wg.Done(); _, errA = move(ctx, a, "a", spec(fmt.Sprint("lead ", r))) }()
			go func() { defer wg.Done(); _, errB = move(ctx, bb, "b", spec(fmt.Sprint("lead ", r-1))) }()
			wg.Wait()
			if errA != nil || errB != nil {
				t.Fatalf("round %d: a: %v; b: %v", r, errA, errB)
			}
			for _, name := range []string{"a", "b"} {
				e, err := a.Store.GetEnvironment(ctx, name)
				if err != nil {
					t.Fatal(err)
				}
				s, err := a.Store.GetSnapshot(ctx, e.SnapshotID)
				if err != nil || s.Status != sandbox.StatusReady || !b.has(s.ID) {
					t.Fatalf("round %d: environment %s is on snapshot %s (%+v, %v; backend has it: %t); want Ready and present",
						r, name, e.SnapshotID, s, err, b.has(e.SnapshotID))
				}
			}
			if id := sandbox.SnapshotID(spec(fmt.Sprint("lead ", r-1)).BuildHash()); b.builds(id) > 1 {
				rebuilt++
			}
		}
		t.Logf("%d rounds: b's inputs were collected by a and built again in %d", collectRaceRounds, rebuilt)
	})
}
