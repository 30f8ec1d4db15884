package controlplane

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/trueforge/terraform-provider-trueforge/internal/pgtest"
	"github.com/trueforge/terraform-provider-trueforge/internal/secretbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
	"github.com/trueforge/terraform-provider-trueforge/internal/store/storetest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// plane is the plane of the database at url as a machine whose environment is env.
func plane(t *testing.T, url string, env map[string]string) *Plane {
	p := New(storetest.Open(t, url))
	p.Getenv = func(k string) string { return env[k] }
	return p
}

func key(b byte) string { return base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{b}, 32)) }

// On SQLite the key file is created on first use and its check value stored; a swapped
// key file, or a variable with another key, is refused by name before anything is
// sealed.
func TestSQLiteKeyFileIsCheckedAgainstThePlane(t *testing.T) {
	ctx := context.Background()
	db := filepath.Join(t.TempDir(), "cp.db")
	first := plane(t, db, nil)
	sealed, err := first.Seal(ctx, []byte("v"), SecretLabel("py/T"))
	if err != nil {
		t.Fatal(err)
	}
	settings, _ := first.Store.Settings(ctx)
	if settings[settingKeyCheck] == "" {
		t.Fatalf("no check value stored on first use: %v", settings)
	}
	// The same key file opens it from another process.
	if v, err := plane(t, db, nil).Open(ctx, sealed, SecretLabel("py/T"), "secret py/T"); err != nil || string(v) != "v" {
		t.Fatalf("reopening: %q, %v", v, err)
	}

	// Someone swaps the key file.
	kf := first.KeyFile()
	if err := os.WriteFile(kf, []byte(key(9)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = plane(t, db, nil).Seal(ctx, []byte("w"), SecretLabel("py/U"))
	if !errors.Is(err, ErrWrongKey) || !strings.Contains(err.Error(), "the key file "+kf) || !strings.Contains(err.Error(), secretbox.KeyEnv) {
		t.Fatalf("sealing with a swapped key file: %v; want ErrWrongKey naming %s", err, kf)
	}
	// Another key in the variable.
	_, err = plane(t, db, map[string]string{secretbox.KeyEnv: key(8)}).SecretBox(ctx)
	if !errors.Is(err, ErrWrongKey) || !strings.HasPrefix(err.Error(), secretbox.KeyEnv+" is not this control plane's secret key") {
		t.Fatalf("another key in %s: %v", secretbox.KeyEnv, err)
	}
	if got, _ := first.Store.Settings(ctx); got[settingKeyCheck] != settings[settingKeyCheck] {
		t.Fatalf("a wrong key changed the stored check value: %v", got)
	}
}

// A database whose values were sealed before check values existed takes the key it is
// first opened with: its check value is stored then, and values sealed before open.
func TestSQLiteDatabaseWithoutCheckValueTakesItsKey(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db := filepath.Join(dir, "cp.db")
	st := storetest.Open(t, db)
	box, err := secretbox.Load("", filepath.Join(dir, KeyFileName)) // as a release before the check did
	if err != nil {
		t.Fatal(err)
	}
	sealed, _ := box.Seal([]byte("old"), SecretLabel("py/T"))
	p := New(st)
	p.Getenv = func(string) string { return "" }
	if v, err := p.Open(ctx, sealed, SecretLabel("py/T"), "secret py/T"); err != nil || string(v) != "old" {
		t.Fatalf("opening a value sealed before the check: %q, %v", v, err)
	}
	if got, _ := st.Settings(ctx); got[settingKeyCheck] != box.CheckValue() {
		t.Fatalf("check value stored = %q; want the key file's %q", got[settingKeyCheck], box.CheckValue())
	}
}

// On PostgreSQL the key must come from the variable: without it nothing is sealed and
// no key file is created in the data directory; a machine with another key is refused
// before it writes anything; machines with the same key (any role) agree.
func TestSharedPlaneNeedsTheSameKeyEverywhere(t *testing.T) {
	ctx := context.Background()
	c := pgtest.Get(t)
	url := c.Database(t)
	dataDir := t.TempDir()
	noKey := plane(t, url, map[string]string{store.DataDirEnv: dataDir})
	_, err := noKey.Seal(ctx, []byte("v"), SecretLabel("py/T"))
	if !errors.Is(err, ErrKeyRequired) || !strings.Contains(err.Error(), secretbox.KeyEnv+" is not set") || !strings.Contains(err.Error(), "head -c32 /dev/urandom | base64") {
		t.Fatalf("no key on PostgreSQL: %v", err)
	}
	if entries, _ := os.ReadDir(dataDir); len(entries) != 0 {
		t.Fatalf("files created in the data directory without a key: %v", entries)
	}
	if got, _ := noKey.Store.Settings(ctx); len(got) != 0 {
		t.Fatalf("settings written without a key: %v", got)
	}

	a := plane(t, url, map[string]string{secretbox.KeyEnv: key(1)})
	sealed, err := a.Seal(ctx, []byte("v"), SecretLabel("py/T"))
	if err != nil {
		t.Fatal(err)
	}
	wrong := plane(t, url, map[string]string{secretbox.KeyEnv: key(2)})
	_, err = wrong.Seal(ctx, []byte("w"), SecretLabel("py/U"))
	if !errors.Is(err, ErrWrongKey) || !strings.HasPrefix(err.Error(), secretbox.KeyEnv+" is not this control plane's secret key") || strings.Contains(err.Error(), "key file") {
		t.Fatalf("another key on PostgreSQL: %v", err)
	}
	if _, err := wrong.Open(ctx, sealed, SecretLabel("py/T"), "secret py/T"); !errors.Is(err, ErrWrongKey) {
		t.Fatalf("opening with another key: %v", err)
	}
	b := plane(t, url, map[string]string{secretbox.KeyEnv: hex.EncodeToString(bytes.Repeat([]byte{1}, 32))}) // the same key, hex
	if v, err := b.Open(ctx, sealed, SecretLabel("py/T"), "secret py/T"); err != nil || string(v) != "v" {
		t.Fatalf("the same key on another machine: %q, %v", v, err)
	}
}

// A plane's id: on SQLite the hash of its path (as before, so remote labels do not
// change); on PostgreSQL a random id stored once, the same for every process and role,
// different for another database.
func TestPlaneID(t *testing.T) {
	ctx := context.Background()
	db := filepath.Join(t.TempDir(), "cp.db")
	sum := sha256.Sum256([]byte(db))
	if id, err := plane(t, db, nil).ID(ctx); err != nil || id != hex.EncodeToString(sum[:])[:16] {
		t.Fatalf("SQLite id = %q, %v", id, err)
	}

	c := pgtest.Get(t)
	url := c.Database(t)
	id1, err := plane(t, url, nil).ID(ctx)
	if err != nil || len(id1) != 16 {
		t.Fatalf("PostgreSQL id = %q, %v", id1, err)
	}
	role := c.Role(t, "team")
	owner := storetest.Open(t, url)
	if err := owner.ApplyRoles(ctx, store.TeamRole, role); err != nil {
		t.Fatal(err)
	}
	if id2, err := plane(t, c.URL(pgtest.Name(url), role), nil).ID(ctx); err != nil || id2 != id1 {
		t.Fatalf("another process and role: %q, %v; want %q", id2, err, id1)
	}
	if other, err := plane(t, c.Database(t), nil).ID(ctx); err != nil || other == id1 {
		t.Fatalf("another database: %q, %v", other, err)
	}
}
