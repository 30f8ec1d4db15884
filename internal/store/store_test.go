package store

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/trueforge/terraform-provider-trueforge/internal/pgtest"
)

// The store's tests are one suite: each runs against SQLite and against PostgreSQL (a
// fresh database of pgtest's throwaway cluster), as subtests named for the database.

func TestMain(m *testing.M) { pgtest.Main(m) }

// eachDB runs test against a fresh store on each database.
func eachDB(t *testing.T, test func(t *testing.T, st *Store)) {
	t.Helper()
	eachDialect(t, func(t *testing.T, d dialect) { test(t, openAt(t, freshURL(t, d))) })
}

// eachDialect runs test once per database, for tests that open stores themselves.
func eachDialect(t *testing.T, test func(t *testing.T, d dialect)) {
	t.Helper()
	for _, d := range []dialect{sqlite, postgres} {
		t.Run(d.String(), func(t *testing.T) { test(t, d) })
	}
}

// freshURL names a new, empty database of dialect d.
func freshURL(t *testing.T, d dialect) string {
	t.Helper()
	if d == postgres {
		return pgtest.Get(t).Database(t)
	}
	return filepath.Join(t.TempDir(), "cp.db")
}

// reopen opens st's database again, as another process would.
func reopen(t *testing.T, st *Store) *Store {
	t.Helper()
	return openAt(t, st.source)
}

func seed(t *testing.T, st *Store) {
	t.Helper()
	ctx := context.Background()
	must(t, st.CreateSandboxProvider(ctx, SandboxProvider{Name: "local", Type: "local", Status: "Ready", Owner: "alice"}))
	if _, _, err := st.ClaimSnapshot(ctx, Snapshot{ID: "snap-1", Provider: "local", BuildHash: "h1", Spec: "{}"}, "Building", "Failed"); err != nil {
		t.Fatal(err)
	}
	must(t, st.CreateEnvironment(ctx, Environment{ID: "e1", Name: "py", Provider: "local", Owner: "alice", Image: "platform", CPU: 1, MemoryGB: 1, DiskGB: 3, BuildHash: "h1", SnapshotID: "snap-1"}))
}

func TestMigrationsAreIdempotent(t *testing.T) {
	eachDialect(t, func(t *testing.T, d dialect) {
		url := freshURL(t, d)
		for i := 0; i < 2; i++ {
			st, err := Open(context.Background(), url)
			if err != nil {
				t.Fatal(err)
			}
			v, err := st.SchemaVersion(context.Background())
			if err != nil || v != len(migrations) {
				t.Fatalf("schema version = %d, %v; want %d", v, err, len(migrations))
			}
			st.Close()
		}
	})
}

func TestEnvironmentReferencedByAgentCannotBeDeleted(t *testing.T) {
	eachDB(t, func(t *testing.T, st *Store) {
		seed(t, st)
		ctx := context.Background()
		must(t, st.CreateAgent(ctx, Agent{ID: "a1", Name: "helper", Owner: "alice", Environment: "py", Spec: []byte("{}")}))
		err := st.DeleteEnvironment(ctx, "py")
		if !errors.Is(err, ErrInUse) {
			t.Fatalf("DeleteEnvironment = %v, want ErrInUse", err)
		}
		// The rule lives in the database too: a raw DELETE by another writer is refused.
		if _, err := st.DB().Exec(`DELETE FROM environments WHERE name = 'py'`); err == nil {
			t.Fatal("the foreign key did not stop deleting a referenced environment")
		}
		if err := st.CreateAgent(ctx, Agent{ID: "a2", Name: "ghost", Owner: "alice", Environment: "missing", Spec: []byte("{}")}); !errors.Is(err, ErrNotFound) {
			t.Fatalf("agent on a missing environment: %v, want ErrNotFound", err)
		}
	})
}

func TestClaimSnapshotBuildsOnceUnderConcurrency(t *testing.T) {
	eachDB(t, func(t *testing.T, st *Store) {
		seed(t, st)
		ctx := context.Background()
		var wg sync.WaitGroup
		var mu sync.Mutex
		claims := 0
		for i := 0; i < 16; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				claimed, _, err := st.ClaimSnapshot(ctx, Snapshot{ID: "snap-2", Provider: "local", BuildHash: "h2", Spec: "{}"}, "Building", "Failed")
				if err != nil {
					t.Error(err)
				}
				if claimed {
					mu.Lock()
					claims++
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		if claims != 1 {
			t.Fatalf("%d claimers would build the same snapshot, want 1", claims)
		}
		// A failed build is claimed again (retried), a Ready one is not.
		must(t, st.SetSnapshotState(ctx, "snap-2", "Failed", "exit 1", ""))
		if claimed, _, _ := st.ClaimSnapshot(ctx, Snapshot{ID: "snap-2", Provider: "local"}, "Building", "Failed"); !claimed {
			t.Fatal("a failed snapshot was not claimed for a retry")
		}
		must(t, st.SetSnapshotState(ctx, "snap-2", "Ready", "", ""))
		if claimed, _, _ := st.ClaimSnapshot(ctx, Snapshot{ID: "snap-2", Provider: "local"}, "Building", "Failed"); claimed {
			t.Fatal("a ready snapshot was claimed for a rebuild")
		}
		if n, _ := st.CountBuilds(ctx); n != 3 { // snap-1, snap-2, snap-2 retry
			t.Fatalf("builds started = %d, want 3", n)
		}
	})
}

func TestUnreferencedSnapshotsSkipsLiveAndBuilding(t *testing.T) {
	eachDB(t, func(t *testing.T, st *Store) {
		seed(t, st)
		ctx := context.Background()
		if _, _, err := st.ClaimSnapshot(ctx, Snapshot{ID: "snap-old", Provider: "local", Spec: "{}"}, "Building", "Failed"); err != nil {
			t.Fatal(err)
		}
		if _, _, err := st.ClaimSnapshot(ctx, Snapshot{ID: "snap-busy", Provider: "local", Spec: "{}"}, "Building", "Failed"); err != nil {
			t.Fatal(err)
		}
		must(t, st.SetSnapshotState(ctx, "snap-old", "Ready", "", ""))
		must(t, st.SetSnapshotState(ctx, "snap-1", "Ready", "", ""))
		ids, err := st.UnreferencedSnapshots(ctx, "local")
		if err != nil {
			t.Fatal(err)
		}
		if len(ids) != 1 || ids[0] != "snap-old" {
			t.Fatalf("unreferenced = %v, want [snap-old] (snap-1 is in use, snap-busy is building)", ids)
		}
	})
}

func TestOneSandboxProviderPerControlPlane(t *testing.T) {
	eachDB(t, func(t *testing.T, st *Store) {
		seed(t, st)
		err := st.CreateSandboxProvider(context.Background(), SandboxProvider{Name: "other", Type: "local", Status: "Ready", Owner: "bob"})
		if !errors.Is(err, ErrAlreadyExists) {
			t.Fatalf("second provider: %v, want ErrAlreadyExists", err)
		}
	})
}

func TestDatabaseURLs(t *testing.T) {
	for in, want := range map[string]string{"sqlite:///tmp/x.db": "/tmp/x.db", "file:/tmp/y.db?mode=rwc": "/tmp/y.db", "/tmp/z.db": "/tmp/z.db"} {
		got, err := SQLitePath(in)
		if err != nil || got != want {
			t.Errorf("SQLitePath(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := SQLitePath("postgres://u:secret@db/x"); err == nil || !errors.Is(err, err) || strings.Contains(err.Error(), "secret") {
		t.Errorf("postgres URL: %v (want a clear error without the password)", err)
	}
}
