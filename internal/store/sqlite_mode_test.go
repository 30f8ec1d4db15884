package store_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// An SQLite control plane at an explicit path is owner-only, with its -wal and -shm
// files, as seen from the host; an existing database open to others is tightened.
func TestSQLiteFilesAreOwnerOnly(t *testing.T) {
	ctx := context.Background()
	check := func(what, path string) {
		t.Helper()
		for _, p := range []string{path, path + "-wal", path + "-shm"} {
			fi, err := os.Stat(p)
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			if perm := fi.Mode().Perm(); perm != 0o600 {
				t.Errorf("%s: %s has mode %04o; want 0600", what, filepath.Base(p), perm)
			}
		}
	}
	open := func(path string, write bool) *store.Store {
		t.Helper()
		st, err := store.Open(ctx, path)
		if err != nil {
			t.Fatal(err)
		}
		// A write, so the WAL is there.
		if err := st.CreateSandboxProvider(ctx, store.SandboxProvider{Name: "local", Type: "local", Status: "Ready", Owner: "me"}); write && err != nil {
			t.Fatal(err)
		}
		return st
	}

	fresh := filepath.Join(t.TempDir(), "sub", "control.db")
	st := open(fresh, true)
	check("a new database", fresh)
	st.Close()

	// One made 0644 (by an earlier release), with its -wal and -shm left open too.
	old := filepath.Join(t.TempDir(), "old.db")
	st = open(old, true)
	for _, p := range []string{old, old + "-wal", old + "-shm"} {
		if err := os.Chmod(p, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	st.Close()
	for _, p := range []string{old + "-wal", old + "-shm"} {
		if _, err := os.Stat(p); os.IsNotExist(err) {
			if err := os.WriteFile(p, nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	st = open(old, false)
	defer st.Close()
	check("an existing database open to others", old)
}
