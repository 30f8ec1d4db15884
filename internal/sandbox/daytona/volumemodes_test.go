package daytona_test

import (
	"context"
	"io/fs"
	"net/http"
	"strings"
	"testing"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox/daytona"
)

// TestWriteFileIntoAVolume (L10): a Daytona volume is mount-s3, files 0666 and
// directories 0777 for good, and chmod is refused (EPERM, a 400) to a sandbox that does
// not run as root and does nothing for root. WriteFile into a volume succeeds whatever
// mode it is given, without trying to set it, and the file reads 0666; outside the
// volume the mode is set as ever. The sandbox DTO names the volumes' mount paths.
func TestWriteFileIntoAVolume(t *testing.T) {
	t.Parallel()
	srv, c := setup(t)
	ctx := testCtx(t)
	srv.ImageUser("ghcr.io/acme/rooted:1", "root")
	v := readyVolume(t, ctx, c, "l10")
	b := daytona.NewBuilder(c)
	rt := &daytona.Runtime{C: c, WorkDir: "/workspace"}
	for _, tc := range []struct {
		name string
		spec sandbox.SnapshotSpec
		root bool
	}{
		{"daytona", sandbox.SnapshotSpec{Image: sandbox.PlatformImage}, false},
		{"root", sandbox.SnapshotSpec{Image: "ghcr.io/acme/rooted:1"}, true},
	} {
		req := specReq(tc.spec, "")
		if st := build(t, ctx, b, req); st.Status != sandbox.StatusReady {
			t.Fatalf("build: %+v", st)
		}
		id := "vol-" + tc.name
		mounts := []sandbox.VolumeMount{{Volume: v.ID, MountPath: "/workspace/scratch", Subpath: tc.name}}
		if err := rt.Create(ctx, sandbox.CreateRequest{ID: id, SnapshotID: req.ID, Volumes: mounts}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = rt.Delete(context.Background(), id) })
		if !srv.LocalSandboxes() {
			t.Skip("the emulator's sandboxes are host processes here (no bubblewrap): volumes are recorded, not mounted")
		}
		sb, err := c.GetSandbox(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if len(sb.Volumes) != 1 || sb.Volumes[0].MountPath != "/workspace/scratch" || sb.Volumes[0].VolumeID != v.ID {
			t.Fatalf("%s: the sandbox's volumes: %+v; want %s at /workspace/scratch", tc.name, sb.Volumes, v.ID)
		}

		srv.ResetCounts()
		for _, mode := range []fs.FileMode{0o755, 0o600} {
			if err := rt.WriteFile(ctx, id, "scratch/bin/run.sh", strings.NewReader("#!/bin/sh\n"), mode); err != nil {
				t.Fatalf("%s: WriteFile(%04o) into the volume: %v", tc.name, mode, err)
			}
		}
		if n := srv.Count(routeSetPermissions); n != 0 {
			t.Fatalf("%s: %d set-permissions calls for writes into a volume; want none", tc.name, n)
		}
		for p, want := range map[string]fs.FileMode{"scratch": fs.ModeDir | 0o777, "scratch/bin": fs.ModeDir | 0o777, "scratch/bin/run.sh": 0o666} {
			if fi, err := rt.StatFile(ctx, id, p); err != nil || fi.Mode != want {
				t.Fatalf("%s: %s: %v %v; want %v", tc.name, p, fi.Mode, err, want)
			}
		}
		list, err := rt.ListFiles(ctx, id, ".", 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, fi := range list.Entries {
			if fi.Path == "scratch" && fi.Mode != fs.ModeDir|0o777 {
				t.Fatalf("%s: listing the workspace: scratch is %v; want drwxrwxrwx", tc.name, fi.Mode)
			}
		}

		err = c.SetFileMode(ctx, sb, "/workspace/scratch/bin/run.sh", 0o755)
		switch {
		case tc.root && err != nil:
			t.Fatalf("root: chmod in a volume: %v; want success (and no change)", err)
		case !tc.root && !hasStatus(err, http.StatusBadRequest):
			t.Fatalf("daytona: chmod in a volume: %v; want 400 (EPERM)", err)
		}
		if fi, err := rt.StatFile(ctx, id, "scratch/bin/run.sh"); err != nil || fi.Mode != 0o666 {
			t.Fatalf("%s: run.sh after chmod: %v %v; want 0666", tc.name, fi.Mode, err)
		}

		if err := rt.WriteFile(ctx, id, "top.sh", strings.NewReader("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		if fi, err := rt.StatFile(ctx, id, "top.sh"); err != nil || fi.Mode != 0o755 {
			t.Fatalf("%s: top.sh outside the volume: %v %v; want 0755", tc.name, fi.Mode, err)
		}
	}
}
