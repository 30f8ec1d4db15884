package daytona_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox/daytona"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox/daytona/daytonatest"
)

// The volume store creates a Daytona volume named trueforge-<name> and returns only once
// it is ready (it is pending_create first), adopts one an earlier attempt left, reads a
// deleted one as gone, and a sandbox created with it mounts it by id; the volume cannot
// be deleted while that sandbox exists (409), and can once it is gone.
func TestVolumeStore(t *testing.T) {
	t.Parallel()
	srv, c := setup(t)
	ctx := testCtx(t)
	vs := onEmulator(t, ctx, srv, testBackend().Volumes)
	// A size is not sent: CreateVolumeDto of v0.190 has only a name (Daytona would ignore
	// a size; the emulator refuses any other property as a lint), and the plan check says
	// it is not enforced.
	v, err := vs.Create(ctx, sandbox.VolumeSpec{Name: "cache", SizeMB: 10 << 10})
	if err != nil {
		t.Fatal(err)
	}
	if p := testBackend().CheckVolume(ctx, sandbox.ProviderConfig{Name: "d"}, "cache", 10); len(p) != 1 || !p[0].Warning || p[0].Attribute != "size" {
		t.Fatalf("CheckVolume of a sized Daytona volume: %+v; want one warning on size", p)
	}
	if v.Name != "trueforge-cache" || v.State != daytona.VolumeReady || srv.VolumeState(v.ID) != "ready" {
		t.Fatalf("created volume %+v (emulator: %s); want trueforge-cache, ready", v, srv.VolumeState(v.ID))
	}
	if srv.Count("GET /volumes/{id}") < 1 {
		t.Error("Create did not wait for the volume to be ready")
	}
	again, err := vs.Create(ctx, sandbox.VolumeSpec{Name: "cache"})
	if err != nil || again.ID != v.ID {
		t.Fatalf("second Create: %+v, %v; want the same volume adopted", again, err)
	}

	snap := readySnapshot(t, ctx, c, "true")
	b := testBackend()
	rt := onEmulator(t, ctx, srv, b.Runtime)
	if err := rt.Create(ctx, sandbox.CreateRequest{ID: "s1", SnapshotID: snap, Volumes: []sandbox.VolumeMount{{Volume: v.ID, MountPath: "/data", Subpath: "team"}}}); err != nil {
		t.Fatal(err)
	}
	if got := srv.SandboxVolumes("s1"); len(got) != 1 || got[0]["volumeId"] != v.ID || got[0]["mountPath"] != "/data" || got[0]["subpath"] != "team" {
		t.Fatalf("sandbox's volumes: %v", got)
	}
	// On the emulator's local sandboxes a volume is really shared: what one sandbox
	// writes in it another reads.
	if err := rt.Create(ctx, sandbox.CreateRequest{ID: "s2", SnapshotID: snap, Volumes: []sandbox.VolumeMount{{Volume: v.ID, MountPath: "/mnt/all"}}}); err != nil {
		t.Fatal(err)
	}
	if !srv.LocalSandboxes() {
		t.Log("the emulator's sandboxes are host processes here (no bubblewrap): volumes are recorded, not mounted")
	} else {
		if res, err := rt.Exec(ctx, "s1", sandbox.ExecRequest{Shell: "echo shared > /data/note"}); err != nil || res.ExitCode != 0 {
			t.Fatalf("writing in s1's volume: %+v, %v", res, err)
		}
		res, err := rt.Exec(ctx, "s2", sandbox.ExecRequest{Shell: "cat /mnt/all/team/note"})
		if err != nil || res.ExitCode != 0 || strings.TrimSpace(string(res.Stdout)) != "shared" {
			t.Fatalf("s2 reading s1's file through the volume: %q %q, %v", res.Stdout, res.Stderr, err)
		}
	}
	if err := rt.Delete(ctx, "s2"); err != nil {
		t.Fatal(err)
	}
	err = vs.Delete(ctx, v.ID)
	if err == nil || !strings.Contains(err.Error(), "still mounted") {
		t.Fatalf("deleting a mounted volume: %v; want a refusal", err)
	}
	if err := rt.Delete(ctx, "s1"); err != nil {
		t.Fatal(err)
	}
	if err := vs.Delete(ctx, v.ID); err != nil {
		t.Fatal(err)
	}
	if got, err := vs.Get(ctx, v.ID); err != nil || got != nil {
		t.Fatalf("Get after Delete: %+v, %v; want gone", got, err)
	}
	if err := vs.Delete(ctx, "no-such-volume"); err != nil {
		t.Fatalf("deleting a missing volume: %v", err)
	}
}

// The emulator answers volume requests as the server does: a duplicate name is a 400, a
// volume is deleted only from ready, sandboxes' mount paths and subpaths are validated
// and volume names resolved, and fields the OpenAPI document lacks are refused.
func TestEmulatorVolumes(t *testing.T) {
	t.Parallel()
	srv, c := setup(t)
	ctx := testCtx(t)
	v, err := c.CreateVolume(ctx, "data")
	if err != nil || v.State != "pending_create" {
		t.Fatalf("create: %+v, %v; want pending_create", v, err)
	}
	if _, err := c.CreateVolume(ctx, "data"); !daytona.IsVolumeNameTaken(err) {
		t.Fatalf("duplicate name: %v; want 400 already exists", err)
	}
	if err := c.DeleteVolume(ctx, v.ID); err == nil || !strings.Contains(err.Error(), "'ready' or 'error'") {
		t.Fatalf("deleting a pending volume: %v; want 400", err)
	}
	if _, err := c.WaitVolume(ctx, v.ID); err != nil {
		t.Fatal(err)
	}
	if got, err := c.GetVolumeByName(ctx, "data"); err != nil || got.ID != v.ID {
		t.Fatalf("by name: %+v, %v", got, err)
	}

	snap := readySnapshot(t, ctx, c, "true")
	for _, tc := range []struct {
		vol  daytona.SandboxVolume
		want string
	}{
		{daytona.SandboxVolume{VolumeID: "nope", MountPath: "/data"}, "404 Volume 'nope' not found"},
		{daytona.SandboxVolume{VolumeID: "data", MountPath: "/etc/x"}, "cannot mount to system directory"},
		{daytona.SandboxVolume{VolumeID: "data", MountPath: "data"}, "must be absolute"},
		{daytona.SandboxVolume{VolumeID: "data", MountPath: "/data", Subpath: "../x"}, "cannot contain .."},
	} {
		_, err := c.CreateSandbox(ctx, daytona.CreateSandboxRequest{Name: "bad", Snapshot: snap, Volumes: []daytona.SandboxVolume{tc.vol}})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("volume %+v: %v; want %q", tc.vol, err, tc.want)
		}
	}
	// By name: resolved to the id, as the server stores only ids.
	if _, err := c.CreateSandbox(ctx, daytona.CreateSandboxRequest{Name: "ok", Snapshot: snap, Volumes: []daytona.SandboxVolume{{VolumeID: "data", MountPath: "/data"}}}); err != nil {
		t.Fatal(err)
	}
	if got := srv.SandboxVolumes("ok"); len(got) != 1 || got[0]["volumeId"] != v.ID {
		t.Fatalf("mounts of a sandbox created by volume name: %v", got)
	}
	if err := c.DeleteVolume(ctx, v.ID); !daytona.IsConflict(err) || !strings.Contains(err.Error(), "ok") {
		t.Fatalf("deleting a volume in use: %v; want 409 naming the sandbox", err)
	}

	if status, _ := rawJSON(t, http.MethodPost, srv.URL()+"/volumes", `{"name":"x","size":10}`); status != 400 {
		// Daytona v0.190 would ignore size (no forbidNonWhitelisted, apps/api/src/main.ts:
		// 72-76); the emulator refuses it as a lint of our client's fields.
		t.Fatalf("the emulator's lint of a field the document lacks (size): %d; want 400", status)
	}
}

// The registry store creates an organization docker registry named trueforge-<name>,
// sends the password only on create and rotation, creates it again when it was deleted
// outside trueforge, and reads it back without the password.
func TestRegistryStore(t *testing.T) {
	t.Parallel()
	srv, _ := setup(t)
	ctx := testCtx(t)
	rs := onEmulator(t, ctx, srv, testBackend().Registries)
	spec := sandbox.RegistrySpec{Name: "ghcr", URL: "ghcr.io/", Username: "bot", Password: "pw1", Project: "acme"}
	g, err := rs.Create(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	if url, user, pw, ok := srv.Registry("trueforge-ghcr"); !ok || url != "ghcr.io" || user != "bot" || pw != "pw1" {
		t.Fatalf("emulator registry: %q %q %q %v", url, user, pw, ok)
	}
	spec.Username, spec.Password = "bot2", "pw2"
	if _, err := rs.Update(ctx, g.ID, spec, false); err != nil {
		t.Fatal(err)
	}
	if _, user, pw, _ := srv.Registry("trueforge-ghcr"); user != "bot2" || pw != "pw1" {
		t.Fatalf("after an update without rotation: user %q password %q; want bot2, pw1", user, pw)
	}
	if _, err := rs.Update(ctx, g.ID, spec, true); err != nil {
		t.Fatal(err)
	}
	if _, _, pw, _ := srv.Registry("trueforge-ghcr"); pw != "pw2" {
		t.Fatalf("after a rotation: password %q; want pw2", pw)
	}
	got, err := rs.Get(ctx, g.ID)
	if err != nil || got == nil || got.Username != "bot2" || got.Project != "acme" {
		t.Fatalf("Get: %+v, %v", got, err)
	}
	srv.DeleteRegistryOutOfBand("trueforge-ghcr")
	if got, err := rs.Get(ctx, g.ID); err != nil || got != nil {
		t.Fatalf("Get after an out-of-band delete: %+v, %v; want nil", got, err)
	}
	again, err := rs.Update(ctx, g.ID, spec, false)
	if err != nil || again.ID == g.ID {
		t.Fatalf("Update of a deleted registry: %+v, %v; want it created again", again, err)
	}
	if _, _, pw, ok := srv.Registry("trueforge-ghcr"); !ok || pw != "pw2" {
		t.Fatalf("recreated registry's password %q (%v); want pw2", pw, ok)
	}
	if err := rs.Delete(ctx, again.ID); err != nil {
		t.Fatal(err)
	}
	if _, _, _, ok := srv.Registry("trueforge-ghcr"); ok {
		t.Fatal("registry still there after Delete")
	}
	if err := rs.Delete(ctx, again.ID); err != nil {
		t.Fatalf("deleting a missing registry: %v", err)
	}
}

// TestCreateWithMissingOrPendingVolume: Daytona resolves a create's volumes with
// getVolumesByIdOrName (volume.service.ts:268-275, v0.190): a volume that does not exist
// is a 404 and one not ready yet a 400. The runtime does not read that 404 as
// sandbox.ErrNotFound (the sandbox being gone, which a caller would retry as a lost
// sandbox) but as ErrVolumeNotFound naming the volume and its mount path.
func TestCreateWithMissingOrPendingVolume(t *testing.T) {
	t.Parallel()
	srv, c, rt, snap := newRuntime(t)
	ctx := testCtx(t)
	missing := "0b5e4a52-0000-4000-8000-000000000000"
	err := rt.Create(ctx, sandbox.CreateRequest{ID: "novol", SnapshotID: snap, Volumes: []sandbox.VolumeMount{{Volume: missing, MountPath: "/data"}}})
	if !errors.Is(err, daytona.ErrVolumeNotFound) || errors.Is(err, sandbox.ErrNotFound) ||
		!strings.Contains(err.Error(), missing) || !strings.Contains(err.Error(), "/data") {
		t.Fatalf("create with a missing volume: %v; want ErrVolumeNotFound naming it, not sandbox.ErrNotFound", err)
	}
	if st := srv.SandboxState("novol"); st != "" {
		t.Fatalf("a sandbox %q was left by the refused create", st)
	}
	v, err := c.CreateVolume(ctx, "young")
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.CreateSandbox(ctx, daytona.CreateSandboxRequest{Name: "early", Snapshot: snap, Volumes: []daytona.SandboxVolume{{VolumeID: v.ID, MountPath: "/data"}}})
	var e *daytona.APIError
	if !errors.As(err, &e) || e.Status != 400 || !strings.Contains(e.Message, "Volume 'young' is not in a ready state. Current state: pending_create") {
		t.Fatalf("create with a pending_create volume: %v; want 400 not in a ready state", err)
	}
}

// TestVolumeRecreatedWhileDeleting: a volume name stays taken while Daytona deletes the
// volume (pending_delete still counts, volume.service.ts:103-114, v0.190), so creating a
// volume again right after deleting one of the same name waits for the delete to finish
// and creates a new volume, rather than adopting the dying one and failing.
func TestVolumeRecreatedWhileDeleting(t *testing.T) {
	t.Parallel()
	srv, _ := setup(t, daytonatest.WithVolumeDeleteDelay(300*time.Millisecond))
	ctx := testCtx(t)
	vs := onEmulator(t, ctx, srv, testBackend().Volumes)
	old, err := vs.Create(ctx, sandbox.VolumeSpec{Name: "cache"})
	if err != nil {
		t.Fatal(err)
	}
	if err := vs.Delete(ctx, old.ID); err != nil {
		t.Fatal(err)
	}
	if st := srv.VolumeState(old.ID); st != "pending_delete" {
		t.Fatalf("after delete: %q; want pending_delete", st)
	}
	began := time.Now()
	v, err := vs.Create(ctx, sandbox.VolumeSpec{Name: "cache"})
	if err != nil {
		t.Fatalf("create while the old volume is pending_delete: %v", err)
	}
	if v.ID == old.ID || v.State != daytona.VolumeReady || srv.VolumeState(old.ID) != "deleted" {
		t.Fatalf("created %+v (old %s is %s); want a new ready volume, the old one deleted", v, old.ID, srv.VolumeState(old.ID))
	}
	if waited := time.Since(began); waited < 200*time.Millisecond {
		t.Fatalf("created after %s; want it to wait for the delete", waited)
	}
	if n := srv.Count("POST /volumes"); n != 3 {
		t.Fatalf("%d volume creates; want 3 (the first, the refused one, the new one)", n)
	}
}

// TestEmulatorRegistryPatchProject: as Daytona's update() (docker-registry.service.ts:
// 151-159, v0.190), a PATCH that omits project keeps the stored one and project ""
// clears it; the client always sends project, so removing it reaches Daytona.
func TestEmulatorRegistryPatchProject(t *testing.T) {
	t.Parallel()
	srv, c := setup(t)
	ctx := testCtx(t)
	g, err := c.CreateDockerRegistry(ctx, daytona.CreateDockerRegistryRequest{Name: "r", URL: "ghcr.io", Username: "bot", Password: "pw", Project: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	status, _ := rawJSON(t, http.MethodPatch, srv.URL()+"/docker-registry/"+g.ID, `{"name":"r","url":"ghcr.io","username":"bot"}`)
	if p, _ := srv.RegistryProject("r"); status != 200 || p != "acme" {
		t.Fatalf("PATCH without project: %d, project %q; want 200 and acme kept", status, p)
	}
	if _, err := c.UpdateDockerRegistry(ctx, g.ID, daytona.UpdateDockerRegistryRequest{Name: "r", URL: "ghcr.io", Username: "bot"}); err != nil {
		t.Fatal(err)
	}
	if p, _ := srv.RegistryProject("r"); p != "" {
		t.Fatalf("update with an empty project: project %q; want it cleared", p)
	}
}

// TestEmulatorRegistryURL: as Daytona's @IsUrl() on url (create-docker-registry.dto.ts:
// 17-19, update-docker-registry.dto.ts:17-19, v0.190), a url without a top-level domain
// is a 400 "url must be a URL address", on create and on update; a host with a TLD and a
// port is fine.
func TestEmulatorRegistryURL(t *testing.T) {
	t.Parallel()
	_, c := setup(t)
	ctx := testCtx(t)
	for _, u := range []string{"registry:5000", "localhost:5000"} {
		_, err := c.CreateDockerRegistry(ctx, daytona.CreateDockerRegistryRequest{Name: "r", URL: u, Username: "bot", Password: "pw"})
		var e *daytona.APIError
		if !errors.As(err, &e) || e.Status != 400 || !strings.Contains(e.Message, "url must be a URL address") {
			t.Fatalf("create with url %q: %v; want 400 url must be a URL address", u, err)
		}
	}
	g, err := c.CreateDockerRegistry(ctx, daytona.CreateDockerRegistryRequest{Name: "r", URL: "registry.example.com:5000", Username: "bot", Password: "pw"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.UpdateDockerRegistry(ctx, g.ID, daytona.UpdateDockerRegistryRequest{Name: "r", URL: "registry:5000", Username: "bot"})
	var e *daytona.APIError
	if !errors.As(err, &e) || e.Status != 400 || !strings.Contains(e.Message, "url must be a URL address") {
		t.Fatalf("update with url registry:5000: %v; want 400 url must be a URL address", err)
	}
}

// H1: Daytona mounts a volume at the literal mountPath (sandbox.service.ts:3334-3366,
// v0.190), so a volume the HCL puts at /workspace/data must be mounted where the file tools
// and the relative paths of exec write: in the work directory, /workspace on Daytona as on
// the local backend. What one session's sandbox writes there, through WriteFile and through
// a command with a relative path, a second session's sandbox reads back; a mount outside
// the workspace is sent as written.
func TestVolumeInTheWorkspaceHoldsWhatTheAgentWrites(t *testing.T) {
	t.Parallel()
	srv, c := setup(t)
	ctx := testCtx(t)
	v := readyVolume(t, ctx, c, "h1")
	snap := readySnapshot(t, ctx, c, "true")
	rt := onEmulator(t, ctx, srv, testBackend().Runtime)
	mounts := []sandbox.VolumeMount{{Volume: v.ID, MountPath: "/workspace/data"}, {Volume: v.ID, MountPath: "/data", Subpath: "team"}}
	for _, id := range []string{"session-1", "session-2"} {
		if err := rt.Create(ctx, sandbox.CreateRequest{ID: id, SnapshotID: snap, Volumes: mounts}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = rt.Delete(context.Background(), id) })
	}
	got := srv.SandboxVolumes("session-1")
	if len(got) != 2 || got[0]["mountPath"] != daytona.DefaultWorkDir+"/data" || got[1]["mountPath"] != "/data" || got[1]["subpath"] != "team" {
		t.Fatalf("sandbox's volumes: %v; want %s/data and /data (subpath team)", got, daytona.DefaultWorkDir)
	}
	if !srv.LocalSandboxes() {
		t.Skip("the emulator's sandboxes are host processes here (no bubblewrap): volumes are recorded, not mounted")
	}
	if err := rt.WriteFile(ctx, "session-1", "data/x", strings.NewReader("from write_file\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if res, err := rt.Exec(ctx, "session-1", sandbox.ExecRequest{Shell: "echo from exec > data/y"}); err != nil || res.ExitCode != 0 {
		t.Fatalf("exec writing data/y: %+v, %v", res, err)
	}
	b, err := rt.ReadFile(ctx, "session-2", "data/x", 0)
	if err != nil || string(b) != "from write_file\n" {
		t.Fatalf("the second session's sandbox reading data/x: %q, %v; want what the first wrote", b, err)
	}
	res, err := rt.Exec(ctx, "session-2", sandbox.ExecRequest{Shell: "cat data/y /workspace/data/x"})
	if err != nil || string(res.Stdout) != "from exec\nfrom write_file\n" {
		t.Fatalf("the second session's sandbox reading data/y and /workspace/data/x: %q %q, %v", res.Stdout, res.Stderr, err)
	}
}

// M4: Daytona refuses (409) to delete a volume while any sandbox whose desiredState is not
// destroyed mounts it (volume.service.ts:145-164, v0.190): a stopped sandbox and an
// archived one block it as a started one does, and the refusal tells the user to delete
// the sandboxes, not to stop them.
func TestVolumeDeleteRefusedWhileStoppedOrArchivedSandboxMountsIt(t *testing.T) {
	t.Parallel()
	srv, c := setup(t)
	ctx := testCtx(t)
	vs := onEmulator(t, ctx, srv, testBackend().Volumes)
	v, err := vs.Create(ctx, sandbox.VolumeSpec{Name: "m4"})
	if err != nil {
		t.Fatal(err)
	}
	snap := readySnapshot(t, ctx, c, "true")
	b := testBackend()
	rt := onEmulator(t, ctx, srv, b.Runtime)
	for _, id := range []string{"stopped", "archived"} {
		if err := rt.Create(ctx, sandbox.CreateRequest{ID: id, SnapshotID: snap, Volumes: []sandbox.VolumeMount{{Volume: v.ID, MountPath: "/data"}}}); err != nil {
			t.Fatal(err)
		}
		if err := rt.Stop(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.ArchiveSandbox(ctx, "archived"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitSandbox(ctx, "archived", daytona.SandboxArchived); err != nil {
		t.Fatal(err)
	}
	if st := srv.SandboxState("stopped"); st != "stopped" {
		t.Fatalf("first sandbox is %s; want stopped", st)
	}
	refused := func(what string) {
		t.Helper()
		err := vs.Delete(ctx, v.ID)
		if !daytona.IsConflict(err) {
			t.Fatalf("deleting the volume %s: %v; want 409", what, err)
		}
		msg := err.Error()
		if !strings.Contains(msg, "delete the sandboxes") || strings.Contains(msg, "or stop") || !strings.Contains(msg, "archived") {
			t.Fatalf("refusal %s: %q; want it to say delete the sandboxes (stopping is not enough, archived ones count)", what, msg)
		}
	}
	refused("while a stopped and an archived sandbox mount it")
	if err := rt.Delete(ctx, "stopped"); err != nil {
		t.Fatal(err)
	}
	refused("while an archived sandbox mounts it")
	if err := rt.Delete(ctx, "archived"); err != nil {
		t.Fatal(err)
	}
	if err := vs.Delete(ctx, v.ID); err != nil {
		t.Fatalf("deleting the volume once its sandboxes are deleted: %v", err)
	}
}

// The emulator, as the server (volume.service.ts:145-164), no longer counts a sandbox whose
// desiredState is destroyed: an ephemeral one (autoDeleteInterval 0) still stopping, which
// its stop destroys, does not block the volume's delete.
func TestEmulatorVolumeDeleteIgnoresDestroyedDesiredState(t *testing.T) {
	t.Parallel()
	srv, c := setup(t, daytonatest.WithTransitionDelay("stopping", time.Hour))
	ctx := testCtx(t)
	v := readyVolume(t, ctx, c, "eph")
	snap := readySnapshot(t, ctx, c, "true")
	zero := 0
	sb, err := c.CreateSandbox(ctx, daytona.CreateSandboxRequest{Name: "eph", Snapshot: snap, AutoDeleteInterval: &zero,
		Volumes: []daytona.SandboxVolume{{VolumeID: v.ID, MountPath: "/data"}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitSandbox(ctx, sb.ID, daytona.SandboxStarted); err != nil {
		t.Fatal(err)
	}
	if _, err := c.StopSandbox(ctx, sb.ID, false); err != nil {
		t.Fatal(err)
	}
	if st := srv.SandboxState(sb.ID); st != "stopping" {
		t.Fatalf("ephemeral sandbox is %s; want stopping (held an hour)", st)
	}
	if err := c.DeleteVolume(ctx, v.ID); err != nil {
		t.Fatalf("deleting a volume mounted only by a sandbox being destroyed: %v; want accepted", err)
	}
}
