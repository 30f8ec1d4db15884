package store

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// A volume or registry that an environment names cannot be deleted: the refusal names
// the environment, and once the environment stops naming it the delete goes through.
func TestVolumeAndRegistryInUseCannotBeDeleted(t *testing.T) {
	eachDB(t, func(t *testing.T, st *Store) {
		ctx := context.Background()
		seed(t, st)
		must(t, st.CreateVolume(ctx, Volume{Name: "cache", Provider: "local", Owner: "alice", RemoteID: "cache"}))
		must(t, st.CreateRegistry(ctx, Registry{Name: "ghcr", Provider: "local", Owner: "alice", URL: "ghcr.io", Username: "bot", PasswordEnc: []byte("sealed")}))
		if err := st.CreateVolume(ctx, Volume{Name: "cache", Provider: "local", Owner: "alice"}); !errors.Is(err, ErrAlreadyExists) {
			t.Fatalf("second volume cache: %v", err)
		}
		if err := st.CreateVolume(ctx, Volume{Name: "other", Provider: "nope", Owner: "alice"}); !errors.Is(err, ErrNotFound) {
			t.Fatalf("volume of a missing provider: %v", err)
		}

		env, err := st.GetEnvironment(ctx, "py")
		must(t, err)
		env.Settings.Volumes = []EnvironmentVolume{{Volume: "cache", MountPath: "/data"}}
		env.Settings.Registry = "ghcr"
		must(t, st.UpdateEnvironment(ctx, env))

		if got, err := st.EnvironmentsUsingVolume(ctx, "cache"); err != nil || strings.Join(got, ",") != "py" {
			t.Fatalf("EnvironmentsUsingVolume = %v, %v", got, err)
		}
		err = st.DeleteVolume(ctx, "cache")
		if !errors.Is(err, ErrInUse) || !strings.Contains(err.Error(), "py") {
			t.Fatalf("deleting a mounted volume: %v (want ErrInUse naming py)", err)
		}
		err = st.DeleteRegistry(ctx, "ghcr")
		if !errors.Is(err, ErrInUse) || !strings.Contains(err.Error(), "py") {
			t.Fatalf("deleting a registry in use: %v (want ErrInUse naming py)", err)
		}

		// The provider keeps them: it cannot be deleted from under them.
		if err := st.DeleteSandboxProvider(ctx, "local"); !errors.Is(err, ErrInUse) || !strings.Contains(err.Error(), "volume cache") || !strings.Contains(err.Error(), "registry ghcr") {
			t.Fatalf("deleting the provider of a volume and a registry: %v (want ErrInUse naming both)", err)
		}

		env.Settings.Volumes, env.Settings.Registry = nil, ""
		must(t, st.UpdateEnvironment(ctx, env))
		must(t, st.DeleteVolume(ctx, "cache"))
		must(t, st.DeleteRegistry(ctx, "ghcr"))
		if _, err := st.GetVolume(ctx, "cache"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("volume after delete: %v", err)
		}
		if err := st.DeleteVolume(ctx, "cache"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("deleting a missing volume: %v", err)
		}
	})
}

// A registry's password is rotated only when a new sealed value is given, and each
// rotation bumps its version; the backend id changes with it.
func TestRegistryUpdateRotatesOnlyWithNewPassword(t *testing.T) {
	eachDB(t, func(t *testing.T, st *Store) {
		ctx := context.Background()
		seed(t, st)
		must(t, st.CreateRegistry(ctx, Registry{Name: "ghcr", Provider: "local", Owner: "alice", URL: "ghcr.io", Username: "bot", PasswordEnc: []byte("one"), RemoteID: "r1"}))
		r, err := st.GetRegistry(ctx, "ghcr")
		must(t, err)
		r.Username, r.RemoteID = "bot2", "r2"
		must(t, st.UpdateRegistry(ctx, r, nil))
		got, err := st.GetRegistry(ctx, "ghcr")
		must(t, err)
		if got.Username != "bot2" || got.RemoteID != "r2" || string(got.PasswordEnc) != "one" || got.Version != 1 {
			t.Fatalf("after an update without a password: %+v", got)
		}
		must(t, st.UpdateRegistry(ctx, got, []byte("two")))
		got, err = st.GetRegistry(ctx, "ghcr")
		must(t, err)
		if string(got.PasswordEnc) != "two" || got.Version != 2 {
			t.Fatalf("after a rotation: %+v", got)
		}
		if err := st.SetVolumeRemoteID(ctx, "missing", "x"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("SetVolumeRemoteID of a missing volume: %v", err)
		}
	})
}

// On PostgreSQL another team reads a volume (its environments may mount it) but cannot
// delete or change it, nor a registry; and alice cannot delete her volume while bob's
// environment mounts it.
func TestRLSVolumesAndRegistries(t *testing.T) {
	p := newRLSPlane(t)
	ctx := context.Background()
	a, b := p.asAlice, p.asBob
	must(t, a.CreateVolume(ctx, Volume{Name: "cache", Provider: "local", Owner: p.alice, RemoteID: "cache"}))
	must(t, a.CreateRegistry(ctx, Registry{Name: "ghcr", Provider: "local", Owner: p.alice, URL: "ghcr.io", Username: "bot", PasswordEnc: []byte("sealed")}))

	if v, err := b.GetVolume(ctx, "cache"); err != nil || v.Owner != p.alice {
		t.Fatalf("bob reading alice's volume: %+v, %v", v, err)
	}
	if err := b.DeleteVolume(ctx, "cache"); err == nil {
		t.Error("bob deleted alice's volume through the store")
	}
	if err := b.DeleteRegistry(ctx, "ghcr"); err == nil {
		t.Error("bob deleted alice's registry through the store")
	}
	if err := b.SetVolumeRemoteID(ctx, "cache", "evil"); err == nil {
		t.Error("bob changed alice's volume through the store")
	}
	if err := b.CreateVolume(ctx, Volume{Name: "forged", Provider: "local", Owner: p.alice}); err == nil {
		t.Error("bob created a volume in alice's name")
	}
	changeNone(t, b.DB(), "bob's", "alice's",
		`DELETE FROM volumes`,
		`UPDATE volumes SET remote_id = 'evil'`,
		`DELETE FROM registries`,
		`UPDATE registries SET url = 'evil.example'`,
	)
	if v, err := a.GetVolume(ctx, "cache"); err != nil || v.RemoteID != "cache" {
		t.Errorf("alice's volume after bob's attempts: %+v, %v", v, err)
	}
	if r, err := a.GetRegistry(ctx, "ghcr"); err != nil || r.URL != "ghcr.io" {
		t.Errorf("alice's registry after bob's attempts: %+v, %v", r, err)
	}

	// Issue 23: bob's environment may not mount alice's volume until she shares it; the
	// database refuses the row, however it is written.
	if _, _, err := b.ClaimSnapshot(ctx, Snapshot{ID: "snap-b", Provider: "local", BuildHash: "hb", Spec: "{}"}, "Building", "Failed"); err != nil {
		t.Fatal(err)
	}
	bobs := Environment{ID: "e2", Name: "bobs", Provider: "local", Owner: p.bob, Image: "platform", CPU: 1, MemoryGB: 1, DiskGB: 3,
		BuildHash: "hb", SnapshotID: "snap-b", Settings: EnvironmentSettings{Volumes: []EnvironmentVolume{{Volume: "cache", MountPath: "/data"}}}}
	if err := b.CreateEnvironment(ctx, bobs); !errors.Is(err, ErrForbidden) {
		t.Fatalf("bob's environment mounting alice's unshared volume: %v, want the database's refusal (ErrForbidden)", err)
	}
	if res, err := b.DB().Exec(`UPDATE volumes SET shared_with = '["*"]'`); err == nil {
		if n, _ := res.RowsAffected(); n != 0 {
			t.Fatalf("bob shared alice's volume himself (%d rows)", n)
		}
	}
	plain := bobs
	plain.Settings = EnvironmentSettings{}
	must(t, b.CreateEnvironment(ctx, plain))
	for _, q := range []string{
		`UPDATE environments SET settings = '{"volumes":[{"volume":"cache","mount_path":"/data"}]}' WHERE name = 'bobs'`,
		`UPDATE environments SET settings = '{"volumes":[{"volume":"ghost","mount_path":"/data"}]}' WHERE name = 'bobs'`,
	} {
		if _, err := b.DB().Exec(q); err == nil || sqlState(err) != "42501" {
			t.Errorf("bob's %q: %v, want the database's refusal (42501)", q, err)
		}
	}
	must(t, a.UpdateVolume(ctx, "cache", 10, []string{p.bob}))
	if _, err := b.DB().Exec(`UPDATE environments SET settings = '{"volumes":[{"volume":"cache","mount_path":"/data"}]}' WHERE name = 'bobs'`); err != nil {
		t.Fatalf("bob mounting alice's volume once shared with him: %v", err)
	}
	if v, err := b.GetVolume(ctx, "cache"); err != nil || !v.UsableBy(p.bob) || v.UsableBy("carol") {
		t.Fatalf("alice's volume shared with bob: %+v, %v", v, err)
	}
	// Bob's environment mounting alice's volume keeps her from deleting it.
	if err := a.DeleteVolume(ctx, "cache"); !errors.Is(err, ErrInUse) || !strings.Contains(err.Error(), "bobs") {
		t.Errorf("alice deleting her volume that bob's environment mounts: %v (want ErrInUse naming bobs)", err)
	}
	// The harness reads volumes (to mount them).
	if v, err := p.asHarness.GetVolume(ctx, "cache"); err != nil || v.RemoteID != "cache" {
		t.Errorf("the harness reading a volume: %+v, %v", v, err)
	}
}
