//go:build linux

package local

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
)

// A volume mounted in two sandboxes shares its files between them, each sandbox's user
// owns what it sees there (whatever id slot the sandbox has), a subpath mounts one
// folder of it, created when missing, and the files stay on the host after the
// sandboxes are gone.
func TestVolumeSharedBetweenSandboxes(t *testing.T) {
	t.Parallel()
	r, rel := newTestRuntime(t)
	ctx := context.Background()
	vs := volumeStore{dir: volumesDir(r.b.root)}
	v, err := vs.Create(ctx, sandbox.VolumeSpec{Name: "cache"})
	if err != nil {
		t.Fatal(err)
	}
	create(t, r, sandbox.CreateRequest{ID: "a", SnapshotID: rel, Volumes: []sandbox.VolumeMount{{Volume: v.ID, MountPath: "/data"}}})
	create(t, r, sandbox.CreateRequest{ID: "b", SnapshotID: rel, Volumes: []sandbox.VolumeMount{
		{Volume: v.ID, MountPath: "/workspace/shared"},
		{Volume: v.ID, MountPath: "/srv/team", Subpath: "teams/red"},
	}})
	mustSh(t, r, "a", "echo from-a > /data/hello && mkdir -p /data/teams/red && echo red > /data/teams/red/note")
	if got := mustSh(t, r, "b", "cat /workspace/shared/hello /srv/team/note"); got != "from-a\nred" {
		t.Fatalf("sandbox b reads %q from the volume, want a's files", got)
	}
	if got := mustSh(t, r, "b", "echo from-b >> /workspace/shared/hello && stat -c %u /workspace/shared/hello /srv/team/note && id -u"); got != "1000\n1000\n1000" {
		t.Fatalf("owners inside b (files, then b's user): %q; want the sandbox user (1000) for all", got)
	}
	// A restarted sandbox, and a restored one (with a new id slot), mounts its volumes
	// again.
	if err := r.Stop(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if err := r.Start(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if got := mustSh(t, r, "a", "cat /data/hello"); got != "from-a\nfrom-b" {
		t.Fatalf("sandbox a reads %q after b appended and a restarted", got)
	}
	if err := r.Archive(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if err := r.Start(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if got := mustSh(t, r, "a", "echo restored >> /data/hello && cat /data/hello"); got != "from-a\nfrom-b\nrestored" {
		t.Fatalf("sandbox a reads %q after a restore", got)
	}

	// A missing subpath is created, as a folder of the volume.
	create(t, r, sandbox.CreateRequest{ID: "c", SnapshotID: rel, Volumes: []sandbox.VolumeMount{{Volume: v.ID, MountPath: "/mnt/x", Subpath: "new/deep"}}})
	mustSh(t, r, "c", "echo c > /mnt/x/f")
	for _, id := range []string{"a", "b", "c"} {
		if err := r.Delete(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	if data, err := os.ReadFile(filepath.Join(vs.dir, "cache", "new", "deep", "f")); err != nil || string(data) != "c\n" {
		t.Fatalf("the volume's file after its sandboxes were deleted: %q, %v", data, err)
	}
	if err := vs.Delete(ctx, v.ID); err != nil {
		t.Fatal(err)
	}
	if got, err := vs.Get(ctx, v.ID); err != nil || got != nil {
		t.Fatalf("volume after Delete: %+v, %v", got, err)
	}
}

// A subpath cannot reach outside its volume: not with '..' or an absolute path, not
// through a symbolic link a sandbox put into the volume (to the host's root, or even to
// another folder of the volume), and a volume that does not exist is refused.
func TestVolumeSubpathEscape(t *testing.T) {
	t.Parallel()
	r, rel := newTestRuntime(t)
	ctx := context.Background()
	vs := volumeStore{dir: volumesDir(r.b.root)}
	v, err := vs.Create(ctx, sandbox.VolumeSpec{Name: "shared"})
	if err != nil {
		t.Fatal(err)
	}
	create(t, r, sandbox.CreateRequest{ID: "attacker", SnapshotID: rel, Volumes: []sandbox.VolumeMount{{Volume: v.ID, MountPath: "/data"}}})
	mustSh(t, r, "attacker", "ln -s / /data/root && ln -s /etc /data/etc && mkdir /data/inside && ln -s inside /data/hop && mkdir -p /data/a && ln -s /etc /data/a/b")

	for i, sub := range []string{"../..", "/etc", "root", "etc", "hop", "a/b", "a/b/ssl", "root/tmp/escaped"} {
		id := "victim" + string(rune('a'+i))
		err := r.Create(ctx, sandbox.CreateRequest{ID: id, SnapshotID: rel, Volumes: []sandbox.VolumeMount{{Volume: v.ID, MountPath: "/mnt/v", Subpath: sub}}})
		if err == nil {
			out := sh(t, r, id, "ls /mnt/v; cat /mnt/v/passwd /mnt/v/hostname 2>&1")
			t.Errorf("subpath %q: sandbox created; it sees %q", sub, out.Stdout)
			continue
		}
		t.Logf("subpath %q refused: %v", sub, err)
		if _, err := os.Lstat(r.dir(id)); err == nil {
			t.Errorf("subpath %q: a refused sandbox was left behind", sub)
		}
	}
	if _, err := os.Stat("/tmp/escaped"); err == nil {
		t.Error("a subpath was created outside the volume, at /tmp/escaped")
	}
	for _, m := range []sandbox.VolumeMount{
		{Volume: "missing", MountPath: "/data"},
		{Volume: "../local-backend", MountPath: "/data"},
		{Volume: v.ID, MountPath: "/etc/x"},
		{Volume: v.ID, MountPath: "relative"},
	} {
		err := r.Create(ctx, sandbox.CreateRequest{ID: "bad", SnapshotID: rel, Volumes: []sandbox.VolumeMount{m}})
		if err == nil {
			t.Errorf("mount %+v: sandbox created", m)
			_ = r.Delete(ctx, "bad")
		}
	}
}

// The local backend has no registries, and says what to use instead.
func TestLocalRegistriesRefused(t *testing.T) {
	_, err := NewBackend().Registries(context.Background(), sandbox.ProviderConfig{})
	if err == nil || !strings.Contains(err.Error(), "need a daytona provider") {
		t.Fatalf("Registries: %v", err)
	}
}

// The attack from the host's side: a sandbox copies a shell into its volume and sets the
// set-user-ID bit. On the host the copy belongs to the runtime's user (root, when the
// runtime runs as root), so no other user of the host may reach it: the volumes
// directory is the runtime user's alone (0700), and the unprivileged account cannot even
// look the file up, let alone run it.
func TestVolumeSetuidFileUnreachableFromHost(t *testing.T) {
	t.Parallel()
	r, rel := newTestRuntime(t)
	ctx := context.Background()
	vs := volumeStore{dir: volumesDir(r.b.root)}
	// An earlier release made the directory 0711: Create tightens it.
	if err := os.MkdirAll(vs.dir, 0o711); err != nil {
		t.Fatal(err)
	}
	v, err := vs.Create(ctx, sandbox.VolumeSpec{Name: "loot"})
	if err != nil {
		t.Fatal(err)
	}
	create(t, r, sandbox.CreateRequest{ID: "suid", SnapshotID: rel, Volumes: []sandbox.VolumeMount{{Volume: v.ID, MountPath: "/data"}}})
	t.Cleanup(func() { _ = r.Delete(ctx, "suid") })
	mustSh(t, r, "suid", "cp /bin/sh /data/sh && chmod 4755 /data/sh")
	shell := filepath.Join(vs.dir, v.ID, "sh")
	fi, err := os.Stat(shell)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	t.Logf("on the host: %s uid %d mode %v", shell, st.Uid, fi.Mode())
	if int(st.Uid) != os.Geteuid() {
		t.Fatalf("the sandbox's file is owned by host uid %d; want the runtime's user %d", st.Uid, os.Geteuid())
	}
	di, err := os.Stat(vs.dir)
	if err != nil {
		t.Fatal(err)
	}
	if di.Mode().Perm() != 0o700 || int(di.Sys().(*syscall.Stat_t).Uid) != os.Geteuid() {
		t.Fatalf("volumes directory %s: mode %v owner %d; want 0700, the runtime's user's", vs.dir, di.Mode(), di.Sys().(*syscall.Stat_t).Uid)
	}
	if os.Geteuid() != 0 {
		return // the file is this user's own: there is nobody to escalate from
	}
	// As the unprivileged account: the set-user-ID shell cannot be reached.
	cmd := exec.Command(shell, "-c", "id -u")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: unprivUID, Gid: unprivUID}}
	out, err := cmd.CombinedOutput()
	if err == nil || strings.TrimSpace(string(out)) == "0" {
		t.Fatalf("uid %d ran the sandbox's set-user-ID shell: %v, %q", unprivUID, err, out)
	}
	if _, err := os.Stat(filepath.Dir(shell)); err != nil {
		t.Fatal(err)
	}
}

// The attack of issue 23: a sandbox writes more into a volume than the volume's size.
// As root the volume is an image of its size: the write fails with ENOSPC inside the
// sandbox, the sandbox keeps working, a second sandbox shares the same files, the host
// keeps at most about the size for it, and growing it in place makes room. Unprivileged
// (no mount) the size cannot be enforced: with require_limits the volume is refused,
// without it the volume is a plain directory and the runtime says so.
func TestAttackVolumeFill(t *testing.T) {
	t.Parallel()
	r, rel := newTestRuntime(t)
	ctx := context.Background()
	vs := volumeStore{dir: volumesDir(r.b.root)}
	const sizeMB = 16
	if why := volumeSizeUnenforced(false); why != "" {
		req := volumeStore{dir: vs.dir, require: true}
		if _, err := req.Create(ctx, sandbox.VolumeSpec{Name: "capped", SizeMB: sizeMB}); !errors.Is(err, ErrVolumeSizeUnenforced) {
			t.Fatalf("a volume whose size cannot be enforced, limits required: %v, want ErrVolumeSizeUnenforced", err)
		}
		v, err := vs.Create(ctx, sandbox.VolumeSpec{Name: "capped", SizeMB: sizeMB})
		if err != nil {
			t.Fatal(err)
		}
		mounts := []sandbox.VolumeMount{{Volume: v.ID, MountPath: "/data"}}
		if u := r.UnenforcedVolumes(mounts); len(u) != 1 || u[0].Limit != "volume" {
			t.Fatalf("unenforced volumes %v, want the volume's size", u)
		}
		t.Skipf("skipping the fill: a volume's size is not enforced here (documented): %s", why)
	}
	v, err := vs.Create(ctx, sandbox.VolumeSpec{Name: "capped", SizeMB: sizeMB})
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(vs.dir, v.ID)
	t.Cleanup(func() {
		for _, id := range []string{"fill", "peer"} {
			_ = r.Delete(ctx, id)
		}
		if err := vs.Delete(ctx, v.ID); err != nil {
			t.Error(err)
		}
		if isMountPoint(dir) {
			t.Errorf("volume %s still mounted after Delete", dir)
		}
	})
	if u := r.UnenforcedVolumes([]sandbox.VolumeMount{{Volume: v.ID, MountPath: "/data"}}); len(u) != 0 {
		t.Fatalf("unenforced volumes %v, want none", u)
	}
	create(t, r, sandbox.CreateRequest{ID: "fill", SnapshotID: rel, Volumes: []sandbox.VolumeMount{{Volume: v.ID, MountPath: "/data"}}})
	create(t, r, sandbox.CreateRequest{ID: "peer", SnapshotID: rel, Volumes: []sandbox.VolumeMount{{Volume: v.ID, MountPath: "/srv/v"}}})
	res := sh(t, r, "fill", "head -c 40000000 /dev/zero > /data/big")
	if res.ExitCode == 0 || !strings.Contains(string(res.Stderr), "No space left on device") {
		t.Fatalf("40 MB into a %d MiB volume: exit %d, stderr %q; want the write to fail with ENOSPC", sizeMB, res.ExitCode, res.Stderr)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(volumeImage(dir), &st); err != nil {
		t.Fatal(err)
	}
	if used := st.Blocks * 512; used > (sizeMB+1)<<20 {
		t.Fatalf("the host keeps %d bytes for a %d MiB volume", used, sizeMB)
	}
	if !isMountPoint(dir) {
		t.Fatalf("volume %s is not on its own filesystem on the host", dir)
	}
	// The sandbox works on, and so does the volume once there is room again.
	if got := mustSh(t, r, "fill", "rm /data/big && echo ok > /data/small && echo ws > /workspace/f && cat /data/small /workspace/f"); got != "ok\nws" {
		t.Fatalf("after the full volume: %q", got)
	}
	if got := mustSh(t, r, "peer", "cat /srv/v/small"); got != "ok" {
		t.Fatalf("the other sandbox reads %q from the shared volume", got)
	}
	// Grown in place: online while sandboxes mount it where the host lets root resize a
	// mounted filesystem (CAP_SYS_RESOURCE), else once they are stopped. The files
	// stay, and there is more room.
	if err := vs.Grow(ctx, v.ID, 2*sizeMB); err != nil {
		t.Logf("growing while mounted by running sandboxes: %v", err)
		if !strings.Contains(err.Error(), "stop or delete those sandboxes") {
			t.Fatal(err)
		}
		for _, id := range []string{"fill", "peer"} {
			if err := r.Stop(ctx, id); err != nil {
				t.Fatal(err)
			}
		}
		if err := vs.Grow(ctx, v.ID, 2*sizeMB); err != nil {
			t.Fatal(err)
		}
		if err := r.Start(ctx, "peer"); err != nil {
			t.Fatal(err)
		}
	}
	if got := mustSh(t, r, "peer", "head -c 24000000 /dev/zero > /srv/v/more && cat /srv/v/small && rm /srv/v/more"); got != "ok" {
		t.Fatalf("after growing: %q", got)
	}
}

// The runtime's file operations (an agent's write_file, read_file, ...) on a path inside
// a volume mounted in the workspace work on the volume, as the sandbox's commands see
// it, not on the host's workspace directory under the mount point (where a write was
// hidden from the sandbox and lost with it): a file written is in the volume, for this
// sandbox's commands and for another sandbox, owned by the sandbox user; a file a
// command wrote is read, stated, listed and deleted; a subpath mount is its folder of
// the volume; a mount point is the volume's root and cannot be deleted.
func TestVolumeFilesInWorkspace(t *testing.T) {
	t.Parallel()
	r, rel := newTestRuntime(t)
	ctx := context.Background()
	vs := volumeStore{dir: volumesDir(r.b.root)}
	for _, name := range []string{"cache", "team"} {
		if _, err := vs.Create(ctx, sandbox.VolumeSpec{Name: name}); err != nil {
			t.Fatal(err)
		}
	}
	create(t, r, sandbox.CreateRequest{ID: "a", SnapshotID: rel, Volumes: []sandbox.VolumeMount{
		{Volume: "cache", MountPath: "/workspace/data"},
		{Volume: "team", MountPath: "/data", Subpath: "red"},
		{Volume: "team", MountPath: "/workspace/sub/red", Subpath: "red"},
	}})
	create(t, r, sandbox.CreateRequest{ID: "b", SnapshotID: rel, Volumes: []sandbox.VolumeMount{{Volume: "cache", MountPath: "/workspace/data"}}})

	// Written by the runtime: in the volume, on the host and in both sandboxes.
	if err := r.WriteFile(ctx, "a", "data/x", strings.NewReader("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := r.WriteFile(ctx, "a", "/workspace/data/deep/dir/f", strings.NewReader("f\n"), 0); err != nil {
		t.Fatal(err)
	}
	if err := r.WriteFile(ctx, "a", "sub/red/note", strings.NewReader("red\n"), 0); err != nil {
		t.Fatal(err)
	}
	if got := mustSh(t, r, "a", "cat /workspace/data/x data/deep/dir/f /data/note"); got != "hello\nf\nred" {
		t.Fatalf("sandbox a reads %q of the files the runtime wrote into its volumes", got)
	}
	host := filepath.Join(vs.dir, "cache", "x")
	if data, err := os.ReadFile(host); err != nil || string(data) != "hello\n" {
		t.Fatalf("the volume's file on the host: %q, %v", data, err)
	}
	if data, err := os.ReadFile(filepath.Join(vs.dir, "team", "red", "note")); err != nil || string(data) != "red\n" {
		t.Fatalf("the subpath's file on the host: %q, %v", data, err)
	}
	if _, err := os.Lstat(filepath.Join(r.wsDir("a"), "data", "x")); err == nil {
		t.Fatal("the file was written into the host's workspace directory, under the mount point")
	}
	if data, err := r.ReadFile(ctx, "b", "data/x", 0); err != nil || string(data) != "hello\n" {
		t.Fatalf("sandbox b's ReadFile of the shared volume: %q, %v", data, err)
	}
	if got := mustSh(t, r, "b", "cat /workspace/data/x"); got != "hello" {
		t.Fatalf("sandbox b reads %q from the shared volume", got)
	}

	// Owned by the sandbox user inside (the runtime's user on the host, as what a
	// sandbox writes there): the sandbox's commands append to them and delete them.
	if got := mustSh(t, r, "a", "stat -c %u /workspace/data/x /workspace/data/deep /workspace/data/deep/dir/f && id -u"); got != "1000\n1000\n1000\n1000" {
		t.Fatalf("owners inside a (x, deep, deep/dir/f, then a's user): %q; want the sandbox user (1000)", got)
	}
	if fi, err := os.Stat(host); err != nil || int(fi.Sys().(*syscall.Stat_t).Uid) != os.Geteuid() {
		t.Fatalf("the volume's file on the host: %v; want it owned by the runtime's user %d", err, os.Geteuid())
	}
	if got := mustSh(t, r, "b", "echo more >> /workspace/data/x && touch data/deep/dir/g && rm -r data/deep && cat data/x"); got != "hello\nmore" {
		t.Fatalf("sandbox b appending to and deleting the runtime's files: %q", got)
	}

	// Written by a command: read, stated, listed, deleted.
	mustSh(t, r, "a", "echo from-a > /workspace/data/y")
	if data, err := r.ReadFile(ctx, "a", "data/y", 0); err != nil || string(data) != "from-a\n" {
		t.Fatalf("ReadFile of a command's file in the volume: %q, %v", data, err)
	}
	if fi, err := r.StatFile(ctx, "b", "data/y"); err != nil || fi.Size != 7 || !fi.Mode.IsRegular() || fi.Path != "data/y" {
		t.Fatalf("StatFile: %+v, %v", fi, err)
	}
	if fi, err := r.StatFile(ctx, "a", "data"); err != nil || !fi.Mode.IsDir() {
		t.Fatalf("StatFile of the mount point: %+v, %v; want the volume's root directory", fi, err)
	}
	list, err := r.ListFiles(ctx, "a", "/workspace/data", 0)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range list.Entries {
		names = append(names, f.Path)
	}
	if strings.Join(names, ",") != "data/x,data/y" {
		t.Fatalf("ListFiles of the mount point: %v; want the volume's files", names)
	}
	if err := r.DeleteFile(ctx, "a", "data/y"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(vs.dir, "cache", "y")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the deleted file on the host: %v", err)
	}
	if got := mustSh(t, r, "b", "test -e data/y && echo yes || echo no"); got != "no" {
		t.Fatalf("the deleted file in sandbox b: %q", got)
	}

	// A mount point, or a directory holding one, is a mount, not a file.
	for _, p := range []string{"data", "/workspace/data/", "sub", "sub/red"} {
		err := r.DeleteFile(ctx, "a", p)
		if err == nil || !strings.Contains(err.Error(), "volume") {
			t.Errorf("DeleteFile(%q): %v; want it refused as a volume mount", p, err)
		}
	}
	if err := r.WriteFile(ctx, "a", "data", strings.NewReader("x"), 0); err == nil {
		t.Error("WriteFile over a mount point succeeded")
	}
	if got := mustSh(t, r, "a", "cat data/x sub/red/note"); got != "hello\nmore\nred" {
		t.Fatalf("the volumes after the refused deletes: %q", got)
	}
}

// A symbolic link a sandbox plants in a volume is no way out of it for the runtime's
// file operations, as in the workspace: not to a directory of the host (which the link
// names by its host path), not to /etc, not up out of the volume, and not as the
// subpath of a mount (which the sandbox, mounting the whole volume elsewhere, replaced).
// Nothing is written outside the volume.
func TestVolumeFilesSymlinkEscape(t *testing.T) {
	t.Parallel()
	r, rel := newTestRuntime(t)
	ctx := context.Background()
	vs := volumeStore{dir: volumesDir(r.b.root)}
	if _, err := vs.Create(ctx, sandbox.VolumeSpec{Name: "shared"}); err != nil {
		t.Fatal(err)
	}
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("HOST-CANARY"), 0o644); err != nil {
		t.Fatal(err)
	}
	create(t, r, sandbox.CreateRequest{ID: "attacker", SnapshotID: rel, Volumes: []sandbox.VolumeMount{
		{Volume: "shared", MountPath: "/workspace/data"},
		{Volume: "shared", MountPath: "/workspace/team", Subpath: "team"},
	}})
	mustSh(t, r, "attacker", "ln -s /etc data/evil && ln -s "+outside+" data/out && ln -s ../../.. data/up && "+
		"mv data/team data/team.old && ln -s "+outside+" data/team")

	for _, p := range []string{"data/evil/passwd", "data/out/secret", "data/up/etc/passwd", "data/evil", "team/secret"} {
		if data, err := r.ReadFile(ctx, "attacker", p, 0); !errors.Is(err, sandbox.ErrNotRegular) {
			t.Errorf("ReadFile(%q): %q, %v; want ErrNotRegular", p, data, err)
		}
	}
	for _, p := range []string{"data/out/secret", "data/out/planted", "data/out/new/planted", "data/evil/trueforge-planted", "data/up/planted", "team/planted"} {
		if err := r.WriteFile(ctx, "attacker", p, strings.NewReader("PLANTED"), 0o644); err == nil {
			t.Errorf("WriteFile(%q) succeeded", p)
		} else {
			t.Logf("WriteFile(%q) refused: %v", p, err)
		}
	}
	if _, err := r.ListFiles(ctx, "attacker", "team", 0); err == nil {
		t.Error("ListFiles through a subpath replaced by a symbolic link succeeded")
	}
	for _, p := range []string{"data/out", "data/evil"} {
		if err := r.DeleteFile(ctx, "attacker", p); err != nil {
			t.Errorf("DeleteFile(%q), the link itself: %v", p, err)
		}
	}
	entries, err := os.ReadDir(outside)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Name() != "secret" {
		t.Errorf("the host directory the links named holds %v; want only its own file", entries)
	}
	if data, err := os.ReadFile(filepath.Join(outside, "secret")); err != nil || string(data) != "HOST-CANARY" {
		t.Errorf("the host file: %q, %v", data, err)
	}
	// data/up leads, on the host, from the volume's directory to the builder root's parent.
	for _, p := range []string{"/etc/trueforge-planted", filepath.Join(filepath.Dir(r.b.root), "planted")} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s was written on the host", p)
		}
	}
	if got := mustSh(t, r, "attacker", "ls /etc/passwd && ls -A data"); got != "/etc/passwd\nteam\nteam.old\nup" {
		t.Errorf("inside after the deletes: %q", got)
	}
}
