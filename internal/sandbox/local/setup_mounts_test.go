//go:build linux

package local

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
)

// TestSandboxDoesNotPinTheHostsFileSystems: a sandbox created while a loop-backed ext4
// file system (another team's volume, another sandbox's disk) is mounted on the host does
// not keep it: once the host unmounts it, its loop device detaches, as growing a volume
// offline needs (growVolume); before, the setup step's copy of the host's mounts held it
// for the sandbox's life. The sandbox itself still works.
func TestSandboxDoesNotPinTheHostsFileSystems(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting an ext4 image on the host needs root (make test runs as root)")
	}
	r, rel := newTestRuntime(t)
	dir := t.TempDir()
	img, mnt := filepath.Join(dir, "img"), filepath.Join(dir, "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range [][]string{{"truncate", "-s", "16M", img}, {"mkfs.ext4", "-q", img}, {"mount", "-o", "loop,nosuid,nodev", img, mnt}} {
		if out, err := exec.Command(c[0], c[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v: %s", c, err, out)
		}
	}
	mounted := true
	t.Cleanup(func() {
		if mounted {
			_ = exec.Command("umount", "-l", mnt).Run()
		}
	})
	dev, err := mountSource(mnt)
	if err != nil {
		t.Fatal(err)
	}
	create(t, r, sandbox.CreateRequest{ID: "pin", SnapshotID: rel})
	if out, err := exec.Command("umount", mnt).CombinedOutput(); err != nil {
		t.Fatalf("umount: %v: %s", err, out)
	}
	mounted = false
	backing := filepath.Join("/sys/block", filepath.Base(dev), "loop", "backing_file")
	deadline := time.Now().Add(5 * time.Second)
	for {
		b, err := os.ReadFile(backing)
		if err != nil || strings.TrimSpace(string(b)) != img {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s still backs %s 5 s after the host unmounted it: the sandbox's namespace pins it", img, dev)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if res, err := r.Exec(t.Context(), "pin", sandbox.ExecRequest{Shell: "echo ok > /workspace/f && cat /workspace/f"}); err != nil || strings.TrimSpace(string(res.Stdout)) != "ok" {
		t.Fatalf("the sandbox after the host's unmount: %+v %v", res, err)
	}
}

// TestKeeperLeavesTheHostsMounts: once a sandbox runs, its keeper's mount namespace (where
// bwrap's outer process stays) holds none of the host's mounts but those the setup step
// put in its own root for bwrap (leaveHost): a tmpfs the host mounted before the sandbox
// started is not there, and neither is the host's root.
func TestKeeperLeavesTheHostsMounts(t *testing.T) {
	requireRoot(t, "mounting on the host needs root (make test runs as root)")
	r, rel := newTestRuntime(t)
	mnt := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=1m", "trueforge-leave-test", mnt).CombinedOutput(); err != nil {
		t.Fatalf("mount: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", mnt).Run() })
	create(t, r, sandbox.CreateRequest{ID: "leave", SnapshotID: rel})
	pid, _, err := readPidFile(r.keeperFile("leave"))
	if err != nil {
		t.Fatal(err)
	}
	info, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "mountinfo"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(info), "\n") {
		if strings.Contains(line, "trueforge-leave-test") || strings.Contains(line, " "+mnt+" ") {
			t.Errorf("the keeper's namespace still has the host's mount of %s: %s", mnt, line)
		}
	}
	if res, err := r.Exec(t.Context(), "leave", sandbox.ExecRequest{Shell: "echo ok"}); err != nil || strings.TrimSpace(string(res.Stdout)) != "ok" {
		t.Fatalf("the sandbox: %+v %v", res, err)
	}
}
